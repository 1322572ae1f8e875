package partition

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
	"github.com/wasmstream/wasmstream/scheduler/internal/version"
)

// ProcessTimer: the plain fake has no timer entry, as a module without
// wasmstream_on_timer.
func (f *fakeInstance) ProcessTimer(context.Context, *abi.TimerFiring, any, host.State) host.Result {
	return host.Result{Status: abi.StatusRetry, Err: &host.Fault{Kind: host.FaultProtocol, Msg: "no " + abi.ExportOnTimer}}
}

// timerGuest is a fake guest with state and timers: a record's value is
// a list of timers to set ("set k@at,k@at"), or "fail" after setting
// them; a firing calls onTimer. It notes each call: "r<offset>" for a
// record, "t:<key>@<at>#<attempt>" for a firing.
type timerGuest struct {
	mu      sync.Mutex
	calls   []string
	onTimer func(f *abi.TimerFiring, tm host.Timers) host.Result
	// onRecord, when set, is a record's call after its note.
	onRecord func(rec *abi.Record, st host.State) host.Result
	hold     string        // a call that waits for release before it returns
	inHold   chan struct{} // closed once the held call is in it
	release  chan struct{}
	once     sync.Once
	runs     []int // the records each run of records ran (ProcessBatch)
}

func newTimerGuest(tb testing.TB) *timerGuest {
	g := &timerGuest{inHold: make(chan struct{}), release: make(chan struct{})}
	tb.Cleanup(g.open)
	return g
}

// open lets the held call return.
func (g *timerGuest) open() { g.once.Do(func() { close(g.release) }) }

func (g *timerGuest) note(c string) {
	g.mu.Lock()
	g.calls = append(g.calls, c)
	g.mu.Unlock()
	if c == g.hold {
		close(g.inHold)
		<-g.release
	}
}

func (g *timerGuest) log() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.calls)
}

// setTimers sets the timers of a list "k@at,k@at".
func setTimers(tm host.Timers, list string) abi.Errno {
	for _, s := range strings.Split(list, ",") {
		if s == "" {
			continue
		}
		k, at, _ := strings.Cut(s, "@")
		n, _ := strconv.ParseInt(at, 10, 64)
		if e := tm.SetTimer([]byte(k), n); e != 0 {
			return e
		}
	}
	return 0
}

func (g *timerGuest) record(rec *abi.Record, st host.State) host.Result {
	g.note(fmt.Sprintf("r%d", rec.Offset))
	if g.onRecord != nil {
		return g.onRecord(rec, st)
	}
	v := string(rec.Value)
	list, fail := strings.CutSuffix(v, " fail")
	if e := setTimers(st.(host.Timers), strings.TrimPrefix(list, "set ")); e != 0 {
		return host.Result{Status: abi.StatusFail, Err: e}
	}
	if fail {
		return host.Result{Status: abi.StatusFail, Err: &host.GuestError{Status: abi.StatusFail, Msg: "failed"}}
	}
	return host.Result{Status: abi.StatusOK, Outputs: []abi.Output{{Value: []byte(fmt.Sprintf("out-r%d", rec.Offset))}}}
}

func (g *timerGuest) timer(f *abi.TimerFiring, st host.State) host.Result {
	g.note(fmt.Sprintf("t:%s@%d#%d", f.Key, f.At, f.Attempt))
	if g.onTimer != nil {
		return g.onTimer(f, st.(host.Timers))
	}
	return host.Result{Status: abi.StatusOK, Outputs: []abi.Output{{Value: []byte(fmt.Sprintf("fire-%s@%d/T%d", f.Key, f.At, f.StreamTime))}}}
}

// timerInstance is a fake instance whose guest has state and timers.
type timerInstance struct {
	*fakeInstance
	g *timerGuest
}

func (ti *timerInstance) ProcessState(ctx context.Context, rec *abi.Record, tag any, st host.State) host.Result {
	ti.start = time.Now()
	defer func() { ti.end = time.Now() }()
	return ti.g.record(rec, st)
}

