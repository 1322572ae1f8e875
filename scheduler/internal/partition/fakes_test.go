package partition

// Fakes of the engine's seams, for tests that run a task, its workers, its
// release order and its sink in milliseconds, with no broker and no wasm:
// fakeInstance (the Instance a worker calls), recordingSink (the Sink:
// records what it is handed, makes it durable when the test says so) and
// fakeLedger (the Ledger: records what is done and abandoned). newEngine
// wires them into a task.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/background"
	"github.com/wasmstream/wasmstream/scheduler/internal/budget"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/offsets"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/scheduler/internal/version"
)

// guestFunc is what a fake guest does with one record: its result. It is
// called from the worker goroutines, concurrently for different instances.
type guestFunc func(rec *abi.Record) host.Result

// fakeInstance is an Instance whose guest is a Go function; its batch
// runs record by record as a module without the batch entry does
// (host.Instance.processEach), honouring the run's gate and
// StopBatchAfterFailure. A call whose guest returns abi.StatusPending
// waits, as on asynchronous operations, until the test completes it
// (pendHub.complete): Poll then delivers its result.
type fakeInstance struct {
	id        uint64
	guest     guestFunc
	hub       *pendHub
	dead      bool
	closed    atomic.Bool
	start     time.Time
	end       time.Time
	take      func(int) bool
	stopAfter bool

	mu      sync.Mutex // waiting and done: the test completes calls from its goroutine
	waiting int
	done    []host.Done
	ready   chan struct{}
}

var fakeIDs atomic.Uint64

func newFakeInstance(g guestFunc, hub *pendHub) *fakeInstance {
	return &fakeInstance{id: fakeIDs.Add(1), guest: g, hub: hub, ready: make(chan struct{}, 1)}
}

func (f *fakeInstance) ID() uint64              { return f.id }
func (f *fakeInstance) Dead() bool              { return f.dead }
func (f *fakeInstance) MemoryPages() uint32     { return 1 }
func (f *fakeInstance) Ready() <-chan struct{}  { return f.ready }
func (f *fakeInstance) NextDeadline() time.Time { return time.Time{} }

func (f *fakeInstance) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting + len(f.done)
}

func (f *fakeInstance) AsyncInFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waiting
}

func (f *fakeInstance) Poll(context.Context, time.Time) []host.Done {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.done
	f.done = nil
	return d
}

// pendHub is where a test finds the calls that wait, by name (the
// record's value, or "r<offset>" for a plain record), to complete them.
type pendHub struct {
	mu    sync.Mutex
	calls map[string]pendCall
}

type pendCall struct {
	f   *fakeInstance
	tag any
}

func (h *pendHub) add(name string, f *fakeInstance, tag any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.calls == nil {
		h.calls = map[string]pendCall{}
	}
	h.calls[name] = pendCall{f, tag}
}

// waiting reports whether the call named name waits.
func (h *pendHub) waiting(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.calls[name]
	return ok
}

// complete ends the waiting call named name with res, and wakes its
// instance's worker.
func (h *pendHub) complete(tb testing.TB, name string, res host.Result) {
	h.mu.Lock()
	c, ok := h.calls[name]
	delete(h.calls, name)
	h.mu.Unlock()
	if !ok {
		tb.Fatalf("no call %q waits", name)
	}
	c.f.mu.Lock()
	c.f.waiting--
	c.f.done = append(c.f.done, host.Done{Tag: c.tag, Result: res})
	c.f.mu.Unlock()
	select {
	case c.f.ready <- struct{}{}:
	default:
	}
}

// cancel completes every call of f still waiting as canceled.
func (h *pendHub) cancel(f *fakeInstance) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, c := range h.calls {
		if c.f != f {
			continue
		}
		delete(h.calls, name)
		f.mu.Lock()
		f.waiting--
		f.done = append(f.done, host.Done{Tag: c.tag, Result: host.Result{Status: abi.StatusFail, Err: &host.Fault{Kind: host.FaultCanceled, Msg: "closed"}}})
		f.mu.Unlock()
	}
}

// callName is what a fake guest's call is named: a record's value, or
// "r<offset>" for the records recs makes (value "v").
func callName(rec *abi.Record) string {
	if string(rec.Value) == "v" {
		return fmt.Sprintf("r%d", rec.Offset)
	}
	return string(rec.Value)
}
func (f *fakeInstance) CallTimes() (time.Duration, time.Duration) { return 0, 0 }
func (f *fakeInstance) LastCall() (time.Time, time.Time)          { return f.start, f.end }
func (f *fakeInstance) LimitBatchInFlight(int)                    {}
func (f *fakeInstance) StopBatchAfterFailure(on bool)             { f.stopAfter = on }
func (f *fakeInstance) GateBatch(take func(int) bool)             { f.take = take }
func (f *fakeInstance) KeepSlot()                                 {}
func (f *fakeInstance) Yield()                                    {}

// Close ends the calls still waiting as canceled, as host.Instance.Close
// does: the worker's next Poll delivers them.
func (f *fakeInstance) Close(context.Context) {
	f.closed.Store(true)
	f.hub.cancel(f)
}

