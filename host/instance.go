package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/asyncop"
	"github.com/wasmstream/wasmstream/host/internal/slots"
	"github.com/wasmstream/wasmstream/internal/faultkind"
)

// FaultKind classifies a guest fault. Every fault discards the instance.
// The kinds are defined in internal/faultkind, which the configuration reads
// without linking the runtime.
type FaultKind = faultkind.Kind

const (
	FaultTrap         = faultkind.Trap
	FaultExit         = faultkind.Exit
	FaultPanic        = faultkind.Panic
	FaultDeadline     = faultkind.Deadline
	FaultOOM          = faultkind.OOM
	FaultBadPointer   = faultkind.BadPointer
	FaultProtocol     = faultkind.Protocol
	FaultCanceled     = faultkind.Canceled
	FaultInstanceLost = faultkind.InstanceLost
)

// RetryableFaultKinds are the fault kinds a record may be retried after
// (faultkind.Retryable).
var RetryableFaultKinds = faultkind.Retryable

// Fault is a guest fault. The instance that faulted is dead, unless Keep is
// set: a record that reached its deadline while waiting on asynchronous
// operations fails without its instance (the guest was not running).
type Fault struct {
	Kind   FaultKind
	Msg    string
	Stderr string // the tail of what the guest wrote to stdout/stderr during the call
	Keep   bool   // the instance lives on
}

func (f *Fault) Error() string {
	s := fmt.Sprintf("guest fault (%s): %s", f.Kind, f.Msg)
	if f.Stderr != "" {
		s += "; guest output: " + f.Stderr
	}
	return s
}

// GuestError is a failure the guest reported itself (status retry or fail).
type GuestError struct {
	Status abi.Status
	Msg    string
}

func (e *GuestError) Error() string { return e.Msg }

// Result is the outcome of one call into the guest.
type Result struct {
	Status abi.Status
	// Outputs are what the record emitted, held until now; set only when
	// Status is StatusOK. The caller owns them.
	Outputs []abi.Output
	// HeldBytes is what Outputs count against the engine's bound on held
	// outputs (heldoutputs.go); the caller gives it back with
	// Engine.ReleaseOutputs once they are acknowledged or dropped.
	HeldBytes int64
	// Err explains a failure: a *GuestError or a *Fault.
	Err error
}

// Fault returns the fault that ended the call, or nil.
func (r Result) Fault() *Fault {
	if r.Err == nil {
		return nil // the common case, without errors.As's allocation
	}
	if f, ok := r.Err.(*Fault); ok {
		return f
	}
	var f *Fault
	if errors.As(r.Err, &f) {
		return f
	}
	return nil
}

// Instance is one instantiation of a module. It is not safe for concurrent
// use: one goroutine at a time calls Process, ProcessBatch, Poll and Close. Asynchronous
// operations complete on other goroutines, but their completions only queue;
// the owner delivers them into the guest with Poll, so every call into an
// instance is serialised.
type Instance struct {
	m          *Module
	id         uint64
	mod        api.Module
	entry      guestEntries // the module's exports the host calls
	stack      []uint64
	ctx        context.Context
	base       context.Context // ends when the instance closes: cancels its operations
	baseCancel context.CancelFunc
	fuel       fuelState // the meter's deadline and allowance (fuel.go)
	stderr     outputBuffer
	logs       logBucket // rate-limits log (guestlog.go)
	dead       bool

	cur        *recState    // the record of the call in progress
	batch      batchState   // the batch call in progress (batch.go)
	batchOpts  batchOpts    // how ProcessBatch takes records
	comps      compState    // the completions call in progress (completions.go)
	nextState  State        // the State of the record Process starts next (ProcessState)
	curOp      *opState     // the operation being completed (result_read)
	kept       keptForReuse // record states and encodings reused from one record to the next
	lastHandle uint32
	lastOp     uint32
	fault      *Fault

	calls   callTimes       // what its calls cost and when the last one ran
	slot    slotLease       // the guest-call slot it keeps between calls
	waiting waitingRecords  // records waiting on operations
	q       completionQueue // completed operations waiting for delivery
}

