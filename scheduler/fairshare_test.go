package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestLoopingPipelineDoesNotStarveOthers: pipeline "hog" runs guests that
// loop until their 1 s deadline on four partitions, enough to keep every
// guest-call slot busy; pipeline "healthy" then gets 200 records. Calls
// cannot be interrupted, so healthy may first wait for one looping call to
// reach its deadline (1 s); from then on it keeps its share of the slots.
// Bound asserted: 1 s + 9 s for 200 records (they take well under a second
// on an idle host). With one FIFO of slots for every pipeline each healthy
// record queued behind looping calls: 79.5 s.
func TestLoopingPipelineDoesNotStarveOthers(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 4, "hog-in")
	kafkatest.CreateTopic(t, brokers, 1, "hog-out", "hog-dlq", "ok-in", "ok-out", "ok-dlq")
	const loops = 4 * 60 // a minute of looping per partition
	kafkatest.Produce(t, brokers, "hog-in", loops, func(i int) string { return fmt.Sprintf(`{"i":%d,"fault":"loop"}`, i) })
	y := fmt.Sprintf(`
kafka:
  brokers: [%q]
  group: g
  commit_interval: 100ms
pipelines:
  - name: hog
    module: %s
    inputs: [hog-in]
    output: hog-out
    dead_letter_topic: hog-dlq
    retry: {max_attempts: 1}
    limits: {record_timeout: 1s, memory_pages: 256}
  - name: healthy
    module: %s
    inputs: [ok-in]
    output: ok-out
    dead_letter_topic: ok-dlq
    retry: {max_attempts: 1}
    limits: {record_timeout: 1s, memory_pages: 256}
shutdown:
  drain_timeout: 3s
`, strings.Join(brokers, ","), guestPath(t, "enrich"), guestPath(t, "uppercase"))
	cfg := configFromYAML(t, y)
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	kafkatest.Eventually(t, 30*time.Second, "the hog loops on every partition, healthy joined", func() bool {
		s := r.Snapshots()
		return s[0].Tasks == 4 && s[0].Faults > 0 && s[0].Busy >= 2 && s[1].Tasks == 1
	})

	const n = 200
	start := time.Now()
	kafkatest.Produce(t, brokers, "ok-in", n, func(i int) string { return fmt.Sprintf("rec-%03d", i) })
	rd := kafkatest.NewReader(t, brokers, "ok-out")
	rd.ReadUntil(t, 3*time.Minute, "every healthy output", func(rs []*kgo.Record) bool { return len(rs) >= n })
	took := time.Since(start)
	s := r.Snapshots()
	t.Logf("%d healthy records took %s beside a pipeline looping to its 1 s deadline (%d hog faults so far)", n, took.Round(time.Millisecond), s[0].Faults)
	if bound := 10 * time.Second; took > bound {
		t.Fatalf("%d healthy records took %s beside a looping pipeline; bound %s", n, took, bound)
	}
	if s[1].DeadLetter != 0 || s[1].Faults != 0 {
		t.Fatalf("healthy pipeline failed records: %+v", s[1])
	}
	if s[0].Busy < 1 {
		t.Fatalf("the hog lost every slot: %+v", s[0])
	}
}