// ProcessBatch runs a run's records with their states as host.ProcessBatch
// does: the gate asked before each record after the first, stopped after
// one that fails. The guest notes how many records each run ran (runs).
func (ti *timerInstance) ProcessBatch(ctx context.Context, recs []host.BatchRecord, out []host.Outcome) int {
	ran := ti.processBatch(ctx, recs, out)
	ti.g.mu.Lock()
	ti.g.runs = append(ti.g.runs, ran)
	ti.g.mu.Unlock()
	return ran
}

func (ti *timerInstance) processBatch(ctx context.Context, recs []host.BatchRecord, out []host.Outcome) int {
	for i := range recs {
		if i > 0 && (ctx.Err() != nil || (ti.take != nil && !ti.take(i))) {
			return i
		}
		out[i].Result = ti.ProcessState(ctx, recs[i].Rec, recs[i].Tag, recs[i].State)
		out[i].Start, out[i].End = ti.LastCall()
		if ti.stopAfter && (out[i].Status == abi.StatusRetry || out[i].Status == abi.StatusFail) {
			return i + 1
		}
	}
	return len(recs)
}

func (ti *timerInstance) ProcessTimer(ctx context.Context, f *abi.TimerFiring, tag any, st host.State) host.Result {
	ti.start = time.Now()
	defer func() { ti.end = time.Now() }()
	return ti.g.timer(f, st)
}

// newTimerEngine is newEngine with a state view over a fresh store and
// a module that sets timers (guest g), started.
func newTimerEngine(t *testing.T, o engineOpts, g *timerGuest) *engine {
	t.Helper()
	o.noStart = true
	e := newEngine(t, o)
	timersOnFakes(t, e, g)
	return e
}