// guestEntries are the module's exports the host calls on an instance.
type guestEntries struct {
	record      api.Function
	complete    api.Function // nil when the module does no async work
	timer       api.Function // wasmstream_on_timer; nil when the module has no timers (timers.go)
	batch       api.Function // nil when the module has no batch entry (batch.go)
	completions api.Function // nil when the module has no completions entry (completions.go)
	// rp is a Redpanda transform's entry: its _start running on a
	// goroutine of its own, parked for the next batch
	// (redpanda_instance.go); nil for a wasmstream module.
	rp *rpInstance
}

// batchOpts are how ProcessBatch takes records: LimitBatchInFlight,
// StopBatchAfterFailure, GateBatch.
type batchOpts struct {
	maxOps           int
	stopAfterFailure bool
	take             func(int) bool
}

// callTimes are what an instance's calls cost once they had a guest-call
// slot (CallTimes), and when its last call started and ended (LastCall).
type callTimes struct {
	run        time.Duration
	start, end time.Time
}

// slotLease is the guest-call slot an instance keeps between calls
// (KeepSlot): held while leased; turn is when its current turn with it
// began (slotQuantum); wait is what its calls waited for a slot
// (CallTimes).
type slotLease struct {
	keep   bool
	leased bool
	held   slots.Held
	turn   time.Time
	wait   time.Duration
}

// waitingRecords are an instance's records waiting on operations.
type waitingRecords struct {
	recs map[uint32]*recState // by handle
	// No waiting record's deadline is before earliest (zero: none was
	// waiting since the last look). Poll looks for expired records only
	// once it has passed, and then makes it exact again: one look at every
	// waiting record per deadline, not per completion.
	earliest time.Time
	opsOut   int    // operations of waiting records not yet completed
	lost     []Done // waiting records failed by the instance's death, not yet collected
}

// keptForReuse is what an instance reuses of its records, where each
// would be an allocation a record. (Poll's answer is not reused: its
// caller may still hold it when it next calls the instance.)
type keptForReuse struct {
	spare *recState    // reused for records that complete in one call
	encs  [][]byte     // encodings of records that waited, for the next records that wait (newRec)
	scan  stateScanner // state_scan's and state_scan2's writer into the guest's buffer
}

// completionQueue holds completed operations until Poll delivers them;
// ready is signalled when one is queued. mu guards ops and closed. spare
// is the array Poll delivered from last, which it hands back to ops at the
// next take: each Poll would otherwise leave ops nil, and the next
// completion's append allocate a new one. It is Poll's (the instance's
// goroutine's), outside mu.
type completionQueue struct {
	mu     sync.Mutex
	ops    []*opState
	closed bool
	ready  chan struct{}
	spare  []*opState
}

// recState is one record in flight on the instance.
type recState struct {
	handle   uint32
	tag      any
	enc      []byte
	outputs  []abi.Output
	outBytes int   // what limits.max_output_bytes counts: the outputs' encodings, the state writes' keys and values (state.go)
	written  int   // the keys it wrote state to: each is one more output (a changelog record) in limits.max_outputs
	held     int64 // what outputs and state writes count in the engine's heldOutputs
	errMsg   string
	state    State // answers its state_* calls (nil: no state)
	deadline time.Time
	ops      []*opState             // outstanding, in the order they started (at most async.max_per_record)
	ctx      *asyncop.RecordContext // the operations' context, opsCtx once the first one starts
	ended    bool
	// firing: the call is a timer's firing (ProcessTimer), of the timer
	// at firingAt: timer_set at or before it returns ErrnoLimit.
	firing   bool
	firingAt int64
	opsMem   [2]*opState // ops' first room: most records wait on one or two
	// opRoom is its first operation's state (startOp), allocated with the
	// record's: most records wait on one. Like opsCtx it is never reused.
	opRoom     opState
	opRoomUsed bool
	// opsCtx is ctx's room: a state that started operations is never
	// reused (finishRec), as they may still hold their context.
	opsCtx asyncop.RecordContext
}