func (f *fakeInstance) Process(ctx context.Context, rec *abi.Record, tag any) host.Result {
	f.start = time.Now()
	defer func() { f.end = time.Now() }()
	if ctx.Err() != nil {
		return host.Result{Status: abi.StatusFail, Err: &host.Fault{Kind: host.FaultCanceled, Msg: "canceled"}}
	}
	res := f.guest(rec)
	if res.Status == abi.StatusPending {
		f.mu.Lock()
		f.waiting++
		f.mu.Unlock()
		f.hub.add(callName(rec), f, tag)
	}
	return res
}

func (f *fakeInstance) ProcessState(ctx context.Context, rec *abi.Record, tag any, _ host.State) host.Result {
	return f.Process(ctx, rec, tag)
}

func (f *fakeInstance) ProcessBatch(ctx context.Context, recs []host.BatchRecord, out []host.Outcome) int {
	for i := range recs {
		if i > 0 && (ctx.Err() != nil || (f.take != nil && !f.take(i))) {
			return i
		}
		out[i].Result = f.Process(ctx, recs[i].Rec, recs[i].Tag)
		out[i].Start, out[i].End = f.LastCall()
		if f.stopAfter && (out[i].Status == abi.StatusRetry || out[i].Status == abi.StatusFail) {
			return i + 1
		}
	}
	return len(recs)
}

// delivered is one outcome a recordingSink was handed.
type delivered struct {
	j       *job  // until ack: a job is given back then (recycle)
	offset  int64 // -1: not a record
	key     string
	verdict verdict
	outs    []string     // the outputs' values
	outputs []abi.Output // the outputs
	work    bool         // the job is work's (work.go)
	run     int          // which delivery (deliver call) it came in, from 1
}

// recordingSink is a Sink that records what it is handed, in order, and
// makes it durable when the test acknowledges it (ack): until then the
// records stay unfinished, as with a broker that has not answered. With
// autoAck every delivery is acknowledged at once.
type recordingSink struct {
	mu      sync.Mutex
	got     []delivered
	runs    int // deliver calls
	acked   int // got[:acked] are acknowledged
	autoAck bool
	refuse  string // refuses answers this for every record ("": none)
}

func (s *recordingSink) refuses(*kgo.Record, []abi.Output, []state.Write) string { return s.refuse }
func (s *recordingSink) Forget(map[string][]int32)                               {}

func (s *recordingSink) deliver(run []*job) {
	s.mu.Lock()
	s.runs++
	for _, j := range run {
		d := delivered{j: j, offset: -1, verdict: j.release.verdict, outputs: j.outcome.outs, work: j.isWork(), run: s.runs}
		if j.r != nil {
			d.offset, d.key = j.r.Offset, string(j.r.Key)
		}
		for _, o := range j.outcome.outs {
			d.outs = append(d.outs, string(o.Value))
		}
		s.got = append(s.got, d)
	}
	auto := s.autoAck
	s.mu.Unlock()
	if auto {
		s.ack()
	}
}

// ack makes every outcome delivered so far durable, in order, as the
// broker's answers would: the record is finished (its ledger told) and its
// job given back (job.recycle; delivered.j is not read after).
func (s *recordingSink) ack() {
	s.mu.Lock()
	todo := slices.Clone(s.got[s.acked:])
	s.acked = len(s.got)
	s.mu.Unlock()
	for _, d := range todo {
		j := d.j
		switch d.verdict {
		case verdictDone:
			j.t.filtered(j)
		default:
			j.t.d.Budget.ReleaseOutputs(j.outcome.held)
			j.finish()
			j.tr.End("ok", "", "")
			j.recycle() // as a sink's last answer does: the engine's next records take it
		}
	}
}

// deliveries returns what the sink was handed so far.
func (s *recordingSink) deliveries() []delivered {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// fakeLedger is a Ledger that records the offsets it is told are done or
// abandoned (and marks done ones in the partition's tracker, as
// ledger.Offsets does). ordered gives tasks a release order (ordering
// partition).
type fakeLedger struct {
	ordered  bool
	byOffset bool // places reserved at enqueue, a drop keeps its place (as ledger.Txn)

	mu        sync.Mutex
	done      []int64
	abandons  []int64
	doneTwice int
}

func (l *fakeLedger) Policy() LedgerPolicy {
	p := LedgerPolicy{Tracks: true, DropKeepsPlace: l.byOffset}
	switch {
	case l.byOffset:
		p.Order = ReleaseByOffset
	case l.ordered:
		p.Order = ReleaseInOrder
	}
	return p
}

func (l *fakeLedger) Done(tr *offsets.Tracker, r *kgo.Record) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !tr.Done(r.Offset) {
		l.doneTwice++
		return false
	}
	l.done = append(l.done, r.Offset)
	return true
}

func (l *fakeLedger) Abandon(r *kgo.Record) bool {
	l.mu.Lock()
	l.abandons = append(l.abandons, r.Offset)
	l.mu.Unlock()
	return false
}

