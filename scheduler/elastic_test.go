package scheduler

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/memtrim"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// steadyLoad produces batch records for the hash example every period, each
// hashing rounds times, until the returned function is called.
func steadyLoad(t *testing.T, brokers []string, topic string, period time.Duration, batch, rounds int) (stop func()) {
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(0))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		hs := []kgo.RecordHeader{{Key: "rounds", Value: []byte(strconv.Itoa(rounds))}}
		for i := 0; ; {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			recs := make([]*kgo.Record, batch)
			for j := range recs {
				recs[j] = &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i)), Headers: hs}
				i++
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil && ctx.Err() == nil {
				t.Errorf("steady load: %v", err)
				return
			}
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// sampleInstances samples the pipeline's live instances every 50ms for d and
// returns the smallest and largest count seen.
func sampleInstances(r *Runner, d time.Duration) (lo, hi int) {
	lo = 1 << 30
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		n := r.Snapshots()[0].Instances
		lo, hi = min(lo, n), max(hi, n)
	}
	return lo, hi
}

// poolConfig is ordering none on one partition with a pool of 1 to 4 and a
// short idle timeout. grow_after is 100 ms rather than the default 20 ms: a
// batch that finds the instance busy waits about a millisecond either way,
// but on a loaded 2-core CI machine (the race detector, other packages'
// tests) a worker goroutine is sometimes not scheduled for 20 ms, and
// growing then is right, not what these tests are about.
func poolConfig(t *testing.T, brokers []string) *Runner {
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "hash"), "in", "out", "dlq",
		"    ordering: none\n    instances: {min: 1, max: 4, idle_timeout: 300ms, grow_after: 100ms}", "")
	return startRunner(t, cfg)
}

// TestPoolSettlesUnderSteadyLoad: traffic at a fraction of one instance's
// capacity, arriving in batches that often find the instance busy, runs on
// the minimum: the pool does not grow for a batch that waits a moment, and
// what it borrowed (the start-up backlog, a hiccup) is given back within
// idle_timeout although every worker could get an occasional record.
func TestPoolSettlesUnderSteadyLoad(t *testing.T) {
	brokers := kafkatest.Fake(t)
	r := poolConfig(t, brokers)
	defer r.Stop(context.Background())
	stop := steadyLoad(t, brokers, "in", 20*time.Millisecond, 4, 50)
	defer stop()
	time.Sleep(300*time.Millisecond + time.Second) // idle_timeout and a little
	start := r.Snapshots()[0]
	lo, hi := sampleInstances(r, 4*time.Second)
	end := r.Snapshots()[0]
	rate := float64(end.Done-start.Done) / 4
	t.Logf("steady load: %.0f rec/s done, instances %d..%d over 4s (borrowed %d, released %d), %d in flight", rate, lo, hi, end.Borrowed, end.Released, end.InFlight)
	if rate < 150 {
		t.Fatalf("%.0f rec/s done of 200 produced: the pool does not keep up, the test proves nothing", rate)
	}
	if hi != 1 {
		t.Fatalf("instances %d..%d under steady load at a fraction of capacity, want the minimum (1) throughout", lo, hi)
	}
}

// TestPoolGrowsForBurstThenShrinks: on top of steady light traffic, a burst
// of slow records grows the pool to its maximum, the backlog drains, and the
// pool shrinks back to its minimum while the light traffic goes on.
func TestPoolGrowsForBurstThenShrinks(t *testing.T) {
	brokers := kafkatest.Fake(t)
	r := poolConfig(t, brokers)
	defer r.Stop(context.Background())
	stop := steadyLoad(t, brokers, "in", 20*time.Millisecond, 4, 50)
	defer stop()
	kafkatest.Eventually(t, 10*time.Second, "the pool on its minimum", func() bool { return r.Snapshots()[0].Instances == 1 })
	before := r.Snapshots()[0]
	trims := r.trimmer.Trims()
	const burst = 600
	// Slow enough that the backlog outlasts the pool's growth (three steps
	// of grow_after) several times over: the guest's code is not
	// instrumented by the race detector, so the same work is needed with
	// it and without (500 drained the burst in under half a second on a
	// quiet machine, before the pool had grown to 4).
	const work = 5000
	produceHash(t, brokers, "in", burst, func(i int) string { return "b" + strconv.Itoa(i) }, func(int) int { return work })
	peak := 0
	kafkatest.Eventually(t, time.Minute, "the burst done", func() bool {
		s := r.Snapshots()[0]
		peak = max(peak, s.Instances)
		return s.Done >= before.Fetched+burst && s.InFlight < 50
	})
	drained := time.Now()
	if peak != 4 {
		t.Fatalf("peak %d instances for a backlog of %d slow records, want the maximum (4)", peak, burst)
	}
	kafkatest.Eventually(t, 300*time.Millisecond+2*time.Second, "the pool back on its minimum", func() bool { return r.Snapshots()[0].Instances == 1 })
	shrunk := time.Since(drained)
	lo, hi := sampleInstances(r, 3*time.Second)
	s := r.Snapshots()[0]
	t.Logf("burst of %d: peak %d instances, back to 1 %v after the backlog drained; then %d..%d over 3s (borrowed %d, released %d)", burst, peak, shrunk.Round(time.Millisecond), lo, hi, s.Borrowed, s.Released)
	if hi != 1 {
		t.Fatalf("instances %d..%d after the burst under light traffic, want 1", lo, hi)
	}
	if s.Borrowed < 3 || s.Released < 3 {
		t.Fatalf("borrowed %d, released %d: want at least the 3 above the minimum each way", s.Borrowed, s.Released)
	}
	// The instances given back are collected soon after, not whenever
	// the collector next runs (memtrim).
	kafkatest.Eventually(t, memtrim.Settle+memtrim.Gap+2*time.Second, "a trim after the instances were given back", func() bool { return r.trimmer.Trims() > trims })
}
