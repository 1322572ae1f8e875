package ledger

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/offsets"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// The ledgers are a seam of the engine (partition.Ledger): these tests
// hold what each decides without a task, a client or a broker.

func TestLedgerPolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		l    partition.Ledger
		want partition.LedgerPolicy
	}{
		{"offsets, ordering partition", Offsets{Ordered: true}, partition.LedgerPolicy{Order: partition.ReleaseInOrder, Tracks: true}},
		{"offsets, done offsets", Offsets{DoneOffsets: true}, partition.LedgerPolicy{Order: partition.ReleaseAny, Tracks: true, DoneOffsets: true}},
		{"transactions", Txn{}, partition.LedgerPolicy{Order: partition.ReleaseByOffset, Tracks: true, DropKeepsPlace: true, CountsAtCommit: true}},
		{"share", Share{}, partition.LedgerPolicy{}},
	} {
		if got := tc.l.Policy(); got != tc.want {
			t.Errorf("%s: policy %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestTrackerLedgersDoneOnce: a record is done in its partition's tracker
// once; an abandoned one stays counted in its task (uncommitted).
func TestTrackerLedgersDoneOnce(t *testing.T) {
	t.Parallel()
	for _, l := range []partition.Ledger{Offsets{}, Txn{}} {
		var tr offsets.Tracker
		for o := int64(10); o < 13; o++ {
			tr.Add(o, 0)
		}
		r := &kgo.Record{Offset: 11}
		if !l.Done(&tr, r) {
			t.Errorf("%T: first Done of offset 11 false", l)
		}
		if l.Done(&tr, r) {
			t.Errorf("%T: second Done of offset 11 true: a record is finished once", l)
		}
		if l.Abandon(&kgo.Record{Offset: 10}) {
			t.Errorf("%T: Abandon lets the record go: it must stay counted until its task closes", l)
		}
		if n := tr.Pending(); n != 2 {
			t.Errorf("%T: %d offsets pending, want 2 (10 and 12)", l, n)
		}
	}
}

func shareFetch(recs ...*kgo.Record) kgo.Fetches {
	return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "in", Partitions: []kgo.FetchPartition{{Partition: 0, Records: recs}}}}}}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestShareDoneAndAbandon: a held record is accepted once or released once,
// whichever comes first; the poll loop hears when none is held.
func TestShareDoneAndAbandon(t *testing.T) {
	t.Parallel()
	locks := NewShareLocks(quietLog())
	l := Share{Locks: locks, Log: quietLog()}
	a, b, c := &kgo.Record{Offset: 1}, &kgo.Record{Offset: 2}, &kgo.Record{Offset: 3}
	locks.Add(0, shareFetch(a, b, c), time.Now())
	if n := locks.Len(); n != 3 {
		t.Fatalf("held %d, want 3", n)
	}
	if !l.Done(nil, a) || l.Done(nil, a) {
		t.Error("Done of a held record: want true once, then false")
	}
	if !l.Abandon(b) {
		t.Error("Abandon of a held record false: the task would keep counting it")
	}
	if l.Abandon(b) || l.Done(nil, b) {
		t.Error("a released record was acknowledged again")
	}
	select {
	case <-locks.Emptied(0):
		t.Fatal("Empty signalled with a record still held")
	default:
	}
	if !l.Done(nil, c) {
		t.Error("Done of the last held record false")
	}
	select {
	case <-locks.Emptied(0):
	default:
		t.Fatal("Empty not signalled once no record is held")
	}
	s := &locks.Stats
	if s.Acquired.Load() != 3 || s.Accepted.Load() != 2 || s.Released.Load() != 1 || s.Polls.Load() != 1 {
		t.Errorf("acquired %d accepted %d released %d polls %d, want 3 2 1 1", s.Acquired.Load(), s.Accepted.Load(), s.Released.Load(), s.Polls.Load())
	}
}

// TestShareLocksPerMember: each member's poll loop hears when its own
// records are all acknowledged, whatever the other member still holds —
// the second member's in-flight records must not hold back the first
// member's next poll — and ReleaseAll empties both.
func TestShareLocksPerMember(t *testing.T) {
	t.Parallel()
	locks := NewShareLocks(quietLog())
	l := Share{Locks: locks, Log: quietLog()}
	a, b, c := &kgo.Record{Offset: 1}, &kgo.Record{Offset: 2}, &kgo.Record{Offset: 3}
	locks.Add(0, shareFetch(a), time.Now())
	locks.Add(1, shareFetch(b, c), time.Now())
	if h0, h1, n := locks.HeldBy(0), locks.HeldBy(1), locks.Len(); h0 != 1 || h1 != 2 || n != 3 {
		t.Fatalf("held by 0: %d, by 1: %d, in all %d; want 1 2 3", h0, h1, n)
	}
	if !l.Done(nil, a) {
		t.Fatal("Done of a held record false")
	}
	select {
	case <-locks.Emptied(0):
	default:
		t.Fatal("member 0 not told its records are acknowledged while member 1 holds records")
	}
	if !l.Done(nil, b) {
		t.Fatal("Done of a held record false")
	}
	select {
	case <-locks.Emptied(1):
		t.Fatal("member 1 told it holds nothing with a record still held")
	case <-locks.Emptied(0):
		t.Fatal("member 0 signalled for member 1's record")
	default:
	}
	if n := locks.ReleaseAll(); n != 1 || locks.HeldBy(1) != 0 || locks.Len() != 0 {
		t.Fatalf("ReleaseAll released %d, member 1 holds %d, %d in all; want 1 0 0", n, locks.HeldBy(1), locks.Len())
	}
}

// TestShareLocksRenewAndLapse: a lock is renewed at half its duration, and
// one past its estimated end is counted lapsed once and never renewed;
// ReleaseAll gives back what is still held.
func TestShareLocksRenewAndLapse(t *testing.T) {
	t.Parallel()
	locks := NewShareLocks(quietLog())
	t0 := time.Now()
	a, b := &kgo.Record{Offset: 1}, &kgo.Record{Offset: 2}
	locks.Add(0, shareFetch(a, b), t0) // no acquisition deadline: the default lock, 30 s
	if n := locks.Renew(t0.Add(defaultLockFor/2 - time.Second)); n != 0 {
		t.Errorf("renewed %d before half the lock passed", n)
	}
	if n := locks.Renew(t0.Add(defaultLockFor / 2)); n != 2 {
		t.Errorf("renewed %d at half the lock, want 2", n)
	}
	t1 := t0.Add(defaultLockFor / 2)
	if n := locks.Renew(t1.Add(defaultLockFor + time.Second)); n != 0 {
		t.Errorf("renewed %d locks past their end", n)
	}
	locks.Renew(t1.Add(2 * defaultLockFor))
	if got := locks.Stats.Lapsed.Load(); got != 2 {
		t.Errorf("lapsed %d, want 2 (each counted once)", got)
	}
	if lapsed, ok := locks.Take(a); !ok || !lapsed {
		t.Errorf("Take of a lapsed record: lapsed %v ok %v, want true true", lapsed, ok)
	}
	if n := locks.ReleaseAll(); n != 1 || locks.Len() != 0 {
		t.Errorf("ReleaseAll released %d leaving %d, want 1 leaving 0", n, locks.Len())
	}
	if got := locks.Stats.Renewed.Load(); got != 2 {
		t.Errorf("renewed %d, want 2", got)
	}
}
