package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// stateAsyncRunInput is record i of TestStateAsyncRuns, for count-async: a
// count of its key, made in the record's call ("count.sync", keys s<i%10>)
// or in the completion of an asynchronous state get (keys a<i%10>: the
// record waits). Every 50th pair holds the rule that a waiting record's
// writes are its own until it is decided: record 25 of the fifty
// (key h<n>) writes 1000 under its key before its read, so it counts
// 1001; record 26, counted in its call right behind it (most often in the
// same run, while 25 waits), reads 1001 once 25 was decided, never the
// 1000 that 25 still holds. Every 41st other record fails its first
// attempt after its write (count.retry) and is retried in place.
func stateAsyncRunInput(topic string, i int) *kgo.Record {
	r := &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))}
	switch {
	case i%50 == 25:
		r.Key = []byte(fmt.Sprintf("h%02d", i/50))
		r.Headers = []kgo.RecordHeader{{Key: "count.set", Value: []byte("1000")}}
	case i%50 == 26:
		r.Key = []byte(fmt.Sprintf("h%02d", i/50))
		r.Headers = []kgo.RecordHeader{{Key: "count.sync"}}
	case i%3 == 0:
		r.Key = []byte(fmt.Sprintf("s%02d", i%10))
		r.Headers = []kgo.RecordHeader{{Key: "count.sync"}}
	default:
		r.Key = []byte(fmt.Sprintf("a%02d", i%10))
	}
	if i%41 == 13 && i%50 != 25 && i%50 != 26 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "count.retry"})
	}
	return r
}

// TestStateAsyncRuns: a stateful pipeline whose module is asynchronous
// (count-async) takes its records in runs, records that wait on a state
// read in the middle of a run's call beside records decided in it. Each
// record reads its state as alone: the counts made in the records' calls
// are exact (a record reads the writes of the records before it in its run
// that ended ok), a waiting record's write is not read before it is
// decided, and under ordering key (the key's lane held while its record
// waits) every count is exact; under ordering partition a record may read
// a key before an earlier record still waiting wrote it (ABI.md §4.1), so
// the waiting records' counts are only bounded by the truth. A record
// retried in place (its first attempt's write dropped) counts once. Every
// record is counted once, and calls ran several records.
func TestStateAsyncRuns(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	testStateAsyncRuns(t, func(t *testing.T) ([]string, string) { return kafkatest.Fake(t), "" })
}