// timersOnFakes gives e's task a state view over a fresh store and a
// module that sets timers (guest g), and starts it.
func timersOnFakes(t *testing.T, e *engine, g *timerGuest) {
	t.Helper()
	st, err := statestore.Open(filepath.Join(t.TempDir(), "s.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e.t.State = state.NewPartition(st, 0, 1, state.Limits{MaxValueBytes: 100, Changelog: "cl"})
	e.d.Timers = true
	e.d.Config.Retry = config.Retry{MaxAttempts: 3, Backoff: []time.Duration{time.Millisecond}}
	e.d.Inst.New = func(context.Context, *version.Version) (Instance, error) {
		e.insts.Add(1)
		return &timerInstance{fakeInstance: newFakeInstance(nil, e.pend), g: g}, nil
	}
	e.t.Start()
}

// stamped is recs with timestamps (milliseconds) and values.
func stamped(from int64, vals []string, ts ...int64) []*kgo.Record {
	out := recs(from, make([]string, len(ts))...)
	for i := range out {
		out[i].Timestamp = time.UnixMilli(ts[i])
		out[i].Key = []byte("k")
		out[i].Value = []byte(vals[i])
	}
	return out
}

// The firing rule (ABI.md §4.2): when a decided record raises stream time
// to T, every timer with at <= T fires before the partition's next record,
// in (at, key) order — a timer set twice fires once, a timer a firing
// sets within the round fires in it, a timer the record itself set fires
// after it; no offset is done for a firing, each firing's timer is
// deleted, and under exactly_once (a release order by offset) the round's
// outputs are delivered with their trigger's, in one delivery. In runs
// of records (batch 8) the first run ends before the record a timer is
// due by (timersGate), so the calls are the same.
func TestTimersFireInOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		byOffset bool
		batch    int
	}{{false, 1}, {true, 1}, {false, 8}, {true, 8}} {
		byOffset := tc.byOffset
		t.Run(fmt.Sprintf("byOffset%v/batch%d", tc.byOffset, tc.batch), func(t *testing.T) {
			t.Parallel()
			g := newTimerGuest(t)
			g.onTimer = func(f *abi.TimerFiring, tm host.Timers) host.Result {
				if string(f.Key) == "a" && f.At == 20 {
					if e := tm.SetTimer([]byte("e"), 22); e != 0 {
						return host.Result{Status: abi.StatusFail, Err: e}
					}
				}
				return host.Result{Status: abi.StatusOK, Outputs: []abi.Output{{Value: []byte(fmt.Sprintf("fire-%s@%d/T%d", f.Key, f.At, f.StreamTime))}}}
			}
			// batch_records 8: the run r0 r1 ends before r2, the firings
			// of a@20 and b@20 due by r1's timestamp run between them.
			e := newTimerEngine(t, engineOpts{ordering: config.OrderPartition, min: 1, max: 1, byOffset: byOffset, batch: tc.batch, autoAck: true}, g)
			e.t.Enqueue(stamped(0, []string{"set b@20,a@20,c@30,a@20", "", "set d@35"}, 10, 25, 40))
			want := []string{"r0", "r1", "t:a@20#1", "t:b@20#1", "t:e@22#1", "r2", "t:c@30#1", "t:d@35#1"}
			waitFor(t, "every call", func() bool { return len(g.log()) >= len(want) })
			waitFor(t, "the records done", func() bool { return len(e.ledger.doneOffsets()) == 3 })
			if got := g.log(); !slices.Equal(got, want) {
				t.Fatalf("calls %v, want %v", got, want)
			}
			g.mu.Lock()
			runs := slices.Clone(g.runs)
			g.mu.Unlock()
			if tc.batch > 1 && (len(runs) == 0 || runs[0] != 2) {
				t.Fatalf("runs of records ran %v records, want a first of 2 (r0 r1)", runs)
			}
			runOf := map[string]int{}
			var outs []string
			for _, d := range e.sink.deliveries() {
				for _, o := range d.outs {
					if o == "" {
						continue // a changelog record
					}
					outs = append(outs, o)
					runOf[o] = d.run
				}
			}
			wantOuts := []string{"out-r0", "out-r1", "fire-a@20/T25", "fire-b@20/T25", "fire-e@22/T25", "out-r2", "fire-c@30/T40", "fire-d@35/T40"}
			if !slices.Equal(outs, wantOuts) {
				t.Fatalf("outputs %v, want %v", outs, wantOuts)
			}
			if byOffset && (runOf["fire-a@20/T25"] != runOf["out-r1"] || runOf["fire-e@22/T25"] != runOf["out-r1"] || runOf["fire-d@35/T40"] != runOf["out-r2"]) {
				t.Fatalf("deliveries %v: a round is not delivered with its trigger", runOf)
			}
			if done := e.ledger.doneOffsets(); slices.Contains(done, -1) {
				t.Fatalf("the ledger was told %v done", done)
			}
			if due, _ := e.t.State.Due(1<<62, 10); len(due) != 0 {
				t.Fatalf("timers left after firing: %v", due)
			}
			if n := e.d.Stats.TimersFired.Load(); n != 5 {
				t.Fatalf("%d firings counted, want 5", n)
			}
		})
	}
}

// Under at_least_once a record's finish (its offset's commit) waits for
// its round's firings to be durable: the record delivered and
// acknowledged while its firing runs is not done until the firing's
// outputs are.
func TestTimersHoldTheirTrigger(t *testing.T) {
	t.Parallel()
	g := newTimerGuest(t)
	g.hold = "t:a@5#1"
	defer g.open() // before the engine's cleanup waits for its workers
	e := newTimerEngine(t, engineOpts{ordering: config.OrderPartition, min: 1, max: 1}, g)
	e.t.Enqueue(stamped(0, []string{"set a@5", ""}, 1, 6))
	<-g.inHold
	e.sink.ack() // the trigger's outputs: acknowledged at once (Finish is called here)
	if done := e.ledger.doneOffsets(); slices.Contains(done, 1) {
		t.Fatalf("the trigger is done (%v) while its firing runs", done)
	}
	g.open()
	waitFor(t, "the trigger done once its firing is", func() bool {
		e.sink.ack()
		return slices.Contains(e.ledger.doneOffsets(), 1)
	})
}

