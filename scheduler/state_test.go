package scheduler

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// Stateful pipelines on the in-process broker: the count example's running
// counts stay exact across restarts (incremental and full restores),
// rebalances, hot swaps and aborted transactions.

const stateKeys = 97 // kafkatest.Produce's keys: "k<i%97>"

// trueCounts is how many records have each key after rounds calls of
// kafkatest.Produce with n records each.
func trueCounts(n, rounds int) map[string]int {
	out := map[string]int{}
	for i := 0; i < n; i++ {
		out[fmt.Sprintf("k%d", i%stateKeys)] += rounds
	}
	return out
}

// countState reads the count pipeline's output until every key reached its
// true count, and returns the highest count seen per key and every
// (key, count) pair's number of appearances.
func countState(t *testing.T, rd *kafkatest.Reader, want map[string]int) (top map[string]int, seen map[string]int) {
	t.Helper()
	scan := func(rs []*kgo.Record) (map[string]int, map[string]int) {
		top, seen := map[string]int{}, map[string]int{}
		for _, r := range rs {
			c, err := strconv.Atoi(string(r.Value))
			if err != nil {
				t.Fatalf("output %q: %v", r.Value, err)
			}
			top[string(r.Key)] = max(top[string(r.Key)], c)
			seen[fmt.Sprintf("%s=%d", r.Key, c)]++
		}
		return top, seen
	}
	rd.ReadUntil(t, 2*time.Minute, "every key at its count", func(rs []*kgo.Record) bool {
		top, _ := scan(rs)
		for k, c := range want {
			if top[k] < c {
				return false
			}
		}
		return true
	})
	rd.ReadFor(300 * time.Millisecond) // anything over the truth
	return scan(rd.Recs)
}

func checkCounts(t *testing.T, top, want map[string]int) {
	t.Helper()
	for k, c := range want {
		if top[k] != c {
			t.Errorf("key %s: count %d, want %d", k, top[k], c)
		}
	}
	if len(top) != len(want) {
		t.Errorf("%d keys counted, want %d", len(top), len(want))
	}
}

func stateConfig(t *testing.T, brokers []string, dir, extra string) string {
	return fmt.Sprintf("    state: {enabled: true, dir: %q}\n    retry: {max_attempts: 1}%s", dir, extra)
}

// TestStateCountsAcrossRestarts: the counts are exact after a clean restart
// (the store reflects the changelog: nothing, or little, to restore) and
// after the state directory is wiped (a full restore from the changelog).
func TestStateCountsAcrossRestarts(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 4, "in", "out", "dlq")
	dir := t.TempDir()
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "count"), "in", "out", "dlq", stateConfig(t, brokers, dir, ""), "")
	value := func(i int) string { return strconv.Itoa(i) }
	rd := kafkatest.NewReader(t, brokers, "out")

	const n = 2000
	kafkatest.Produce(t, brokers, "in", n, value)
	r := startRunner(t, cfg)
	top, _ := countState(t, rd, trueCounts(n, 1))
	checkCounts(t, top, trueCounts(n, 1))
	r.Stop(context.Background())

	// Incremental: the stores reflect the changelog already.
	kafkatest.Produce(t, brokers, "in", n, func(i int) string { return value(n + i) })
	r = startRunner(t, cfg)
	top, _ = countState(t, rd, trueCounts(n, 2))
	checkCounts(t, top, trueCounts(n, 2))
	if got := r.Pipelines()[0].stats.StateRestored.Load(); got != 0 {
		t.Errorf("a clean restart restored %d changelog records, want 0", got)
	}
	r.Stop(context.Background())

	// Full: the directory is gone.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, brokers, "in", n, func(i int) string { return value(2*n + i) })
	start := time.Now()
	r = startRunner(t, cfg)
	top, _ = countState(t, rd, trueCounts(n, 3))
	checkCounts(t, top, trueCounts(n, 3))
	restored := r.Pipelines()[0].stats.StateRestored.Load()
	r.Stop(context.Background())
	if restored < stateKeys {
		t.Errorf("a full restore applied %d changelog records, want at least one per key (%d)", restored, stateKeys)
	}
	t.Logf("full restore: %d changelog records; run took %s", restored, time.Since(start))
}
