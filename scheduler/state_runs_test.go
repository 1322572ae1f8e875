package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// stateRunInput is record i of TestStateRuns: a count of key k<i%20>;
// every 53rd stores a value over state.max_value_bytes (its put is
// refused: it fails for good, its count not stored), and with scans, every
// 40th also emits the stored counts of the keys k0… (guest.StateScan).
func stateRunInput(i int, scans bool) *kgo.Record {
	r := &kgo.Record{Topic: "in", Key: []byte(fmt.Sprintf("k%02d", i%20)), Value: []byte(strconv.Itoa(i))}
	switch {
	case i%53 == 20:
		r.Headers = []kgo.RecordHeader{{Key: "count.pad", Value: []byte("70000")}}
	case scans && i%40 == 39:
		r.Headers = []kgo.RecordHeader{{Key: "count.scan", Value: []byte("k0")}}
	}
	return r
}

// TestStateRuns: a stateful pipeline's records are taken in runs
// (batch_records) and each reads its state as it would run alone after
// the records before it were decided: the count example's counts are
// exact, a record that failed in the middle of a run left nothing behind
// for the next one of its key, and under ordering partition a scan in the
// middle of a run sees exactly the counts of the records before it (and
// its own). Calls ran several records.
func TestStateRuns(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	for _, tc := range []struct {
		name, ordering string
		instances      int
	}{{"partition", "partition", 1}, {"key", "key", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			brokers := kafkatest.Fake(t)
			kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
			const n = 1500
			scans := tc.ordering == "partition"
			var recs []*kgo.Record
			dead := 0
			for i := 0; i < n; i++ {
				r := stateRunInput(i, scans)
				if i%53 == 20 {
					dead++
				}
				recs = append(recs, r)
			}
			if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			cfg := testConfigWith(t, brokers, "g", guestPath(t, "count"), "in", "out", "dlq",
				stateConfig(t, brokers, t.TempDir(), fmt.Sprintf("\n    ordering: %s\n    batch_records: 32\n    instances: {min: 1, max: %d}", tc.ordering, tc.instances)), "")
			r := startRunner(t, cfg)
			defer r.Stop(context.Background())

			// What each record emits run alone, in offset order.
			type want struct{ key, value string }
			count := map[string]int{}
			var wantOut [][]want // per input record
			for i, in := range recs {
				if i%53 == 20 {
					wantOut = append(wantOut, nil)
					continue
				}
				k := string(in.Key)
				count[k]++
				w := []want{{k, strconv.Itoa(count[k])}}
				if scans && i%40 == 39 {
					for j := 0; j < 10; j++ {
						if c := count[fmt.Sprintf("k0%d", j)]; c > 0 {
							w = append(w, want{fmt.Sprintf("k0%d", j), strconv.Itoa(c)})
						}
					}
				}
				wantOut = append(wantOut, w)
			}
			total := 0
			for _, w := range wantOut {
				total += len(w)
			}
			out := kafkatest.NewReader(t, brokers, "out")
			out.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= total })
			dl := kafkatest.NewReader(t, brokers, "dlq")
			dl.ReadUntil(t, time.Minute, "every dead letter", func(rs []*kgo.Record) bool { return len(rs) >= dead })
			kafkatest.Eventually(t, 10*time.Second, "committed to the end", func() bool {
				return kafkatest.Committed(t, brokers, cfg.GroupID(&cfg.Pipelines[0]), "in")[0] == n
			})
			out.ReadFor(300 * time.Millisecond)
			if len(out.Recs) != total {
				t.Fatalf("%d outputs, want %d", len(out.Recs), total)
			}
			switch tc.ordering {
			case "partition":
				// In offset order: each record's outputs, as run alone.
				at := 0
				for i, ws := range wantOut {
					for _, w := range ws {
						o := out.Recs[at]
						if string(o.Key) != w.key || string(o.Value) != w.value {
							t.Fatalf("input %d: output %s=%s, want %s=%s", i, o.Key, o.Value, w.key, w.value)
						}
						at++
					}
				}
			case "key":
				// Per key, the counts 1, 2, … in order.
				next := map[string]int{}
				for _, o := range out.Recs {
					next[string(o.Key)]++
					if want := strconv.Itoa(next[string(o.Key)]); string(o.Value) != want {
						t.Fatalf("key %s: count %s, want %s", o.Key, o.Value, want)
					}
				}
				for k, c := range count {
					if next[k] != c {
						t.Fatalf("key %s: %d outputs, want %d", k, next[k], c)
					}
				}
			}
			for _, d := range dl.Recs {
				if i, err := strconv.Atoi(string(d.Value)); err != nil || i%53 != 20 {
					t.Fatalf("dead letter of input %s", d.Value)
				}
			}
			if len(dl.Recs) != dead {
				t.Fatalf("%d dead letters, want %d", len(dl.Recs), dead)
			}
			s := r.Snapshots()[0]
			if s.Runs == 0 || s.RunRecords < 2*s.Runs {
				t.Fatalf("%d runs of %d records: the records were not run in runs", s.Runs, s.RunRecords)
			}
			t.Logf("%d calls ran %d records (of %d)", s.Runs, s.RunRecords, n)
		})
	}
}