// testStateAsyncRuns is TestStateAsyncRuns on the broker and with the
// prefix of topic and group names that each case's broker returns.
func testStateAsyncRuns(t *testing.T, broker func(t *testing.T) (brokers []string, prefix string)) {
	for _, tc := range []struct {
		name, ordering string
		instances      int
	}{{"partition", "partition", 1}, {"key", "key", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			brokers, prefix := broker(t)
			in, outTopic, dlq := prefix+"in", prefix+"out", prefix+"dlq"
			kafkatest.CreateTopic(t, brokers, 1, in, outTopic, dlq)
			const n = 1200
			var recs []*kgo.Record
			retries := 0
			for i := 0; i < n; i++ {
				r := stateAsyncRunInput(in, i)
				if h := r.Headers; len(h) > 0 && h[len(h)-1].Key == "count.retry" {
					retries++
				}
				recs = append(recs, r)
			}
			if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			cfg := testConfigWith(t, brokers, prefix+"g", guestPath(t, "count-async"), in, outTopic, dlq,
				fmt.Sprintf("    state: {enabled: true, dir: %q}\n    retry: {mode: inline, max_attempts: 2, backoff: [5ms]}\n    ordering: %s\n    batch_records: 32\n    instances: {min: 1, max: %d}\n    async: {max_in_flight: 16}", t.TempDir(), tc.ordering, tc.instances), "")
			r := startRunner(t, cfg)
			defer r.Stop(context.Background())
			out := kafkatest.NewReader(t, brokers, outTopic)
			out.ReadUntil(t, 2*time.Minute, "an output per record", func(rs []*kgo.Record) bool { return len(rs) >= n })
			kafkatest.Eventually(t, 10*time.Second, "committed to the end", func() bool {
				return kafkatest.Committed(t, brokers, cfg.GroupID(&cfg.Pipelines[0]), in)[0] == n
			})
			out.ReadFor(300 * time.Millisecond)
			if len(out.Recs) != n {
				t.Fatalf("%d outputs for %d records", len(out.Recs), n)
			}

			// Each key's outputs come in the order of its records (both
			// orderings keep a key's order): the j-th output of a key is
			// its j-th record's count.
			inputs, outputs := map[string][]int{}, map[string][]int{}
			for i, in := range recs {
				inputs[string(in.Key)] = append(inputs[string(in.Key)], i)
			}
			for _, o := range out.Recs {
				c, err := strconv.Atoi(string(o.Value))
				if err != nil {
					t.Fatalf("output %s=%q", o.Key, o.Value)
				}
				outputs[string(o.Key)] = append(outputs[string(o.Key)], c)
			}
			sawHeld := 0 // records 26 counted while record 25 waited
			for k, idx := range inputs {
				got := outputs[k]
				if len(got) != len(idx) {
					t.Fatalf("key %s: %d outputs for %d records", k, len(got), len(idx))
				}
				for j, c := range got {
					switch {
					case strings.HasPrefix(k, "h") && j == 0:
						if c != 1001 {
							t.Fatalf("key %s: record %d counted %d, want 1001 (its own write 1000, plus one)", k, idx[j], c)
						}
					case strings.HasPrefix(k, "h"):
						// 1: counted while record 25 waited (its write
						// its own); 1002: after it was decided. 1001
						// would be 25's write read before its decision.
						if c != 1002 && (c != 1 || tc.ordering == "key") {
							t.Fatalf("key %s: record %d counted %d behind a record that wrote 1000 and waited", k, idx[j], c)
						}
						if c == 1 {
							sawHeld++
						}
					case strings.HasPrefix(k, "s") || tc.ordering == "key":
						if c != j+1 {
							t.Fatalf("key %s: record %d counted %d, want %d", k, idx[j], c, j+1)
						}
					case c < 1 || c > len(idx):
						t.Fatalf("key %s: record %d counted %d, past the %d records of its key", k, idx[j], c, len(idx))
					}
				}
			}
			s := r.Snapshots()[0]
			if s.Runs == 0 || s.RunRecords < 2*s.Runs {
				t.Fatalf("%d runs of %d records: the records were not run in runs", s.Runs, s.RunRecords)
			}
			if got := r.Pipelines()[0].Snapshot(); got.DeadLetter > 0 || got.Faults > 0 {
				t.Fatalf("%d records dead-lettered, %d faults", got.DeadLetter, got.Faults)
			}
			if s.Retried != int64(retries) {
				t.Fatalf("retried %d, want %d (count.retry)", s.Retried, retries)
			}
			t.Logf("%d calls ran %d records (of %d); %d of %d records behind a waiting writer read without its write", s.Runs, s.RunRecords, n, sawHeld, n/50)
		})
	}
}

// TestStateAsyncRunsRebalance: count-async in runs under ordering key, as
// a second host joins (partitions move to it, restored from the
// changelog) and the first leaves: the counts stay exact, and calls ran
// several records.
func TestStateAsyncRunsRebalance(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	a, b := stateRebalance(t, "count-async", "\n    ordering: key\n    batch_records: 32\n    instances: {min: 1, max: 2}")
	if a.Runs == 0 || b.Runs == 0 || b.RunRecords < 2*b.Runs {
		t.Errorf("runs: a %d, b %d of %d records: the records were not run in runs", a.Runs, b.Runs, b.RunRecords)
	}
	t.Logf("a: %d runs; b: %d runs of %d records", a.Runs, b.Runs, b.RunRecords)
}