// encode makes st.enc rec's encoding, in st.enc's array when it has room
// (a record state reused), else in one of the exact size: a record that
// waits takes a new state, whose encoding would otherwise grow from
// nothing, one allocation a doubling.
func (st *recState) encode(rec *abi.Record) {
	if n := abi.RecordSize(rec); cap(st.enc) < n {
		st.enc = make([]byte, 0, n)
	}
	st.enc = abi.AppendRecord(st.enc[:0], rec)
}

// addOp registers op as outstanding.
func (st *recState) addOp(op *opState) {
	if st.ops == nil {
		st.ops = st.opsMem[:0]
	}
	st.ops = append(st.ops, op)
}

// removeOp forgets the outstanding operation op.
func (st *recState) removeOp(op *opState) {
	for i, o := range st.ops {
		if o == op {
			n := len(st.ops) - 1
			copy(st.ops[i:], st.ops[i+1:])
			st.ops[n] = nil
			st.ops = st.ops[:n]
			return
		}
	}
}

// opState is one asynchronous operation.
type opState struct {
	id      uint32
	kind    abi.OpKind
	desc    string
	started time.Time
	rec     *recState
	result  []byte
	doneAt  time.Time // when it completed (set with finished)
	// Guarded by the instance's qmu.
	finished bool // done was called
	orphan   bool // its record ended: deliver it as canceled
}

// Done is a record that finished: its tag (as given to Process) and outcome.
type Done struct {
	Tag any
	Result
}

type instanceKey struct{}

// ID is unique among the module's instances.
func (in *Instance) ID() uint64 { return in.id }

// Dead reports whether the instance faulted or was closed.
func (in *Instance) Dead() bool { return in.dead }

// MemoryPages is the size of the instance's linear memory in pages.
func (in *Instance) MemoryPages() uint32 {
	if in.dead {
		return 0
	}
	return in.mod.Memory().Size() / 65536
}

// Pending is the number of records waiting on asynchronous operations.
func (in *Instance) Pending() int { return len(in.waiting.recs) + len(in.waiting.lost) }

// AsyncInFlight is the number of operations outstanding for the instance's
// pending records.
func (in *Instance) AsyncInFlight() int { return in.waiting.opsOut }

// Ready is signalled when a completion is queued or the instance lost its
// pending records; call Poll then.
func (in *Instance) Ready() <-chan struct{} { return in.q.ready }

// NextDeadline is when the earliest deadline of a pending record may pass:
// that deadline, or before it when the record it was ended meanwhile (Poll
// then finds nothing expired, and the next NextDeadline is later). Zero if
// no record is pending.
func (in *Instance) NextDeadline() time.Time {
	if len(in.waiting.recs) == 0 {
		return time.Time{}
	}
	return in.waiting.earliest
}

// expire fails the pending records whose deadline passed at now, into out,
// and makes in.waiting.earliest the earliest deadline of those left.
func (in *Instance) expire(now time.Time, out []Done) []Done {
	if len(in.waiting.recs) == 0 || now.Before(in.waiting.earliest) {
		return out
	}
	in.waiting.earliest = time.Time{}
	for h, st := range in.waiting.recs {
		if now.Before(st.deadline) {
			if in.waiting.earliest.IsZero() || st.deadline.Before(in.waiting.earliest) {
				in.waiting.earliest = st.deadline
			}
			continue
		}
		delete(in.waiting.recs, h)
		res := Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultDeadline, Keep: true,
			Msg: fmt.Sprintf("record deadline of %s exceeded while waiting on %d asynchronous operation(s)%s (limits.record_timeout)", in.m.limits.RecordTimeout, len(st.ops), opList(st))}}
		out = append(out, Done{Tag: st.tag, Result: res})
		in.finishRec(st)
	}
	return out
}

