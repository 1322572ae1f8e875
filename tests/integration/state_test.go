//go:build integration

package integration

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// Stateful pipelines on the real broker under SIGKILL (issue 21): the count
// example's running counts per key.

const stateKeys = 97 // kafkatest.Produce's keys: "k<i%97>"

func stateRun(t *testing.T, count int, pipelineKeys string) (brokers []string, out, cfg string) {
	brokers = kafkatest.RealBrokers(t)
	n := names(t)
	in, dlq := n+"-in", n+"-dlq"
	out = n + "-out"
	kafkatest.CreateTopic(t, brokers, 4, in, out, dlq)
	kafkatest.Produce(t, brokers, in, count, strconv.Itoa)
	cfg = writeConfig(t, brokers, n, modules["count"], in, out, dlq, "")
	replace(t, cfg, "    retry: {max_attempts: 1}\n", fmt.Sprintf("    retry: {max_attempts: 1}\n    state: {enabled: true, dir: %q}\n%s", t.TempDir(), pipelineKeys))
	return brokers, out, cfg
}

// readCounts reads the count outputs until every key reached its true
// count (of count records over stateKeys keys) and a little longer; it
// returns, per key, how often each count appeared.
func readCounts(t *testing.T, rd *kafkatest.Reader, count int) map[string]map[int]int {
	t.Helper()
	truth := func(k int) int { return count/stateKeys + map[bool]int{true: 1}[k < count%stateKeys] }
	seen := map[string]map[int]int{}
	counted := 0
	read := func(rs []*kgo.Record) {
		for _, r := range rs[counted:] {
			c, err := strconv.Atoi(string(r.Value))
			if err != nil {
				t.Fatalf("output %q", r.Value)
			}
			if seen[string(r.Key)] == nil {
				seen[string(r.Key)] = map[int]int{}
			}
			seen[string(r.Key)][c]++
		}
		counted = len(rs)
	}
	complete := func() bool {
		for k := 0; k < stateKeys; k++ {
			if seen[fmt.Sprintf("k%d", k)][truth(k)] == 0 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(2 * time.Minute)
	for read(rd.Recs); !complete() && time.Now().Before(deadline); read(rd.Recs) {
		rd.ReadFor(500 * time.Millisecond)
	}
	rd.ReadFor(3 * time.Second)
	read(rd.Recs)
	if !complete() {
		for _, r := range rd.Recs[:5] {
			t.Logf("sample: %q=%q at %d@%d", r.Key, r.Value, r.Partition, r.Offset)
		}
		// Which keys fell short, and how their counts went.
		shown := 0
		for k := 0; k < stateKeys && shown < 3; k++ {
			key := fmt.Sprintf("k%d", k)
			if seen[key][truth(k)] > 0 {
				continue
			}
			shown++
			var odd []string
			for c := 1; c <= truth(k) && len(odd) < 20; c++ {
				if n := seen[key][c]; n != 1 {
					odd = append(odd, fmt.Sprintf("%d×%d", c, n))
				}
			}
			t.Errorf("key %s never reached %d; counts seen other than once: %v", key, truth(k), odd)
			for _, r := range rd.Recs {
				if string(r.Key) == key {
					if c, _ := strconv.Atoi(string(r.Value)); seen[key][c] != 1 {
						t.Logf("  %s=%d at out %d@%d producer %d/%d %s", key, c, r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch, r.Timestamp.Format("15:04:05.000"))
					}
				}
			}
		}
		t.Fatalf("%d records read: not every key reached its count", len(rd.Recs))
	}
	for k := 0; k < stateKeys; k++ {
		key := fmt.Sprintf("k%d", k)
		for c := range seen[key] {
			if c > truth(k) {
				t.Errorf("key %s counted to %d, above its %d records", key, c, truth(k))
				break
			}
		}
	}
	return seen
}

// TestStateExactlyOnceKills: five SIGKILLs of a stateful exactly_once
// pipeline, each followed by a restart (an incremental restore from the
// changelog, read_committed). The read_committed output holds every count
// of every key exactly once: 1, 2, ... up to the key's number of records.
func TestStateExactlyOnceKills(t *testing.T) {
	const count = 60000
	brokers, out, cfg := stateRun(t, count, eosKeys)
	rd := kafkatest.NewReader(t, brokers, out)
	p := startProc(t, "run", "--config", cfg)
	for i, frac := range []int{10, 25, 40, 55, 70} {
		rd.ReadUntil(t, 3*time.Minute, fmt.Sprintf("%d%% of the outputs before kill %d", frac, i+1), func(rs []*kgo.Record) bool { return len(rs) >= count*frac/100 })
		time.Sleep(time.Duration(23*(i+1)) * time.Millisecond)
		p.kill(t)
		t.Logf("kill %d after %d committed outputs", i+1, len(rd.Recs))
		p = startProc(t, "run", "--config", cfg)
	}
	seen := readCounts(t, rd, count)
	kafkatest.Eventually(t, time.Minute, "the last process restored its state", func() bool { return strings.Contains(p.logText(), "state restored") })
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	dups, total := 0, 0
	for key, cs := range seen {
		for c, n := range cs {
			total++
			if n > 1 {
				dups += n - 1
				if dups < 5 {
					t.Errorf("key %s: count %d appears %d times", key, c, n)
				}
			}
		}
	}
	if total != count || dups > 0 {
		t.Fatalf("not exactly once: %d distinct counts for %d records, %d duplicates", total, count, dups)
	}
	t.Logf("%d records, 5 kills: every count of every key once", count)
}

// TestStateAtLeastOnceKills: the same under at_least_once: a record may be
// counted twice (its changelog write acknowledged, its offset not yet
// committed when the process died), never lost: every key reaches at least
// its true count. readCounts fails on counts above the truth, so this test
// reads the maximum itself.
func TestStateAtLeastOnceKills(t *testing.T) {
	const count = 200000
	brokers, out, cfg := stateRun(t, count, "")
	rd := kafkatest.NewReader(t, brokers, out)
	p := startProc(t, "run", "--config", cfg)
	for i, frac := range []int{20, 50} {
		rd.ReadUntil(t, 3*time.Minute, fmt.Sprintf("%d%% of the outputs before kill %d", frac, i+1), func(rs []*kgo.Record) bool { return len(rs) >= count*frac/100 })
		p.kill(t)
		p = startProc(t, "run", "--config", cfg)
	}
	truth := func(k int) int { return count/stateKeys + map[bool]int{true: 1}[k < count%stateKeys] }
	top := map[string]int{}
	rd.ReadUntil(t, 4*time.Minute, "every key at least at its true count", func(rs []*kgo.Record) bool {
		for _, r := range rs {
			c, _ := strconv.Atoi(string(r.Value))
			top[string(r.Key)] = max(top[string(r.Key)], c)
		}
		for k := 0; k < stateKeys; k++ {
			if top[fmt.Sprintf("k%d", k)] < truth(k) {
				return false
			}
		}
		return true
	})
	// The last process may have had nothing left to do: let it start
	// (restore its stores) before it is stopped.
	kafkatest.Eventually(t, time.Minute, "the last process restored its state", func() bool { return strings.Contains(p.logText(), "state restored") })
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	over := 0
	for k := 0; k < stateKeys; k++ {
		over += top[fmt.Sprintf("k%d", k)] - truth(k)
	}
	t.Logf("%d records, 2 kills: no key below its count; %d counted twice", count, over)
}
