package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// runInput is a partition of healthy records with, among them, records
// that fail for good, panic on every attempt (a fault: the instance is
// replaced) and fail once before they succeed.
func runInput(i int) string {
	switch {
	case i%41 == 7:
		return fmt.Sprintf(`{"i":%d,"fault":"fail"}`, i)
	case i%53 == 10:
		return fmt.Sprintf(`{"i":%d,"fault":"panic"}`, i)
	case i%17 == 5:
		return fmt.Sprintf(`{"i":%d,"fault":"transient","until":2}`, i)
	}
	return fmt.Sprintf(`{"i":%d}`, i)
}

// TestRunsKeepEachRecordsOutcome: records taken in runs (batch_records) and
// run several per call keep what each would get alone, under ordering
// partition with retries in place: a record that fails, faults or is
// retried in the middle of a run decides only itself; nothing of the
// partition runs past a record retried in place, so outputs and dead
// letters come out in offset order; every record ends once, and the
// offsets are committed to the end. The same input with batch_records: 1
// (one record per call) gives the same outcomes.
func TestRunsKeepEachRecordsOutcome(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	for _, tc := range []struct {
		name  string
		batch int
	}{{"runs", 64}, {"one_per_call", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			brokers := kafkatest.Fake(t)
			kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
			const n = 600
			kafkatest.Produce(t, brokers, "in", n, runInput)
			var fails, panics, transients int
			for i := 0; i < n; i++ {
				switch {
				case i%41 == 7:
					fails++
				case i%53 == 10:
					panics++
				case i%17 == 5:
					transients++
				}
			}
			cfg := testConfigWith(t, brokers, "g", guestPath(t, "enrich"), "in", "out", "dlq",
				fmt.Sprintf("    batch_records: %d\n    retry: {mode: inline, max_attempts: 3, backoff: [10ms, 20ms]}", tc.batch), "")
			started := time.Now().Truncate(time.Millisecond)
			r := startRunner(t, cfg)
			defer r.Stop(context.Background())
			out := kafkatest.NewReader(t, brokers, "out")
			out.ReadUntil(t, time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n-fails-panics })
			dl := kafkatest.NewReader(t, brokers, "dlq")
			dl.ReadUntil(t, time.Minute, "every dead letter", func(rs []*kgo.Record) bool { return len(rs) >= fails+panics })
			kafkatest.Eventually(t, 10*time.Second, "offsets committed to the end", func() bool {
				return kafkatest.Committed(t, brokers, cfg.GroupID(&cfg.Pipelines[0]), "in")[0] == n
			})

			type doc struct {
				I       int
				Fault   string
				Attempt int
				Source  struct{ Offset int64 }
			}
			ended := map[int]string{} // input index → how it ended
			var last int64 = -1
			for _, rec := range out.Recs {
				var d doc
				if err := json.Unmarshal(rec.Value, &d); err != nil {
					t.Fatalf("output %q: %v", rec.Value, err)
				}
				if d.Source.Offset <= last {
					t.Fatalf("output of offset %d after offset %d: out of order", d.Source.Offset, last)
				}
				last = d.Source.Offset
				// An output's timestamp is when its record was released
				// (ABI.md §5.2), not its input's.
				if rec.Timestamp.Before(started) || rec.Timestamp.After(time.Now()) {
					t.Fatalf("output of input %d has timestamp %v, outside the host's run (from %v)", d.I, rec.Timestamp, started)
				}
				want := 1
				if d.Fault == "transient" {
					want = 2
				}
				if d.Attempt != want || d.Fault == "fail" || d.Fault == "panic" {
					t.Fatalf("input %d (%s) succeeded on attempt %d, want %d", d.I, d.Fault, d.Attempt, want)
				}
				if prev, dup := ended[d.I]; dup {
					t.Fatalf("input %d ended twice (%s, then output)", d.I, prev)
				}
				ended[d.I] = "output"
			}
			for _, rec := range dl.Recs {
				var d doc
				if err := json.Unmarshal(rec.Value, &d); err != nil {
					t.Fatalf("dead letter %q: %v", rec.Value, err)
				}
				if prev, dup := ended[d.I]; dup {
					t.Fatalf("input %d ended twice (%s, then dead letter)", d.I, prev)
				}
				ended[d.I] = "dead letter"
				wantAttempt := "1" // fail: not retried
				if d.Fault == "panic" {
					wantAttempt = "3"
				}
				if got := kafkatest.Header(rec, HeaderAttempt); got != wantAttempt || (d.Fault != "fail" && d.Fault != "panic") {
					t.Fatalf("dead letter of input %d (%s) at attempt %s, want %s", d.I, d.Fault, got, wantAttempt)
				}
				// Nothing behind it in the partition came out before it.
				for _, o := range out.Recs {
					var od doc
					json.Unmarshal(o.Value, &od)
					if od.I > d.I && o.Timestamp.Before(rec.Timestamp) {
						t.Fatalf("output of input %d came out before the dead letter of input %d", od.I, d.I)
					}
				}
			}
			if len(ended) != n {
				t.Fatalf("%d of %d inputs ended", len(ended), n)
			}
			s := r.Snapshots()[0]
			if s.Faults != int64(3*panics) || s.Retried != int64(transients+2*panics) {
				t.Fatalf("faults %d (want %d), retried %d (want %d)", s.Faults, 3*panics, s.Retried, transients+2*panics)
			}
			switch {
			case tc.batch == 1 && s.Runs != 0:
				t.Fatalf("batch_records: 1, yet %d calls ran several records", s.Runs)
			case tc.batch > 1 && (s.Runs == 0 || s.RunRecords < 2*s.Runs):
				t.Fatalf("%d runs of %d records: the records were not run in runs", s.Runs, s.RunRecords)
			}
			t.Logf("%d calls ran %d records (of %d)", s.Runs, s.RunRecords, n)
		})
	}
}

// TestSlowRecordHandsBackItsRun: under ordering none with a pool, a record
// that runs long (here: until its one-minute deadline) does not hold up
// the records picked into its run: after runHandBack the records the
// guest was not yet given go back to the queue, and the other instance
// runs them, long before the slow record's deadline.
func TestSlowRecordHandsBackItsRun(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 100
	kafkatest.Produce(t, brokers, "in", n, func(i int) string {
		if i == 0 {
			return `{"fault":"loop"}`
		}
		return fmt.Sprintf(`{"i":%d}`, i)
	})
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "enrich"), "in", "out", "dlq",
		"    ordering: none\n    batch_records: 64\n    instances: {min: 2, max: 2}", "")
	cfg.Pipelines[0].Limits.RecordTimeout = time.Minute
	cfg.Shutdown.DrainTimeout = 500 * time.Millisecond
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	out := kafkatest.NewReader(t, brokers, "out")
	out.ReadUntil(t, 20*time.Second, "every record but the slow one, long before its deadline",
		func(rs []*kgo.Record) bool { return len(rs) >= n-1 })
	s := r.Snapshots()[0]
	if s.HandedBack == 0 {
		t.Fatal("no record was handed back: the slow record was not in a run with others")
	}
	t.Logf("%d records handed back; %d calls ran %d records", s.HandedBack, s.Runs, s.RunRecords)
}