// Close releases the instance. Records still pending fail as lost; Poll
// returns them.
func (in *Instance) Close(ctx context.Context) {
	if in.dead {
		return
	}
	in.dead = true
	in.Yield()
	in.q.mu.Lock()
	in.q.closed = true
	in.q.ops = nil
	in.q.mu.Unlock()
	if in.baseCancel != nil {
		in.baseCancel()
	}
	if len(in.waiting.recs) > 0 {
		for h, st := range in.waiting.recs {
			in.waiting.lost = append(in.waiting.lost, Done{Tag: st.tag, Result: Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultInstanceLost,
				Msg: fmt.Sprintf("the instance was discarded while the record waited on %d asynchronous operation(s)%s", len(st.ops), opList(st))}}})
			in.endRecord(st)
			delete(in.waiting.recs, h)
		}
		in.signal()
	}
	if in.entry.rp != nil {
		in.rpStop()
	}
	if in.mod != nil {
		in.mod.Close(ctx)
	}
}

func (in *Instance) signal() {
	select {
	case in.q.ready <- struct{}{}:
	default:
	}
}

// newRec takes a record state for a call.
func (in *Instance) newRec(tag any) *recState {
	st := in.kept.spare
	if st == nil {
		st = &recState{}
		if n := len(in.kept.encs); n > 0 {
			// A record that waited left its encoding's array: a new state
			// would otherwise allocate one for every record that waits.
			st.enc, in.kept.encs[n-1] = in.kept.encs[n-1], nil
			in.kept.encs = in.kept.encs[:n-1]
		}
	}
	in.kept.spare = nil
	in.lastHandle++
	if in.lastHandle == 0 {
		in.lastHandle = 1
	}
	st.handle, st.tag, st.ended = in.lastHandle, tag, false
	st.outputs, st.outBytes, st.written, st.held, st.errMsg = nil, 0, 0, 0, ""
	st.firing, st.firingAt = false, 0
	return st
}

// endRecord retires st: its outstanding operations are canceled and will be
// delivered to the guest as canceled, and its handle becomes invalid.
func (in *Instance) endRecord(st *recState) {
	st.ended = true
	if len(st.ops) > 0 {
		if obs := in.m.cfg.Observer; obs != nil && st.tag != nil {
			now := time.Now()
			for _, op := range st.ops {
				obs.AsyncOp(st.tag, op.kind, op.desc, op.started, now.Sub(op.started), "canceled: the record ended first")
			}
		}
		in.waiting.opsOut -= len(st.ops)
		in.q.mu.Lock()
		for _, op := range st.ops {
			op.orphan = true // delivered as canceled, if it still completes
		}
		in.q.mu.Unlock()
		clear(st.ops)
		st.ops = nil
	}
	if st.ctx != nil {
		st.ctx.Cancel()
		st.ctx = nil
	}
	st.tag, st.state = nil, nil
	st.outputs = nil
	in.m.held.release(st.held) // outputs not handed over die with the record
	st.held = 0
}

// CallTimes returns how long the instance's calls waited for a guest-call
// slot (one per core, shared by every pipeline) and how long they ran once
// they had one, in all since it was created. A pool whose calls mostly wait
// for a slot has more instances than the cores can run.
func (in *Instance) CallTimes() (wait, run time.Duration) { return in.slot.wait, in.calls.run }

// LastCall returns when the instance's last call (Process or one of Poll's)
// started, once it had a core, and when it returned: a caller timing a
// record reads the clock no more than the call did.
func (in *Instance) LastCall() (start, end time.Time) { return in.calls.start, in.calls.end }

// Process calls the guest with rec and returns its outcome. ctx bounds the
// call besides the record deadline: when ctx ends, the guest is interrupted.
// tag identifies the record to the caller: a record that returns
// StatusPending finishes later, and Poll returns it with its tag.
func (in *Instance) Process(ctx context.Context, rec *abi.Record, tag any) Result {
	if in.dead {
		now := time.Now()
		in.calls.start, in.calls.end = now, now
		return Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultProtocol, Msg: "instance is closed"}}
	}
	if in.entry.rp != nil {
		return in.rpProcess(ctx, rec, tag)
	}
	st := in.newRec(tag)
	st.state, in.nextState = in.nextState, nil
	st.encode(rec)
	res := in.call(ctx, st, nil, func() ([]uint64, api.Function) {
		s := in.stack[:2]
		s[0], s[1] = uint64(st.handle), uint64(len(st.enc))
		return s, in.entry.record
	})
	return in.settle(st, res, true)
}