// trackerLedger is ledger.Offsets as the benchmarks need it (that package
// imports this one): a record is done in its partition's tracker, nothing
// recorded, no lock.
type trackerLedger struct{ ordered bool }

func (l trackerLedger) Policy() LedgerPolicy {
	if l.ordered {
		return LedgerPolicy{Order: ReleaseInOrder, Tracks: true}
	}
	return LedgerPolicy{Tracks: true}
}
func (trackerLedger) Done(tr *offsets.Tracker, r *kgo.Record) bool { return tr.Done(r.Offset) }
func (trackerLedger) Abandon(*kgo.Record) bool                     { return false }

func (l *fakeLedger) doneOffsets() []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.done)
}

// fakePauser is a Pauser that records its calls ("pause in/0").
type fakePauser struct {
	mu    sync.Mutex
	calls []string
}

func (p *fakePauser) PausePartition(topic string, partition int32) {
	p.mu.Lock()
	p.calls = append(p.calls, fmt.Sprintf("pause %s/%d", topic, partition))
	p.mu.Unlock()
}

func (p *fakePauser) ResumePartition(topic string, partition int32) {
	p.mu.Lock()
	p.calls = append(p.calls, fmt.Sprintf("resume %s/%d", topic, partition))
	p.mu.Unlock()
}

func (p *fakePauser) log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// engine is a task wired to fakes.
type engine struct {
	t      *Task
	d      *Deps
	sink   *recordingSink
	ledger *fakeLedger
	pauser *fakePauser
	pend   *pendHub
	insts  atomic.Int32 // instances made
}

// engineOpts are what a test sets of its engine's pipeline.
type engineOpts struct {
	ordering    string
	min, max    int
	batch       int           // batch_records (0: 1)
	growAfter   time.Duration // instances.grow_after (0: an hour: the pool never grows by waiting)
	noStart     bool          // no workers: the test drives the queues itself
	guest       guestFunc     // nil: every record ends ok with no output
	autoAck     bool
	byOffset    bool // a release order reserved at enqueue, as under exactly_once
	maxInFlight int
	idleTimeout time.Duration
}

// newEngine makes a task wired to fakes, started unless o.noStart; the
// test's cleanup stops it and waits for its workers.
func newEngine(tb testing.TB, o engineOpts) *engine {
	tb.Helper()
	if o.batch == 0 {
		o.batch = 1
	}
	if o.growAfter == 0 {
		o.growAfter = time.Hour
	}
	if o.maxInFlight == 0 {
		o.maxInFlight = 1 << 20
	}
	if o.idleTimeout == 0 {
		o.idleTimeout = time.Hour
	}
	g := o.guest
	if g == nil {
		g = func(*abi.Record) host.Result { return host.Result{Status: abi.StatusOK} }
	}
	pc := &config.Pipeline{Name: "fake", Ordering: o.ordering, MaxInFlight: o.maxInFlight, MaxInFlightBytes: 1 << 40, BatchRecords: o.batch,
		Output: "out", DeadLetterTopic: "dlq",
		Instances: config.Instances{Min: o.min, Max: o.max, IdleTimeout: o.idleTimeout, GrowAfter: o.growAfter}}
	e := &engine{sink: &recordingSink{autoAck: o.autoAck}, pauser: &fakePauser{}, pend: &pendHub{}}
	e.ledger = &fakeLedger{ordered: o.ordering == config.OrderPartition, byOffset: o.byOffset}
	var bg background.Group
	flow := NewFlowSignals()
	e.d = &Deps{Config: pc, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Role: Primary{}, Mods: &version.Modules{},
		Budget: budget.New(1000, 1<<40, 1<<40), Fetch: FetchControl{Flow: &flow, Pauser: e.pauser}, Stats: &hooks.Stats{}, Background: &bg,
		PartStats: func(string, int32) *hooks.Stats { return &hooks.Stats{} },
		Sink:      e.sink, Ledger: e.ledger,
		Inst: InstanceDeps{New: func(context.Context, *version.Version) (Instance, error) {
			e.insts.Add(1)
			return newFakeInstance(g, e.pend), nil
		}}}
	e.d.Mods.Ver.Store(&version.Version{M: &host.Module{}})
	sc := make(chan struct{})
	e.d.Mods.SwapCh.Store(&sc)
	e.t = NewTask(e.d, "in", 0, nil)
	if !o.noStart {
		e.t.Start()
	}
	tb.Cleanup(func() {
		e.t.Stop()
		if !e.t.WaitWorkers(time.Now().Add(10 * time.Second)) {
			tb.Error("the task's workers did not exit")
		}
		e.t.Close()
	})
	return e
}

// recs makes records of the partition at offsets from, from+1, ..., one a
// key of keys ("" is a null key).
func recs(from int64, keys ...string) []*kgo.Record {
	out := make([]*kgo.Record, len(keys))
	for i, k := range keys {
		r := &kgo.Record{Topic: "in", Partition: 0, Offset: from + int64(i), Value: []byte("v")}
		if k != "" {
			r.Key = []byte(k)
		}
		out[i] = r
	}
	return out
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
