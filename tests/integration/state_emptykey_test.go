//go:build integration

package integration

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestStateEmptyKeyRealBroker: the count example over ordinary keys with
// records of the empty key among them, and records of a null key sent to
// the partition the empty key belongs to (the count example counts both
// under the empty key); then a restart on a wiped state directory (a full
// restore from the changelog) and a second round of the same records.
// Every key is counted to its true count through every count from 1, the
// empty key included, and nothing is dead-lettered, under exactly_once
// (every count once in the read_committed output) and at_least_once. Before, the changelog record of
// the empty key had a null key, which the compacted changelog refuses
// (INVALID_RECORD), and the store refused the empty key at each flush,
// dropping the partition's other writes with it: after the restart the
// partition's other keys counted from 1 again.
func TestStateEmptyKeyRealBroker(t *testing.T) {
	for _, mode := range []string{"exactly_once", "at_least_once"} {
		t.Run(mode, func(t *testing.T) {
			eos := mode == "exactly_once"
			brokers := kafkatest.RealBrokers(t)
			n := names(t)
			in, out, dlq := n+"-in", n+"-out", n+"-dlq"
			const parts = 4
			kafkatest.CreateTopic(t, brokers, parts, in, out, dlq)
			keys := ""
			if eos {
				keys = eosKeys
			}
			dir := t.TempDir()
			cfg := writeConfig(t, brokers, n, modules["count"], in, out, dlq, "")
			replace(t, cfg, "    retry: {max_attempts: 1}\n", fmt.Sprintf("    retry: {max_attempts: 1}\n    state: {enabled: true, dir: %q}\n%s", dir, keys))
			rd := kafkatest.NewReader(t, brokers, out)
			want := map[string]int{}
			produce := func(count int) {
				t.Helper()
				produceWithEmptyKeys(t, brokers, in, parts, count, want)
			}
			run := func(what string) {
				t.Helper()
				p := startProc(t, "run", "--config", cfg)
				for range 2 { // the second half after the first's commits
					produce(3000)
					topCountsOf(t, rd, want)
				}
				kafkatest.Eventually(t, time.Minute, "the process restored its state", func() bool { return strings.Contains(p.logText(), "state restored") })
				if code := p.stop(t, time.Minute); code != 0 {
					t.Fatalf("%s: exit code %d after SIGTERM\n%s", what, code, tail(p.logText(), 40))
				}
			}
			run("first run")
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			run("restart on a wiped state directory")
			top, seen := topCountsOf(t, rd, want)
			total, dups := 0, 0
			for k, c := range want {
				total += c
				if top[k] != c {
					t.Errorf("key %q: counted to %d, want %d", k, top[k], c)
				}
				for i := 1; i <= c; i++ {
					if seen[fmt.Sprintf("%q=%d", k, i)] == 0 {
						t.Errorf("key %q: count %d never output", k, i)
						break
					}
				}
			}
			for kc, c := range seen {
				if c > 1 {
					dups += c - 1
					if eos && dups < 5 {
						t.Errorf("%s appears %d times", kc, c)
					}
				}
			}
			if eos && (len(seen) != total || dups > 0) {
				t.Errorf("not exactly once: %d distinct counts for %d records, %d duplicates", len(seen), total, dups)
			}
			dl := kafkatest.NewReader(t, brokers, dlq)
			dl.ReadFor(2 * time.Second)
			if len(dl.Recs) > 0 {
				t.Errorf("%d records dead-lettered; the first: %q", len(dl.Recs), kafkatest.Header(dl.Recs[0], "wasmstream.error"))
			}
			t.Logf("%s: %d records over %d keys, the empty key's %d; every count exact after a full restore; %d duplicate outputs", mode, total, len(want), want[""], dups)
		})
	}
}

// produceWithEmptyKeys produces count records keyed "k<i%stateKeys>" to
// topic (parts partitions), with a record of the empty key after every
// 50th and one of a null key, sent to the empty key's partition, after
// every 150th, in one ProduceSync; it adds their true counts to want (""
// for both: the count example counts a null key under the empty key).
func produceWithEmptyKeys(t *testing.T, brokers []string, topic string, parts, count int, want map[string]int) {
	t.Helper()
	part := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
	emptyPart := int32(part.Partition(&kgo.Record{Key: []byte{}}, parts))
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	base := 0
	for _, c := range want {
		base += c
	}
	var recs []*kgo.Record
	for i := 0; i < count; i++ {
		k := fmt.Sprintf("k%d", (base+i)%stateKeys)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(strconv.Itoa(i)), Partition: int32(part.Partition(&kgo.Record{Key: []byte(k)}, parts))})
		want[k]++
		if i%50 == 49 {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte{}, Value: []byte("empty"), Partition: emptyPart})
			want[""]++
		}
		if i%150 == 149 {
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte("null"), Partition: emptyPart})
			want[""]++
		}
	}
	ctx, cancel := ctxTimeout(time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// topCountsOf reads the count outputs until every key's highest count is
// at least its count in want, then 2 s more; it returns the highest count
// per key and the number of outputs of each "key=count". (Not the last:
// the outputs of a null key are spread over the output's partitions.)
func topCountsOf(t *testing.T, rd *kafkatest.Reader, want map[string]int) (top map[string]int, seen map[string]int) {
	t.Helper()
	co := newCountOutputs()
	short := func() (out []string) {
		for k, c := range want {
			if co.top[k] < c {
				out = append(out, fmt.Sprintf("%q at %d of %d", k, co.top[k], c))
			}
		}
		return out
	}
	deadline := time.Now().Add(2 * time.Minute)
	for co.fold(t, rd.Recs); len(short()) > 0; co.fold(t, rd.Recs) {
		if time.Now().After(deadline) {
			t.Fatalf("after 2m, %d outputs: keys below their true count: %v", len(rd.Recs), short())
		}
		rd.ReadFor(500 * time.Millisecond)
	}
	rd.ReadFor(2 * time.Second)
	co.fold(t, rd.Recs)
	seen = map[string]int{}
	for key, counts := range co.seen {
		for c, n := range counts {
			seen[fmt.Sprintf("%q=%d", key, c)] = n
		}
	}
	return co.top, seen
}