// call runs fn's export for st under the record deadline and classifies the
// outcome; on a fault the instance is closed.
func (in *Instance) call(ctx context.Context, st *recState, op *opState, fn func() ([]uint64, api.Function)) Result {
	in.fault = nil
	in.stderr.reset()
	start, aerr := in.takeSlot(ctx)
	in.calls.start, in.calls.end = start, start
	if aerr != nil {
		return Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultCanceled, Msg: "call abandoned by the host before it started: " + aerr.Error()}}
	}
	if op == nil {
		st.deadline = start.Add(in.m.limits.RecordTimeout)
	}
	// No context per call: refuel checks st.deadline and ctx (fuel.go).
	in.fuel.startCall(ctx, st.deadline, "record")
	in.cur, in.curOp = st, op
	stack, f := fn()
	err := f.CallWithStack(in.ctx, stack)
	end := time.Now()
	in.calls.end = end
	in.calls.run += end.Sub(start)
	in.fuel.endCall()
	in.cur, in.curOp = nil, nil
	if !in.slot.keep || err != nil {
		in.Yield()
	}
	if obs := in.m.cfg.Observer; obs != nil && st.tag != nil {
		name := abi.ExportOnRecord
		switch {
		case op != nil:
			name = abi.ExportOnComplete
		case st.firing:
			name = abi.ExportOnTimer
		}
		obs.GuestCall(st.tag, name, start, end.Sub(start), err)
	}
	if err != nil {
		flt := in.classify(err, ctx.Err())
		delete(in.waiting.recs, st.handle) // st gets this fault, not "lost"
		in.Close(context.Background())
		return Result{Status: abi.StatusRetry, Err: flt}
	}
	return Result{Status: abi.Status(int32(stack[0]))}
}

// slotQuantum is a turn of an instance that keeps its slot between calls
// (KeepSlot): after it, the instance gives the slot up if other calls wait
// for one, and the Go processor to other goroutines in any case.
const slotQuantum = time.Millisecond

// takeSlot waits for a core, within the pipeline's share of them
// (host/internal/slots), before the deadline starts: with more instances
// than cores, the Go scheduler cannot preempt a goroutine inside guest code,
// and calls left runnable would be starved for seconds and time out for no
// fault of theirs. An instance that keeps its slot goes on with it unless
// other calls waited while it held it for slotQuantum. It returns when the
// call may start.
func (in *Instance) takeSlot(ctx context.Context) (time.Time, error) {
	asked := time.Now()
	if in.slot.leased {
		if asked.Sub(in.slot.turn) < slotQuantum {
			return asked, nil
		}
		// Its turn is over. Calls waited: queue behind them. None did: still
		// let the goroutines that run no guest code (the Kafka clients, the
		// poll loop, timers) have the core, which the Go scheduler would
		// otherwise give them only after 10 ms.
		in.slot.turn = asked
		if !in.m.slots.Contended() {
			runtime.Gosched()
			return time.Now(), nil
		}
		in.Yield()
	}
	held, err := in.m.slots.Acquire(ctx)
	if err != nil {
		return time.Now(), err
	}
	start := time.Now()
	in.slot.wait += start.Sub(asked)
	in.slot.held, in.slot.leased, in.slot.turn = held, true, start
	return start, nil
}

// KeepSlot makes the instance keep its guest-call slot between calls, so
// that a caller running records back to back does not hand the core over
// and wait for it again at each one. The caller must call Yield before it
// waits for anything but the instance's own calls (new records, completions,
// a timer), and the instance gives the slot up by itself when other calls
// waited for slotQuantum or when it closes.
func (in *Instance) KeepSlot() { in.slot.keep = true }

// Yield gives back the guest-call slot the instance kept, if any.
func (in *Instance) Yield() {
	if in.slot.leased {
		in.slot.held.Release()
		in.slot.leased, in.slot.held = false, slots.Held{}
	}
}

