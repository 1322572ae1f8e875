package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// windowRun is what a run of plugins/examples/window-count came to: its
// read-committed outputs in order ("key start end count"), the timers it
// fired, and its runs of records (Stats.Runs, RunRecords).
type windowRun struct {
	outs                 []string
	fired, runs, runRecs int64
	aborted              int64
}

// runWindowCount runs window-count (1 s tumbling windows, 300 ms grace)
// under guarantee with batch_records batch over input on one partition in
// and out, so that its outputs have one order. With aborts, the input
// arrives in ten parts and a transaction is made to abort after every
// other one, while records are in runs.
func runWindowCount(t *testing.T, input windowInput, n int, guarantee string, batch int, aborts bool) windowRun {
	t.Helper()
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	keys := fmt.Sprintf("\n    guarantee: %s\n    batch_records: %d\n    transactions: {max_records: 200, interval: 50ms}\n    env: {WINDOW_SIZE: 1s, WINDOW_GRACE: 300ms}", guarantee, batch)
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "window-count"), "in", "out", "dlq", stateConfig(t, brokers, t.TempDir(), keys), "")
	want := input.model(n, 1)
	rd := kafkatest.NewReader(t, brokers, "out")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	p := r.Pipelines()[0]
	const parts = 10
	for i := range parts {
		if !aborts && i > 0 {
			break
		}
		from, to := i*n/parts, (i+1)*n/parts
		if !aborts {
			to = n
		}
		input.produce(t, brokers, "in", from, to)
		if aborts && i%2 == 1 {
			before := p.Snapshot().TxnAborted
			p.injectTxnFailure(errors.New("injected produce failure"))
			kafkatest.Eventually(t, time.Minute, "the transaction aborted", func() bool { return p.Snapshot().TxnAborted > before })
		}
	}
	rd.ReadUntil(t, 2*time.Minute, fmt.Sprintf("the model's %d final windows", len(want)), func(rs []*kgo.Record) bool { return len(rs) >= len(want) })
	rd.ReadFor(time.Second) // anything more would be a duplicate
	var w windowRun
	for _, rec := range rd.Recs {
		w.outs = append(w.outs, fmt.Sprintf("%s %s", rec.Key, rec.Value))
	}
	got := slices.Sorted(slices.Values(w.outs))
	if !slices.Equal(got, want) {
		t.Fatalf("batch_records %d: %d results, the model's %d\n got %v\nwant %v", batch, len(got), len(want), got, want)
	}
	s := p.Snapshot()
	w.fired, w.runs, w.runRecs, w.aborted = p.counters.stats.TimersFired.Load(), s.Runs, s.RunRecords, s.TxnAborted
	return w
}

// Differential: the same input — random timestamps, out of order within
// the grace, late ones beyond it, twelve keys — through the Go SDK's
// tumbling window count one record a call (batch_records 1) and in runs
// of records (64) gives the same outputs in the same order and fires as
// many timers, under at_least_once and exactly_once; the runs are long
// (records a run averaged). Under exactly_once, transactions aborted
// while records run in runs replay to the same output.
func TestWindowCountRunsEqualSingleRecords(t *testing.T) {
	t.Parallel() // each run owns its in-process broker; asserts no timing
	const n = 1500
	input := newWindowInput(20, n, 1)
	for _, tc := range []struct {
		guarantee string
		aborts    bool
	}{{"at_least_once", false}, {"exactly_once", false}, {"exactly_once", true}} {
		name := tc.guarantee
		if tc.aborts {
			name += "/aborts"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			one := runWindowCount(t, input, n, tc.guarantee, 1, false)
			many := runWindowCount(t, input, n, tc.guarantee, 64, tc.aborts)
			if !slices.Equal(many.outs, one.outs) {
				t.Fatalf("outputs in runs differ from one record a call:\nruns %v\none  %v", many.outs, one.outs)
			}
			if many.fired < one.fired || one.fired == 0 {
				// A firing of an aborted transaction fires again: at least as many.
				t.Fatalf("timers fired: %d in runs, %d one record a call", many.fired, one.fired)
			}
			if !tc.aborts && many.fired != one.fired {
				t.Fatalf("timers fired: %d in runs, %d one record a call", many.fired, one.fired)
			}
			if one.runs != 0 || many.runs == 0 || many.runRecs/many.runs < 4 {
				t.Fatalf("runs: %d of %d records in runs, %d of %d one record a call: the runs are not runs", many.runs, many.runRecs, one.runs, one.runRecs)
			}
			if tc.aborts && many.aborted == 0 {
				t.Fatal("no transaction aborted: the test did not test")
			}
			t.Logf("%d outputs, %d timers fired (%d one record a call); %d runs of %.1f records, %d transactions aborted",
				len(many.outs), many.fired, one.fired, many.runs, float64(many.runRecs)/float64(many.runs), many.aborted)
		})
	}
}
