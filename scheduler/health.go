package scheduler

import (
	"context"
	"errors"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
	"github.com/wasmstream/wasmstream/tracing"
)

// What an operator needs to tell a sick broker from a sick processor: the
// errors of the pipeline's client per broker, and which partitions are
// stalled and where their records wait. Both are read by the status line
// and the metrics; neither costs the record path anything.

// stallAfter is how long a partition whose records wait may go without a
// record done before it counts as stalled: longer than a commit interval
// or a broker's leader election, shorter than an operator's patience.
const stallAfter = 10 * time.Second

// Where a stalled partition's records wait.
const (
	// StallFetching: records wait on the broker (lag), none fetched: the
	// partition's leader is out of reach, or fetching is refused.
	StallFetching = "fetching"
	// StallProducing: records processed, their outputs (or their failure
	// copies) not acknowledged by the broker.
	StallProducing = "producing"
	// StallProcessing: records in the module (running, or waiting on its
	// asynchronous operations), or queued for an instance.
	StallProcessing = "processing"
)

var stallReasons = []string{StallFetching, StallProducing, StallProcessing}

// StalledPartition is a partition none of whose waiting records was done
// for at least stallAfter. Records wait when the partition has lag, records
// in flight or queued, or when its leader (in the client's metadata) met
// errors in that time: a host that cannot fetch from the leader cannot see
// the records that wait there either.
type StalledPartition struct {
	Topic     string
	Partition int32
	Reason    string        // StallFetching, StallProducing or StallProcessing
	For       time.Duration // since a record was last done, or records began to wait
}

// BrokerErrors are the errors a pipeline's client met with one broker since
// the pipeline started.
type BrokerErrors struct {
	// Broker is the node id, or "seed <host:port>" for a seed broker
	// before its node id is known.
	Broker  string
	Address string // host:port
	// Connect counts connections that could not be opened; Request,
	// requests that failed on an open connection (reset, timed out, closed).
	Connect, Request int64
	LastError        string // at most maxBrokerErrorBytes, one line
	LastAt           time.Time
}

const maxBrokerErrorBytes = 200

// brokerHealth counts broker errors through franz-go's hooks. The hooks
// are called from the client's connection goroutines, concurrently; they
// take a short lock and return.
type brokerHealth struct {
	mu sync.Mutex
	by map[string]*BrokerErrors
}

var (
	_ kgo.HookBrokerConnect = (*brokerHealth)(nil)
	_ kgo.HookBrokerE2E     = (*brokerHealth)(nil)
)

func newBrokerHealth() *brokerHealth { return &brokerHealth{by: map[string]*BrokerErrors{}} }

// OnBrokerConnect counts a connection that could not be opened.
func (h *brokerHealth) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if countable(err) {
		h.count(meta, err, true)
	}
}

// OnBrokerE2E counts a request that failed on its connection.
func (h *brokerHealth) OnBrokerE2E(meta kgo.BrokerMetadata, _ int16, e kgo.BrokerE2E) {
	if err := e.Err(); countable(err) {
		h.count(meta, err, false)
	}
}

// countable: an error of the network or the broker, not the client's own
// closing or cancelling.
func countable(err error) bool {
	return err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, kgo.ErrClientClosed)
}

func (h *brokerHealth) count(meta kgo.BrokerMetadata, err error, connect bool) {
	addr := net.JoinHostPort(meta.Host, strconv.Itoa(int(meta.Port)))
	name := strconv.Itoa(int(meta.NodeID))
	if meta.NodeID < 0 { // franz-go numbers seed brokers below zero
		name = "seed " + addr
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.by[name]
	if b == nil {
		b = &BrokerErrors{Broker: name, Address: addr}
		h.by[name] = b
	}
	if connect {
		b.Connect++
	} else {
		b.Request++
	}
	b.LastError, b.LastAt = tracing.OneLine(err.Error(), maxBrokerErrorBytes), time.Now()
}

// recent reports whether broker node met an error since t.
func (h *brokerHealth) recent(node int32, t time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	b := h.by[strconv.Itoa(int(node))]
	return b != nil && b.LastAt.After(t)
}

// snapshot returns the brokers with errors, by name.
func (h *brokerHealth) snapshot() []BrokerErrors {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	out := make([]BrokerErrors, 0, len(h.by))
	for _, b := range h.by {
		out = append(out, *b)
	}
	h.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Broker < out[j].Broker })
	return out
}

// stallTracker remembers, per partition, its done count and since when it
// has not moved while records waited. It learns only when read (the status
// line every status.interval, a metrics collection), so a stall is seen at
// that granularity.
type stallTracker struct {
	mu    sync.Mutex
	marks map[tp]stallMark
}

type stallMark struct {
	done   int64
	doneAt time.Time // when done last moved (or the partition was first seen)
	since  time.Time // since when records have waited without done moving
}

// stalled returns the partitions of gs stalled at now. done gives a
// partition's records done so far; leaderSick, whether its leader met
// errors within stallAfter. A partition whose leader is sick is counted
// from its last record done: the host saw no lag there while its fetch
// hung, before the first error named the leader.
func (s *stallTracker) stalled(gs []partition.TaskGauges, done func(tp) int64, leaderSick func(tp) bool, now time.Time) []StalledPartition {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.marks == nil {
		s.marks = map[tp]stallMark{}
	}
	var out []StalledPartition
	live := make(map[tp]bool, len(gs))
	for _, g := range gs {
		k := tp{Topic: g.Topic, Partition: g.Partition}
		live[k] = true
		d := done(k)
		m, ok := s.marks[k]
		if !ok || d != m.done {
			m = stallMark{done: d, doneAt: now, since: now}
		}
		sick := leaderSick(k)
		if !(g.Lag > 0 || g.InFlight > 0 || g.Queued > 0 || sick) {
			m.since = now // nothing waits
		}
		s.marks[k] = m
		stuck := now.Sub(m.since)
		if sick {
			stuck = now.Sub(m.doneAt)
		}
		if m.since.Equal(now) && !sick {
			continue
		}
		if stuck >= stallAfter {
			out = append(out, StalledPartition{Topic: g.Topic, Partition: g.Partition, Reason: stallReason(g), For: stuck})
		}
	}
	for k := range s.marks { // partitions no longer owned
		if !live[k] {
			delete(s.marks, k)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// stallReason says where a stalled partition's records wait.
func stallReason(g partition.TaskGauges) string {
	switch {
	case g.Busy > 0 || g.States[partition.WorkerAwaiting] > 0 || g.Queued > 0:
		return StallProcessing
	case g.InFlight > 0:
		return StallProducing
	default:
		return StallFetching
	}
}

// stalls returns the pipeline's stalled partitions among gs.
func (p *Pipeline) stalls(gs []partition.TaskGauges) []StalledPartition {
	now := time.Now()
	return p.counters.stall.stalled(gs, p.counters.partitionDone, p.leaderSick(now), now)
}

// partitionDone is a partition's records done so far.
func (c *pipeCounters) partitionDone(k tp) int64 {
	c.psMu.Lock()
	defer c.psMu.Unlock()
	if s := c.parts[k]; s != nil {
		return s.Done.Load()
	}
	return 0
}

// leaderSick reports whether a partition's leader, in the client's
// metadata, met errors within stallAfter of now.
func (p *Pipeline) leaderSick(now time.Time) func(tp) bool {
	return func(k tp) bool {
		if p.member.cl == nil {
			return false
		}
		leader, _, _ := p.member.cl.PartitionLeader(k.Topic, k.Partition)
		return leader >= 0 && p.counters.health.recent(leader, now.Add(-stallAfter))
	}
}