// A record that fails leaves none of its timers set; a firing that fails
// retryably is retried inline with its attempt counting up, then
// dead-lettered: a record with the timer's key, a null value and its at
// in wasmstream.timer.at, its timer deleted, its outputs dropped.
func TestTimersFailures(t *testing.T) {
	t.Parallel()
	g := newTimerGuest(t)
	g.onTimer = func(f *abi.TimerFiring, tm host.Timers) host.Result {
		return host.Result{Status: abi.StatusRetry, Outputs: []abi.Output{{Value: []byte("dropped")}}, Err: &host.GuestError{Status: abi.StatusRetry, Msg: "not yet"}}
	}
	e := newTimerEngine(t, engineOpts{ordering: config.OrderPartition, min: 1, max: 1, autoAck: true}, g)
	e.t.Enqueue(stamped(0, []string{"set lost@1 fail", "set b@2", ""}, 1, 2, 3))
	want := []string{"r0", "r1", "t:b@2#1", "t:b@2#2", "t:b@2#3", "r2"}
	waitFor(t, "every call", func() bool { return len(g.log()) >= len(want) })
	waitFor(t, "the records done", func() bool { return len(e.ledger.doneOffsets()) == 3 })
	if got := g.log(); !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	var dlq []abi.Output
	for _, d := range e.sink.deliveries() {
		for i, o := range d.outputs {
			if o.Topic == "dlq" && d.work {
				dlq = d.outputs
				if o.Value != nil || string(o.Key) != "b" || i != 0 {
					t.Fatalf("dead-letter record %+v", o)
				}
			}
			if string(o.Value) == "dropped" {
				t.Fatal("a failed firing's output was released")
			}
		}
	}
	if dlq == nil {
		t.Fatal("no dead-letter record for the failed firing")
	}
	var at string
	for _, h := range dlq[0].Headers {
		if h.Key == HeaderTimerAt {
			at = string(h.Value)
		}
	}
	if at != "2" {
		t.Fatalf("%s = %q, want 2 (headers %v)", HeaderTimerAt, at, dlq[0].Headers)
	}
	if due, _ := e.t.State.Due(1<<62, 10); len(due) != 0 {
		t.Fatalf("timers left: %v", due)
	}
	if n := e.d.Stats.TimersFailed.Load(); n != 1 {
		t.Fatalf("%d failed firings counted, want 1", n)
	}
}

// A task that starts with timers due by its restored stream time fires
// them before its first record: a round whose firing was not durable
// when the partition's last owner stopped.
func TestTimersDueAtStart(t *testing.T) {
	t.Parallel()
	g := newTimerGuest(t)
	dir := t.TempDir()
	st, err := statestore.Open(filepath.Join(dir, "s.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p := state.NewPartition(st, 0, 1, state.Limits{MaxValueBytes: 100, Changelog: "cl"})
	rs := p.Begin()
	rs.StreamTime()
	rs.SetTimer([]byte("k"), 7)
	p.CommitAt(0, 9, rs, nil)
	if err := p.Flush(1); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st2, err := statestore.Open(filepath.Join(dir, "s.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	e2 := newEngine(t, engineOpts{ordering: config.OrderPartition, min: 1, max: 1, autoAck: true, noStart: true})
	e2.t.State = state.NewPartition(st2, 0, 1, state.Limits{MaxValueBytes: 100, Changelog: "cl"})
	e2.d.Timers = true
	e2.d.Inst.New = func(context.Context, *version.Version) (Instance, error) {
		return &timerInstance{fakeInstance: newFakeInstance(nil, e2.pend), g: g}, nil
	}
	e2.t.Start()
	e2.t.Enqueue(stamped(1, []string{""}, 1))
	want := []string{"t:k@7#1", "r1"}
	waitFor(t, "every call", func() bool { return len(g.log()) >= len(want) })
	if got := g.log(); !slices.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
}
