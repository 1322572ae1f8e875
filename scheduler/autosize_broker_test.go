package scheduler

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/internal/sizing"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/lookupsrv"
)

// realBroker returns the real broker of KAFKA_BROKERS and names unique to
// this run (topics and groups outlive the test there), or skips the test.
func realBroker(t *testing.T) (brokers []string, name string) {
	b := os.Getenv("KAFKA_BROKERS")
	if b == "" {
		t.Skip("KAFKA_BROKERS is not set: this test runs on the real broker")
	}
	stamp := time.Now().UnixNano()
	brokers, name = strings.Split(b, ","), fmt.Sprintf("%s-%d", strings.ToLower(t.Name()), stamp)
	// The test's topics, and those the host makes for it, hold its name's
	// stamp (a subtest rewrites the rest: a "/" is no topic's).
	kafkatest.DeleteNamedAtEnd(t, brokers, fmt.Sprintf("-%d", stamp))
	return brokers, name
}

// TestAutoPoolGrowsForBurstThenSettles: instances: auto on one partition of
// the real broker. Under light steady traffic the pool stays on its
// minimum; a burst of CPU-bound records grows it — to about the cores the
// host has (2 guest calls at once on this machine), not to its bound of 64;
// once the backlog is gone the target and the pool settle back to 1.
func TestAutoPoolGrowsForBurstThenSettles(t *testing.T) {
	brokers, n := realBroker(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 1, in, out, dlq)
	cfg := testConfigWith(t, brokers, n, guestPath(t, "hash"), in, out, dlq,
		"    ordering: none\n    instances: {max: auto, idle_timeout: 500ms}", "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	stop := steadyLoad(t, brokers, in, 20*time.Millisecond, 2, 50)
	defer stop()
	kafkatest.Eventually(t, 30*time.Second, "assigned, on the minimum", func() bool {
		s := r.Snapshots()[0]
		return s.Tasks == 1 && s.Instances == 1 && s.TargetInstances == 1 && s.Done > 50
	})
	before := r.Snapshots()[0]
	const burst = 400
	produceHash(t, brokers, in, burst, func(i int) string { return fmt.Sprint("b", i) }, func(int) int { return 3000 })
	peak, peakTarget := 0, 0
	var reason string
	kafkatest.Eventually(t, 2*time.Minute, "the burst done", func() bool {
		s := r.Snapshots()[0]
		peak, peakTarget = max(peak, s.Instances), max(peakTarget, s.TargetInstances)
		if s.TargetInstances > 1 && reason == "" {
			reason = s.PoolReason
		}
		return s.Done >= before.Fetched+burst && s.InFlight < 20
	})
	t.Logf("burst of %d: peak %d instances, peak target %d (%s)", burst, peak, peakTarget, reason)
	if peak < 2 || peakTarget < 2 {
		t.Fatalf("peak %d instances, target %d under a backlog of CPU-bound records: auto did not grow", peak, peakTarget)
	}
	if peakTarget > 4 {
		t.Fatalf("peak target %d on a host running 2 guest calls at once: auto grew past what the cores can run", peakTarget)
	}
	if !strings.Contains(reason, sizing.ReasonQueueing) {
		t.Fatalf("reason of the growth %q, want %s", reason, sizing.ReasonQueueing)
	}
	kafkatest.Eventually(t, 10*time.Second, "the pool and its target back on 1", func() bool {
		s := r.Snapshots()[0]
		return s.Instances == 1 && s.TargetInstances == 1
	})
	s := r.Snapshots()[0]
	t.Logf("settled: %d instance(s), target %d (%s)", s.Instances, s.TargetInstances, s.PoolReason)
}

// TestAutoAsyncLimitFollowsTheService: async.max_in_flight: auto on one
// partition of the real broker, with a backlog of lookups. While the
// service answers in 10 ms whatever the load, the limit rises well above
// its start (4); when the service becomes overloaded mid-run (every
// request waits 5 ms for each one in progress), the limit falls back.
func TestAutoAsyncLimitFollowsTheService(t *testing.T) {
	brokers, n := realBroker(t)
	var overloaded atomic.Bool
	var srv *lookupsrv.Server
	srv = lookupsrv.New(t, func(string) time.Duration {
		if overloaded.Load() {
			return 5 * time.Millisecond * time.Duration(srv.Cur.Load())
		}
		return 10 * time.Millisecond
	})
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 1, in, out, dlq)
	const records = 40000
	kafkatest.Produce(t, brokers, in, records, func(i int) string { return fmt.Sprint(i) })
	cfg := testConfigWith(t, brokers, n, guestPath(t, "lookup"), in, out, dlq,
		asyncKeys(srv, "      max_in_flight: auto"), "")
	cfg.Pipelines[0].Limits.RecordTimeout = 30 * time.Second
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	var fast Snapshot
	kafkatest.Eventually(t, time.Minute, "the limit up with a fast service", func() bool {
		fast = r.Snapshots()[0]
		return fast.AsyncLimit >= 16 && strings.HasPrefix(fast.AsyncReason, sizing.ReasonGain)
	})
	t.Logf("fast service: limit %d (%s); %d done; peak %d lookups at once", fast.AsyncLimit, fast.AsyncReason, fast.Done, srv.Peak.Load())
	if fast.Done >= records {
		t.Fatal("the backlog ran out before the service slowed: the test proves nothing")
	}
	overloaded.Store(true)
	var slow Snapshot
	kafkatest.Eventually(t, 30*time.Second, "the limit down with an overloaded service", func() bool {
		slow = r.Snapshots()[0]
		return slow.AsyncLimit <= 4 && strings.HasPrefix(slow.AsyncReason, sizing.ReasonLatencyRise)
	})
	t.Logf("overloaded service: limit %d (%s); %d done", slow.AsyncLimit, slow.AsyncReason, slow.Done)
}