// settle turns the status a call returned for st into the record's outcome.
func (in *Instance) settle(st *recState, res Result, first bool) Result {
	if res.Err != nil {
		in.finishRec(st)
		return res
	}
	switch res.Status {
	case abi.StatusOK:
		out, held := st.outputs, st.held
		st.outputs, st.held = nil, 0 // the caller's now
		in.finishRec(st)
		return Result{Status: abi.StatusOK, Outputs: out, HeldBytes: held}
	case abi.StatusRetry, abi.StatusFail:
		msg := st.errMsg
		if msg == "" {
			msg = fmt.Sprintf("guest returned %s without an error message", res.Status)
		}
		in.finishRec(st)
		return Result{Status: res.Status, Err: &GuestError{Status: res.Status, Msg: msg}}
	case abi.StatusPending:
		if len(st.ops) == 0 {
			in.finishRec(st)
			in.Close(context.Background())
			return Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultProtocol, Msg: "guest returned pending, but the record has no asynchronous operation outstanding: it could never complete"}}
		}
		if first {
			if in.waiting.recs == nil {
				in.waiting.recs = map[uint32]*recState{}
			}
			in.waiting.recs[st.handle] = st
			if in.waiting.earliest.IsZero() || st.deadline.Before(in.waiting.earliest) {
				in.waiting.earliest = st.deadline
			}
			// The record keeps its encoding for record_read in callbacks.
		}
		return Result{Status: abi.StatusPending}
	default:
		in.finishRec(st)
		in.Close(context.Background())
		return Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultProtocol, Msg: fmt.Sprintf("guest returned invalid status %d", int32(res.Status))}}
	}
}

// finishRec retires st after its outcome is known.
func (in *Instance) finishRec(st *recState) {
	if in.waiting.recs != nil {
		delete(in.waiting.recs, st.handle)
	}
	pendingBefore := st.ctx != nil // it started operations: they keep pointing at it
	in.endRecord(st)
	switch {
	case !pendingBefore && in.kept.spare == nil:
		in.kept.spare = st
	case pendingBefore:
		// The state stays with its operations (a late completion is
		// delivered as canceled by its handle alone), but nothing reads
		// its encoding again: the array goes to the next record that
		// waits, a few kept, none over maxSpareEnc.
		if len(in.kept.encs) < maxSpareEncs && cap(st.enc) <= maxSpareEnc {
			in.kept.encs = append(in.kept.encs, st.enc[:0])
		}
		st.enc = nil
	}
}

// The encodings of records that waited kept for the next ones (finishRec):
// at most maxSpareEncs arrays of at most maxSpareEnc bytes each.
const (
	maxSpareEncs = 16
	maxSpareEnc  = 64 << 10
)

// startOp is async_start: it registers and starts an operation of the
// record in progress. It returns the op id or an errno.
func (in *Instance) startOp(kind abi.OpKind, req []byte) (uint32, abi.Errno) {
	st := in.cur
	opr, ok := in.m.ops[kind]
	if !ok || in.entry.complete == nil {
		return 0, abi.ErrnoNotSupported
	}
	if len(st.ops) >= in.m.async.MaxPerRecord {
		return 0, abi.ErrnoLimit
	}
	if st.ctx == nil {
		// Canceled when the record ends (endRecord), its instance's
		// Close included: no timer, no watch of a parent (RecordContext).
		st.opsCtx.Init(st.deadline)
		st.ctx = &st.opsCtx
	}
	in.lastOp++
	if in.lastOp == 0 {
		in.lastOp = 1
	}
	var op *opState
	if !st.opRoomUsed {
		// Marked used even if Start refuses: done is never called then,
		// but the room is not handed out twice.
		st.opRoomUsed = true
		op = &st.opRoom
	} else {
		op = new(opState)
	}
	*op = opState{id: in.lastOp, kind: kind, started: time.Now(), rec: st}
	done := func(result []byte) { in.deliver(op, result) }
	var desc string
	var err error
	if ro, ok := opr.(RecordOperation); ok {
		desc, err = ro.StartRecord(st.ctx, st.state, req, done)
	} else {
		desc, err = opr.Start(st.ctx, req, done)
	}
	if err != nil {
		if e, ok := err.(abi.Errno); ok {
			return 0, e
		}
		return 0, abi.ErrnoBadEncoding
	}
	op.desc = desc
	st.addOp(op)
	in.waiting.opsOut++
	in.m.asyncOps.Add(1)
	return op.id, 0
}

