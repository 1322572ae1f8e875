package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/internal/commit"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestExactlyOnceFencedRebuilds: on the real broker, an exactly_once
// pipeline's transactional producer is fenced mid-run by a producer with
// the same transactional id, twice, each time with records in flight.
// franz-go's producer cannot go on after that; the pipeline is rebuilt
// with a new client (the host does not stop), rejoins its group and goes
// on from the committed offsets: every input comes out exactly once (with
// state: every count exact, each once) and the offsets are committed to
// the end. Once the pipeline has been rebuilt maxRebuilds times within
// rebuildWindow, the next fence fails the host, naming the pipeline.
func TestExactlyOnceFencedRebuilds(t *testing.T) {
	for _, withState := range []bool{false, true} {
		t.Run(map[bool]string{false: "stateless", true: "with state"}[withState], func(t *testing.T) {
			brokers, n := realBroker(t)
			n = strings.NewReplacer("/", ".", " ", "_").Replace(n) // a subtest's name is no topic's
			in, out, dlq := n+"-in", n+"-out", n+"-dlq"
			kafkatest.CreateTopic(t, brokers, 2, in, out, dlq)
			const half = 2000
			eos := "    guarantee: exactly_once\n    transactions: {max_records: 100, interval: 100ms}"
			cfg := testConfigWith(t, brokers, n, guestPath(t, "hash"), in, out, dlq, eos, "")
			produce := func() {
				produceHash(t, brokers, in, half, func(i int) string { return fmt.Sprint(i) }, func(int) int { return 100 })
			}
			if withState {
				cfg = testConfigWith(t, brokers, n, guestPath(t, "count"), in, out, dlq, stateConfig(t, brokers, t.TempDir(), "\n"+eos), "")
				produce = func() { kafkatest.Produce(t, brokers, in, half, strconv.Itoa) }
			}
			produce()
			r := startRunner(t, cfg)
			defer r.Stop(context.Background())
			failed := func() {
				t.Helper()
				select {
				case err := <-r.Failed():
					t.Fatalf("the host failed: %v", err)
				default:
				}
			}
			pipe := func() *Pipeline { return r.Pipelines()[0] }
			txnID := pipe().commit.(*commit.Transactions).TxnID()
			for i := 1; i <= 2; i++ {
				committed := pipe().Snapshot().TxnCommitted
				kafkatest.Eventually(t, time.Minute, "a transaction committed", func() bool {
					failed()
					return pipe().Snapshot().TxnCommitted > committed
				})
				produce() // records in flight when the fence lands
				kafkatest.FenceProducer(t, brokers, txnID)
				kafkatest.Eventually(t, time.Minute, "the pipeline rebuilt", func() bool {
					failed()
					return pipe().Snapshot().Rebuilds >= int64(i)
				})
			}
			if withState {
				want := trueCounts(half, 3)
				top, seen := countState(t, kafkatest.NewReader(t, brokers, out), want)
				checkCounts(t, top, want)
				for kc, c := range seen {
					if c != 1 {
						t.Errorf("%s appears %d times", kc, c)
					}
				}
			} else {
				checkOnce(t, eosCounts(t, brokers, out, 3*half), 3*half)
			}
			kafkatest.Eventually(t, time.Minute, "offsets committed to the end", func() bool {
				sum := int64(0)
				for _, o := range kafkatest.Committed(t, brokers, cfg.GroupID(&cfg.Pipelines[0]), in) {
					sum += o
				}
				return sum == 3*half
			})
			failed()
			s := pipe().Snapshot()
			t.Logf("%d rebuilds; %d transactions committed, %d aborted", s.Rebuilds, s.TxnCommitted, s.TxnAborted)

			// The bound: rebuilt maxRebuilds times within the window (the
			// two above and one more recorded), the next fence fails the
			// host.
			r.rebuilds.allow("p", time.Now())
			produce()
			kafkatest.FenceProducer(t, brokers, txnID)
			select {
			case err := <-r.Failed():
				if !strings.Contains(err.Error(), "pipeline p:") {
					t.Fatalf("the host failed with %q: the pipeline is not named", err)
				}
				t.Logf("after %d rebuilds: %v", maxRebuilds, err)
			case <-time.After(time.Minute):
				t.Fatal("fenced again after maxRebuilds rebuilds, the host did not fail")
			}
		})
	}
}

// TestRebuildsBounded: a pipeline is rebuilt at most maxRebuilds times
// within rebuildWindow; rebuilds older than the window do not count, and
// each pipeline counts its own.
func TestRebuildsBounded(t *testing.T) {
	var b rebuilds
	now := time.Now()
	for i := 0; i < maxRebuilds; i++ {
		if !b.allow("a", now.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("rebuild %d refused", i+1)
		}
	}
	if b.allow("a", now.Add(time.Minute)) {
		t.Fatalf("rebuild %d within %v allowed", maxRebuilds+1, rebuildWindow)
	}
	if !b.allow("b", now.Add(time.Minute)) {
		t.Fatal("another pipeline's rebuild refused")
	}
	later := now.Add(rebuildWindow + maxRebuilds*time.Second)
	for i := 0; i < maxRebuilds; i++ {
		if !b.allow("a", later) {
			t.Fatalf("rebuild %d refused once the earlier ones left the window", i+1)
		}
	}
	if b.allow("a", later) {
		t.Fatalf("rebuild %d within %v allowed", maxRebuilds+1, rebuildWindow)
	}
}
