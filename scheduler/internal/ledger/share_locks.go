// The locks a consume: share pipeline holds (RATIONALE.md, "Share
// groups"): every record a poll acquired, until it is accepted or released;
// the renewal loop keeps each lock alive while its record waits (async
// operations, inline retries, produces), and counts the ones it could not
// keep.

package ledger

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// MaxShareMembers is how many share-group members (clients) a pipeline's
// source may run on one host, each with a poll loop of its own
// (source.Share): the locks count and signal per member.
const MaxShareMembers = 2

// ShareLocks is the set of records acquired and not yet acknowledged, by
// the members of one pipeline on this host. Its mutex is a leaf (DESIGN.md,
// "Lock order").
type ShareLocks struct {
	mu   sync.Mutex
	held map[*kgo.Record]shareLock // by value: no allocation a record
	// heldBy counts held records by the member whose poll acquired them.
	heldBy [MaxShareMembers]int
	// lockFor is the broker's lock duration as last measured: a fresh
	// record's acquisition deadline minus when its poll returned.
	lockFor time.Duration
	// empty[m] gets a signal when member m's last held record is
	// acknowledged: its poll loop polls again only then (a member's poll
	// accepts every record of its previous one not acknowledged yet).
	empty [MaxShareMembers]chan struct{}
	log   *slog.Logger

	Stats ShareStats
}

// shareLock is one held record's lock, as the host estimates it.
type shareLock struct {
	until   time.Time // when it lapses unless renewed
	renewAt time.Time // when to renew it: half its duration before until
	lapsed  bool      // until passed while the record was held
	member  int       // the member whose poll acquired it
}

// ShareStats are a consume: share pipeline's acknowledgement counters.
type ShareStats struct {
	Acquired    atomic.Int64 // records acquired by polls
	Polls       atomic.Int64 // polls that returned records
	Accepted    atomic.Int64 // records accepted (their outcome durable)
	Released    atomic.Int64 // records given back for redelivery (shutdown, abort)
	Renewed     atomic.Int64 // lock renewals sent
	Lapsed      atomic.Int64 // locks the host could not keep: the broker may have given the record to another host
	Redelivered atomic.Int64 // records acquired with a delivery count above 1
	AckErrors   atomic.Int64 // partitions whose acknowledgements the broker refused or the client could not send
	// Deliveries counts acquired records by delivery count: 1, 2, 3, 4 and
	// 5 or more.
	Deliveries [5]atomic.Int64
}

// defaultLockFor is the broker's default lock (group.share.record.lock.duration.ms),
// assumed until a record's deadline says otherwise.
const defaultLockFor = 30 * time.Second

func NewShareLocks(log *slog.Logger) *ShareLocks {
	s := &ShareLocks{held: map[*kgo.Record]shareLock{}, lockFor: defaultLockFor, log: log}
	for m := range s.empty {
		s.empty[m] = make(chan struct{}, 1)
	}
	return s
}

// Add registers the records a poll of member (0 to MaxShareMembers-1)
// returned at now.
func (s *ShareLocks) Add(member int, fetches kgo.Fetches, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fetches.NumRecords() > 0 {
		s.Stats.Polls.Add(1)
	}
	fetches.EachRecord(func(r *kgo.Record) {
		if d := r.AcquisitionDeadline(); !d.IsZero() {
			if f := d.Sub(now); f > 0 {
				s.lockFor = f
			}
		}
		until := r.AcquisitionDeadline()
		if until.IsZero() {
			until = now.Add(s.lockFor)
		}
		s.held[r] = shareLock{until: until, renewAt: until.Add(-s.lockFor / 2), member: member}
		s.heldBy[member]++
		s.Stats.Acquired.Add(1)
		dc := max(int(r.DeliveryCount()), 1)
		s.Stats.Deliveries[min(dc, len(s.Stats.Deliveries))-1].Add(1)
		if dc > 1 {
			s.Stats.Redelivered.Add(1)
		}
	})
}

// Take removes r from the held set; false when it was not held (already
// acknowledged).
func (s *ShareLocks) Take(r *kgo.Record) (lapsed, ok bool) {
	s.mu.Lock()
	l, ok := s.held[r]
	if ok {
		delete(s.held, r)
		lapsed = l.lapsed
		if s.heldBy[l.member]--; s.heldBy[l.member] == 0 {
			select {
			case s.empty[l.member] <- struct{}{}:
			default:
			}
		}
	}
	s.mu.Unlock()
	return lapsed, ok
}

// Len is the number of records held by every member.
func (s *ShareLocks) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// HeldBy is the number of records member holds.
func (s *ShareLocks) HeldBy(member int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heldBy[member]
}

// Emptied gets a signal (buffered, one) when member's last held record is
// acknowledged or released.
func (s *ShareLocks) Emptied(member int) <-chan struct{} { return s.empty[member] }

// Renew renews every lock due at now, marks the ones past their estimated
// end as lapsed, and returns how many it renewed (the caller sends them at
// once: the client batches acknowledgements for up to a second). A Renew
// still unanswered makes the next one a no-op, which is why locks are
// renewed at half their duration.
func (s *ShareLocks) Renew(now time.Time) (renewed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for r, l := range s.held {
		switch {
		case l.lapsed:
			continue
		case now.After(l.until):
			l.lapsed = true
			s.Stats.Lapsed.Add(1)
			s.log.Warn("share lock lapsed: the broker may give the record to another host, which processes it too (at-least-once)",
				"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "delivery", r.DeliveryCount())
		case !now.Before(l.renewAt):
			r.Ack(kgo.AckRenew)
			s.Stats.Renewed.Add(1)
			renewed++
			l.until = now.Add(s.lockFor)
			l.renewAt = now.Add(s.lockFor / 2)
		default:
			continue
		}
		s.held[r] = l // a value: changing an entry while ranging is allowed
	}
	return renewed
}

// ReleaseAll gives every held record back to the broker for redelivery and
// empties the set; it returns how many it released.
func (s *ShareLocks) ReleaseAll() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for r := range s.held {
		r.Ack(kgo.AckRelease)
		delete(s.held, r)
		n++
	}
	s.heldBy = [MaxShareMembers]int{}
	s.Stats.Released.Add(int64(n))
	return n
}

// RenewInterval is how often the renewal loop looks at the locks: a tenth
// of the lock duration, between 50 ms and 1 s.
func (s *ShareLocks) RenewInterval() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return min(max(s.lockFor/10, 50*time.Millisecond), time.Second)
}