// deliver queues op's result; it runs on the operation's goroutine (or
// inside Start).
func (in *Instance) deliver(op *opState, result []byte) {
	in.q.mu.Lock()
	if op.finished {
		in.q.mu.Unlock()
		return
	}
	op.finished = true
	op.doneAt = time.Now()
	if in.q.closed {
		in.q.mu.Unlock()
		in.m.asyncOps.Add(-1)
		return // the instance is gone: the late completion is dropped
	}
	op.result = result
	in.q.ops = append(in.q.ops, op)
	in.q.mu.Unlock()
	in.m.asyncOps.Add(-1)
	in.signal()
}

// Poll fails the pending records whose deadline passed, then delivers the
// queued completions into the guest (one call each, on this goroutine; a
// module with the completions entry gets several per call, completions.go),
// and returns the records that finished. After the instance died, it returns
// the records it lost.
func (in *Instance) Poll(ctx context.Context, now time.Time) []Done {
	var out []Done
	if len(in.waiting.lost) > 0 {
		out, in.waiting.lost = in.waiting.lost, nil
	}
	if in.dead {
		return out
	}
	out = in.expire(now, out)
	in.q.mu.Lock()
	q := in.q.ops
	in.q.ops, in.q.spare = in.q.spare, nil
	in.q.mu.Unlock()
	defer in.reuseQueue(q)
	if in.entry.completions != nil && len(q) > 1 {
		var n int
		out, n = in.pollCompletions(ctx, q, out)
		q = q[n:]
	}
	for _, op := range q {
		if in.dead {
			break
		}
		st := op.rec
		switch in.takeCompletion(op) {
		case completionCanceled:
			in.deliverCanceled(ctx, op)
			continue
		case completionExpired:
			continue // the next Poll fails it
		}
		res := in.call(ctx, st, op, func() ([]uint64, api.Function) {
			in.stack[0], in.stack[1] = uint64(st.handle), uint64(op.id)
			in.stack = append(in.stack[:2], uint64(len(op.result)))
			return in.stack, in.entry.complete
		})
		op.result = nil
		if res.Err == nil && res.Status == abi.StatusPending {
			if len(st.ops) > 0 {
				continue
			}
		}
		tag := st.tag
		res = in.settle(st, res, false)
		out = append(out, Done{Tag: tag, Result: res})
	}
	if len(in.waiting.lost) > 0 {
		out = append(out, in.waiting.lost...)
		in.waiting.lost = nil
	}
	return out
}

// reuseQueue keeps q, the completions Poll took, as the queue's next
// array, emptied (nothing of the delivered operations is kept), unless it
// grew past a bound.
func (in *Instance) reuseQueue(q []*opState) {
	clear(q)
	if cap(q) <= maxKeptQueue {
		in.q.spare = q[:0]
	}
}

// maxKeptQueue bounds the array Poll keeps from one call to the next (the
// completion queue's): a burst past it is not held for good.
const maxKeptQueue = 1024

// What takeCompletion found of a queued completion.
const (
	completionDue      = iota // for a record still waiting: deliver it
	completionCanceled        // its record already ended: deliver it as canceled
	completionExpired         // its record's deadline passed: not delivered (result dropped)
)

// takeCompletion takes op off its record's operations and the instance's
// count in flight and tells the observer, unless its record already ended;
// it says whether op is to be delivered. Poll's loop and the completions
// entry (beginCompletion) both take completions through it.
func (in *Instance) takeCompletion(op *opState) int {
	st := op.rec
	if op.orphan || st.ended {
		return completionCanceled
	}
	st.removeOp(op)
	in.waiting.opsOut--
	if obs := in.m.cfg.Observer; obs != nil {
		obs.AsyncOp(st.tag, op.kind, op.desc, op.started, op.doneAt.Sub(op.started), outcomeOf(op.result))
	}
	if !time.Now().Before(st.deadline) {
		op.result = nil
		return completionExpired
	}
	return completionDue
}

