package partition

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// ownTimerGuest is a record's call that reads the stream time, sets a
// timer of its key at its own timestamp plus the record's value (a
// number of milliseconds, "" none), and outputs "r<offset>/S<stream time>";
// a firing outputs "t:<key>@<at>/T<stream time>".
func ownTimerGuest(g *timerGuest) {
	g.onRecord = func(rec *abi.Record, st host.State) host.Result {
		now, e := st.(host.State2).StreamTime()
		if e != 0 {
			return host.Result{Status: abi.StatusFail, Err: e}
		}
		if len(rec.Value) > 0 {
			var d int64
			fmt.Sscan(string(rec.Value), &d)
			if e := st.(host.Timers).SetTimer(rec.Key, rec.Timestamp+d); e != 0 {
				return host.Result{Status: abi.StatusFail, Err: e}
			}
		}
		return host.Result{Status: abi.StatusOK, Outputs: []abi.Output{{Value: fmt.Appendf(nil, "r%d/S%d", rec.Offset, now)}}}
	}
	g.onTimer = func(f *abi.TimerFiring, _ host.Timers) host.Result {
		return host.Result{Status: abi.StatusOK, Outputs: []abi.Output{{Value: fmt.Appendf(nil, "t:%s@%d/T%d", f.Key, f.At, f.StreamTime)}}}
	}
}

// timedRecs are records of keys, timestamps and values (a timer's delay).
func timedRecs(keys []string, ts []int64, vals []string) []*kgo.Record {
	out := recs(0, keys...)
	for i := range out {
		out[i].Timestamp = time.UnixMilli(ts[i])
		out[i].Value = []byte(vals[i])
	}
	return out
}

// runTimed runs rs through a timer module (ownTimerGuest) on a task of
// batch_records batch under ordering partition, and returns its calls,
// its outputs in delivery order (under byOffset, each firing checked to
// be delivered with its trigger) and the records each run of records ran.
func runTimed(t *testing.T, rs []*kgo.Record, batch int, byOffset bool, firings int) (calls, outs []string, runs []int) {
	t.Helper()
	g := newTimerGuest(t)
	ownTimerGuest(g)
	e := newTimerEngine(t, engineOpts{ordering: config.OrderPartition, min: 1, max: 1, byOffset: byOffset, batch: batch, autoAck: true}, g)
	e.t.Enqueue(rs)
	waitFor(t, "every record and firing", func() bool { return len(g.log()) >= len(rs)+firings })
	waitFor(t, "the records done", func() bool { return len(e.ledger.doneOffsets()) == len(rs) })
	trig := 0 // the delivery of the last record's output
	for _, d := range e.sink.deliveries() {
		for _, o := range d.outs {
			switch {
			case strings.HasPrefix(o, "r"):
				trig = d.run
			case !strings.HasPrefix(o, "t:"):
				continue // a changelog record
			case byOffset && d.run != trig:
				// Under a release order by offset a round is delivered
				// with its trigger, in its transaction.
				t.Errorf("batch_records %d: firing %s in delivery %d, its trigger's in %d", batch, o, d.run, trig)
			}
			outs = append(outs, o)
		}
	}
	g.mu.Lock()
	runs = slices.Clone(g.runs)
	g.mu.Unlock()
	return g.log(), outs, runs
}

// A run is cut exactly where a timer falls due: a record that sets a
// timer at its own timestamp has it fire before the next record (the run
// ends after it), one set 5 ms later fires after the first record whose
// timestamp reaches it, and a run no timer falls due in is not cut.
func TestTimersRunCutWhereItsTimerFallsDue(t *testing.T) {
	t.Parallel()
	keys := []string{"k", "k", "k", "k"}
	ts := []int64{10, 20, 30, 40}
	for _, tc := range []struct {
		name  string
		vals  []string
		calls []string
		runs  []int
	}{
		{"own timestamp", []string{"", "0", "", ""}, []string{"r0", "r1", "t:k@20#1", "r2", "r3"}, []int{2, 2}},
		{"5 ms later", []string{"", "5", "", ""}, []string{"r0", "r1", "r2", "t:k@25#1", "r3"}, []int{3, 1}},
		{"none due", []string{"", "50", "", ""}, []string{"r0", "r1", "r2", "r3"}, []int{4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			firings := len(tc.calls) - len(ts)
			calls, _, runs := runTimed(t, timedRecs(keys, ts, tc.vals), 16, false, firings)
			if !slices.Equal(calls, tc.calls) || !slices.Equal(runs, tc.runs) {
				t.Fatalf("calls %v in runs %v, want %v in runs %v", calls, runs, tc.calls, tc.runs)
			}
		})
	}
}

// Differential: the same input — random timestamps out of order, late
// ones, several keys, timers at a record's own timestamp and later —
// through a timer module one record a call and in runs of records gives
// the same calls, the same outputs in the same order, each record
// reading the same stream time and each firing the same (at, key, T),
// and under a release order by offset (exactly_once) each round in its
// trigger's delivery; and the runs are runs (more than one record on average).
func TestTimersRunsEqualSingleRecords(t *testing.T) {
	t.Parallel()
	for _, byOffset := range []bool{false, true} {
		t.Run(fmt.Sprintf("byOffset%v", byOffset), func(t *testing.T) {
			t.Parallel()
			for seed := range uint64(3) {
				rng := rand.New(rand.NewPCG(seed, 20))
				const n = 300
				var keys, vals []string
				var ts []int64
				clock := int64(1000)
				for range n {
					clock += rng.Int64N(10)
					keys = append(keys, fmt.Sprintf("k%d", rng.IntN(5)))
					ts = append(ts, clock-rng.Int64N(60)) // out of order, some beyond any window
					switch rng.IntN(4) {
					case 0:
						vals = append(vals, "0") // due at once
					case 1:
						vals = append(vals, fmt.Sprint(rng.IntN(100)))
					default:
						vals = append(vals, "")
					}
				}
				// The single path's calls count the firings the runs wait for.
				one, oneOuts, _ := runTimed(t, timedRecs(keys, ts, vals), 1, byOffset, 0)
				firings := len(one) - n
				many, manyOuts, runs := runTimed(t, timedRecs(keys, ts, vals), 32, byOffset, firings)
				if !slices.Equal(many, one) {
					t.Fatalf("seed %d: calls in runs differ from one record a call:\nruns %v\none  %v", seed, many, one)
				}
				if !slices.Equal(manyOuts, oneOuts) {
					t.Fatalf("seed %d: outputs in runs differ from one record a call:\nruns %v\none  %v", seed, manyOuts, oneOuts)
				}
				if len(runs) == 0 || n/len(runs) < 2 {
					t.Fatalf("seed %d: %d runs for %d records: not runs", seed, len(runs), n)
				}
				t.Logf("seed %d: %d records, %d firings, %d runs (%.1f records each)", seed, n, firings, len(runs), float64(n)/float64(len(runs)))
			}
		})
	}
}