// deliverCanceled tells the guest an operation of a record that already
// ended will not complete, so that it can free what it kept for it. What the
// call returns is ignored; the handle is no longer valid.
func (in *Instance) deliverCanceled(ctx context.Context, op *opState) {
	if in.entry.complete == nil {
		return
	}
	op.result = abi.AppendCompletionError(op.result[:0], abi.CompletionCanceled, "the record ended before the operation completed")
	st := &recState{handle: op.rec.handle, ended: true, deadline: time.Now().Add(in.m.limits.RecordTimeout)}
	res := in.call(ctx, st, op, func() ([]uint64, api.Function) {
		s := in.stack[:3]
		s[0], s[1], s[2] = uint64(st.handle), uint64(op.id), uint64(len(op.result))
		return s, in.entry.complete
	})
	if f := res.Fault(); f != nil {
		in.m.log.Warn("guest faulted on a canceled completion; instance discarded", "instance", in.id, "err", f)
	}
}

// outcomeOf names how an operation ended, from its result.
func outcomeOf(result []byte) string {
	c, err := abi.DecodeCompletion(result)
	switch {
	case err != nil:
		return "malformed result"
	case c.Code == abi.CompletionOK:
		return "ok"
	case c.Code == abi.CompletionRefused:
		return "refused: " + c.Message
	}
	return c.Message
}

func opList(st *recState) string {
	if len(st.ops) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(": ")
	n := 0
	for _, op := range st.ops {
		if n == 3 {
			fmt.Fprintf(&b, ", … %d more", len(st.ops)-n)
			break
		}
		if n > 0 {
			b.WriteString(", ")
		}
		b.WriteString(describe(op.kind, op.desc, op.started))
		n++
	}
	return b.String()
}

func (in *Instance) classify(err, parentErr error) *Fault {
	tail := in.stderr.String()
	switch {
	case in.fault != nil:
		in.fault.Stderr = tail
		return in.fault
	case parentErr != nil:
		return &Fault{Kind: FaultCanceled, Msg: "call abandoned by the host: " + parentErr.Error(), Stderr: tail}
	case strings.Contains(tail, "out of memory"):
		return &Fault{Kind: FaultOOM, Msg: fmt.Sprintf("guest ran out of memory (limit %d pages = %d MiB, limits.memory_pages)", in.m.limits.MemoryPages, in.m.limits.MemoryPages/16), Stderr: tail}
	case strings.HasPrefix(tail, "panic: ") || strings.Contains(tail, "\npanic: "):
		line := tail[strings.Index(tail, "panic: "):]
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		return &Fault{Kind: FaultPanic, Msg: "guest " + line, Stderr: tail}
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return &Fault{Kind: FaultExit, Msg: fmt.Sprintf("guest exited with code %d", exit.ExitCode()), Stderr: tail}
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return &Fault{Kind: FaultTrap, Msg: msg, Stderr: tail}
}

// outputBuffer keeps the first max bytes a guest writes to stdout/stderr
// during a call (where a panic or "out of memory" message starts) and counts
// the rest.
type outputBuffer struct {
	buf     []byte
	max     int
	dropped int
}

func (t *outputBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := t.max - len(t.buf); room < len(p) {
		t.dropped += len(p) - max(room, 0)
		p = p[:max(room, 0)]
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *outputBuffer) reset() { t.buf, t.dropped = t.buf[:0], 0 }

func (t *outputBuffer) String() string {
	s := string(bytes.TrimSpace(bytes.ToValidUTF8(t.buf, []byte("?"))))
	if t.dropped > 0 {
		s += fmt.Sprintf(" …(%d more bytes)", t.dropped)
	}
	return s
}

func (t *outputBuffer) suffix() string {
	if s := t.String(); s != "" {
		return "; guest output: " + s
	}
	return ""
}
