package host

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/limits"
)

// The batch entry (ABI.md §10): one call into the guest runs a run of
// records. The guest pulls them one at a time with record_next, which ends
// the record in progress (its status and, in one buffer, its outputs) and
// begins the next. Each record begins its own deadline, so the meter, the
// outputs, the failure message and a fault stay the record's; a fault ends
// the call and fails the record in progress only: the records before it
// keep their outcomes, the ones after it were not run (RATIONALE.md,
// "Calls that carry several records").

// MaxBatch bounds the records of one batch call: ProcessBatch runs at most
// that many and reports the rest not run.
const MaxBatch = limits.MaxBatch

// BatchRecord is one record of a batch: what Process (Rec, Tag) and
// ProcessState (State) take for one record.
type BatchRecord struct {
	Rec   *abi.Record
	Tag   any
	State State // answers the record's state_* calls; nil: no state
}

// Outcome is what became of one record of a batch.
type Outcome struct {
	Result
	// Start is when the record's turn began (its deadline runs from it),
	// End when its outcome was known or the call ended: what LastCall gives
	// for a record processed alone.
	Start, End time.Time
}

// batchState is the batch call in progress on an instance.
type batchState struct {
	active bool // a batch call is in progress: record_next answers
	ctx    context.Context
	recs   []BatchRecord
	out    []Outcome
	next   int           // the record record_next begins next
	cur    int           // the record in progress (in.cur); -1: none
	start  time.Time     // when the call began (its slot taken): see now
	begun  time.Time     // when the record in progress began
	paused time.Duration // waits for a guest-call slot between records
	failed bool          // a record ended retry or fail (StopBatchAfterFailure)
	ended  bool          // record_next answered 0: the call's last deadline is set
	run    runOutputs    // where the outputs of its records that ended ok are kept
}

// runOutputs is where the outputs of a batch's records that end ok are
// kept: their encodings copied into one byte slab and their decoded form
// carved from one []abi.Output, instead of two allocations a record
// (RATIONALE.md, "A run's outputs share their memory"). Each record's part
// is capped (three-index slices), so nothing a record holds can grow into
// another's. A slab is freed once the last output carved from it is
// acknowledged; every byte of it was counted in the held outputs while its
// output was held, so the bound on held outputs (host.max_held_output_bytes)
// holds per run. A record that ends pending keeps its outputs in memory of
// its own: it may wait long after its run is acknowledged.
type runOutputs struct {
	bytes []byte       // the byte slab's free part
	outs  []abi.Output // the output slab's free part
}

// maxRunSlab bounds one slab of a run's outputs: a bigger output list gets
// memory of its own.
const maxRunSlab = 64 << 10

// copyList returns a copy of list carved from the run's byte slab. left is
// how many of the batch's records are yet to end (this one included): a new
// slab is sized for that many lists like this one.
func (r *runOutputs) copyList(list []byte, left int) []byte {
	n := len(list)
	if n > cap(r.bytes)-len(r.bytes) {
		size := min(maxRunSlab, n*left)
		if size < n {
			return append([]byte(nil), list...)
		}
		r.bytes = make([]byte, 0, size)
	}
	at := len(r.bytes)
	r.bytes = append(r.bytes, list...)
	return r.bytes[at : at+n : at+n]
}

// carve returns an empty slice with room for n outputs, carved from the
// run's output slab (sized, like copyList's, for the records left).
func (r *runOutputs) carve(n, left int) []abi.Output {
	if n > cap(r.outs)-len(r.outs) {
		size := min(maxRunSlab/int(unsafe.Sizeof(abi.Output{})), n*left)
		if size < n {
			return make([]abi.Output, 0, n)
		}
		r.outs = make([]abi.Output, 0, size)
	}
	at := len(r.outs)
	r.outs = r.outs[:at+n]
	return r.outs[at : at : at+n]
}

// ProcessBatch runs recs on the instance and returns how many of them ran:
// out[i] is the outcome of recs[i] for i < ran, and recs[ran:] were not run
// (the caller runs them again, on this instance if it still lives, else on
// a fresh one). It runs at most min(len(recs), len(out), MaxBatch) records.
//
// A module with the batch entry (Info().Batch) gets them in one call (a
// single record goes through wasmstream_on_record, which costs less); any
// other module gets one Process call per record, with the same outcome. Each record keeps what Process would give it: its own deadline
// (limits.record_timeout, from its turn), outputs, status and tag; a
// record that returns StatusPending waits (Poll returns it) while the next
// ones run. A fault while record k runs fails record k; the instance is
// discarded (its waiting records become instance_lost, as after any
// fault) and ran is k+1. The batch also stops early, the rest not run,
// when ctx ends between two records, when the instance's records wait on
// the operations LimitBatchInFlight allows, after a record that ends
// retry or fail under StopBatchAfterFailure, or when the guest returns
// before taking them all. ran is 0 only when the instance is dead or ctx
// ended before the call could start.
//
// recs[i].State answers record i's state_* calls, as ProcessState's does.
// The host does not chain the States: for record i to see the writes of
// the records before it that ended ok (ABI.md §4.1: a later record of the
// partition sees them at once), its State must read through theirs.
func (in *Instance) ProcessBatch(ctx context.Context, recs []BatchRecord, out []Outcome) (ran int) {
	if in.entry.rp != nil {
		return in.rpProcessBatch(ctx, recs, out) // redpanda_instance.go
	}
	return in.processBatch(ctx, recs, out)
}

// processBatch is ProcessBatch for a wasmstream module.
func (in *Instance) processBatch(ctx context.Context, recs []BatchRecord, out []Outcome) (ran int) {
	n := min(len(recs), len(out), MaxBatch)
	if n == 0 || in.dead {
		return 0
	}
	if in.entry.batch == nil || n == 1 {
		// One record costs less through wasmstream_on_record than through
		// the batch entry (two record_next calls): BENCHMARKS.md, "Calls
		// that carry several records".
		return in.processEach(ctx, recs[:n], out)
	}
	maxLen := 0
	for i := range recs[:n] {
		maxLen = max(maxLen, abi.RecordSize(recs[i].Rec))
	}
	// The batch's handles are consecutive: they must not wrap past 0.
	if in.lastHandle > math.MaxUint32-uint32(n) {
		in.lastHandle = 0
	}
	first := in.lastHandle + 1
	b := &in.batch
	*b = batchState{ctx: ctx, recs: recs[:n], out: out[:n], cur: -1}
	defer func() { *b = batchState{} }()
	in.fault = nil
	in.stderr.reset()
	start, aerr := in.takeSlot(ctx)
	in.calls.start, in.calls.end = start, start
	if aerr != nil {
		return 0
	}
	// The guest's work before its first record_next is the first record's.
	b.start, b.begun = start, start
	in.fuel.startCall(ctx, start.Add(in.m.limits.RecordTimeout), "record")
	in.batch.active = true
	s := in.stack[:3]
	s[0], s[1], s[2] = uint64(first), uint64(n), uint64(maxLen)
	err := in.entry.batch.CallWithStack(in.ctx, s)
	end := time.Now()
	in.calls.end = end
	in.calls.run += end.Sub(start) - b.paused
	in.fuel.endCall()
	in.batch.active = false
	cur := in.cur
	in.cur = nil
	if !in.slot.keep || err != nil {
		in.Yield()
	}
	ran = b.next
	switch {
	case err != nil:
		flt := in.classify(err, ctx.Err())
		in.Close(context.Background()) // its waiting records are lost (Poll)
		switch {
		case cur != nil: // the record in progress faulted
			tag := cur.tag
			in.finishRec(cur)
			in.batchDecided(tag, Result{Status: abi.StatusRetry, Err: flt}, end, err)
		case b.next == 0: // before its first record: the first record's turn
			b.cur = 0
			in.batchDecided(recs[0].Tag, Result{Status: abi.StatusRetry, Err: flt}, end, err)
			ran = 1
		default: // after its last record: every record has its outcome
			in.m.log.Warn("guest faulted after the last record of a batch; instance discarded", "instance", in.id, "err", flt)
		}
	case cur != nil:
		// The guest returned during a record: what it returned is the
		// record's status, as from wasmstream_on_record.
		tag := cur.tag
		in.batchDecided(tag, in.settle(cur, Result{Status: abi.Status(int32(s[0]))}, true), end, nil)
	case b.next == 0:
		// A guest that returns without taking a record would never make
		// progress: the first record fails, as for a broken status.
		in.Close(context.Background())
		b.cur = 0
		in.batchDecided(recs[0].Tag, Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultProtocol,
			Msg: fmt.Sprintf("guest returned from %s without taking a record (%s.%s)", abi.ExportOnBatch, abi.BatchModule, abi.ImportRecordNext)}}, end, nil)
		ran = 1
	}
	return ran
}

// LimitBatchInFlight makes ProcessBatch stop taking records (the rest not
// run) once the instance's records wait on n asynchronous operations
// (AsyncInFlight), as a worker stops giving an instance records at
// async.max_in_flight; 0, the default, sets no limit.
func (in *Instance) LimitBatchInFlight(n int) { in.batchOpts.maxOps = n }

// StopBatchAfterFailure makes ProcessBatch stop after a record that ends
// retry or fail (the rest not run), so that a caller that keeps a
// partition's records in order can hold the records behind one that is to
// be retried in place. Off by default.
func (in *Instance) StopBatchAfterFailure(on bool) { in.batchOpts.stopAfterFailure = on }

// GateBatch makes ProcessBatch ask take(i) before it gives record i
// (i ≥ 1) to the guest, once every other reason to stop has passed: true
// takes the record, false ends the batch before it (the rest not run). A
// caller whose records not yet run can be handed to others meanwhile
// decides here, from any goroutine, which side has each. Nil, the
// default, takes every record.
func (in *Instance) GateBatch(take func(i int) bool) { in.batchOpts.take = take }

// batchFull reports whether the batch must stop before its next record
// (the first always runs). It asks the gate last: a record the gate gave
// is run.
func (in *Instance) batchFull(ctx context.Context, next int) bool {
	return next > 0 && (ctx.Err() != nil || in.batch.failed ||
		(in.batchOpts.maxOps > 0 && in.waiting.opsOut >= in.batchOpts.maxOps) ||
		(in.batchOpts.take != nil && !in.batchOpts.take(next)))
}

// processEach is ProcessBatch for a module without the batch entry.
func (in *Instance) processEach(ctx context.Context, recs []BatchRecord, out []Outcome) int {
	for i := range recs {
		if in.batchFull(ctx, i) {
			return i
		}
		r := &recs[i]
		out[i].Result = in.ProcessState(ctx, r.Rec, r.Tag, r.State)
		out[i].Start, out[i].End = in.LastCall()
		if in.dead || (in.batchOpts.stopAfterFailure && stopsBatch(out[i].Status)) {
			return i + 1
		}
	}
	return len(recs)
}

// stopsBatch reports whether a record that ends with status stops its
// batch under StopBatchAfterFailure.
func stopsBatch(status abi.Status) bool {
	return status == abi.StatusRetry || status == abi.StatusFail
}

// batchDecided records the outcome of the batch's record in progress.
func (in *Instance) batchDecided(tag any, res Result, end time.Time, err error) {
	b := &in.batch
	b.out[b.cur] = Outcome{Result: res, Start: b.begun, End: end}
	b.failed = in.batchOpts.stopAfterFailure && stopsBatch(res.Status)
	if obs := in.m.cfg.Observer; obs != nil && tag != nil {
		obs.GuestCall(tag, abi.ExportOnBatch, b.begun, end.Sub(b.begun), err)
	}
	b.cur = -1
}

// beginBatchRecord makes the batch's next record the one in progress, with
// its own deadline; nil when the batch takes no more records.
// now is the time record_next was called.
func (in *Instance) beginBatchRecord(now time.Time) *recState {
	b := &in.batch
	timeout := in.m.limits.RecordTimeout
	if b.ended || b.next >= len(b.recs) || in.batchFull(b.ctx, b.next) {
		in.batchEnded(now, timeout)
		return nil
	}
	if b.next > 0 {
		if in.slot.leased && now.Sub(in.slot.turn) >= slotQuantum {
			// A turn with the slot is over between two records as between
			// two calls (takeSlot): queue behind the calls that waited.
			if _, err := in.takeSlot(b.ctx); err != nil {
				in.batchEnded(time.Now(), timeout)
				return nil
			}
			t := time.Now()
			b.paused += t.Sub(now)
			now = t
		}
		b.begun = now
		in.stderr.reset() // a fault's output is the record's
	}
	r := &b.recs[b.next]
	st := in.newRec(r.Tag)
	st.state = r.State
	st.encode(r.Rec)
	st.deadline = b.begun.Add(timeout)
	in.fuel.deadline, in.fuel.during, in.fuel.last = st.deadline, "record", time.Time{}
	in.cur = st
	b.cur = b.next
	b.next++
	return st
}

// now is the time within the call: its start plus the monotonic time since.
// It reads one clock where time.Now reads two (the wall clock and the
// monotonic one), once a record; the wall time it gives (for spans) moves
// with the monotonic clock from the call's start.
func (b *batchState) now() time.Time { return b.start.Add(time.Since(b.start)) }

// batchEnded gives the guest's work after the batch's last record one
// deadline of its own, set the first time record_next answers 0 and never
// renewed: a guest that keeps calling record_next is interrupted at it, as
// one that loops (ABI.md §10, "Per-record metering").
func (in *Instance) batchEnded(now time.Time, timeout time.Duration) {
	if b := &in.batch; !b.ended {
		b.ended = true
		in.fuel.deadline, in.fuel.during, in.fuel.last = now.Add(timeout), afterLastRecord, time.Time{}
		return
	}
	in.pastEnd(now)
}

// afterLastRecord and afterLastCompletion name the work a call does after
// its last record or completion, in a deadline fault's message.
const (
	afterLastRecord     = "the batch call after its last record"
	afterLastCompletion = "the completions call after its last completion"
)

// pastEnd faults the call if the guest calls record_next or
// completion_next again once its last deadline has passed; before it, the
// call goes on towards that deadline.
func (in *Instance) pastEnd(now time.Time) {
	if f := &in.fuel; !now.Before(f.deadline) {
		in.fault = &Fault{Kind: FaultDeadline, Msg: fmt.Sprintf("%s exceeded its deadline (limits.record_timeout, %s, once, from the end of its last one); the guest was interrupted", f.during, in.m.limits.RecordTimeout)}
		panic(in.fault)
	}
}

// endBatchRecord decides the batch's record in progress with the status
// and output list the guest handed to record_next. A status the record
// cannot have faults the call (a *Fault panic), failing the record. now is
// the time record_next was called.
func (in *Instance) endBatchRecord(st *recState, status abi.Status, list []byte, now time.Time) {
	switch status {
	case abi.StatusOK, abi.StatusRetry, abi.StatusFail:
	case abi.StatusPending:
		if len(st.ops) == 0 {
			in.fault = &Fault{Kind: FaultProtocol, Msg: "guest ended a record pending, but the record has no asynchronous operation outstanding: it could never complete"}
			panic(in.fault)
		}
	default:
		in.fault = &Fault{Kind: FaultProtocol, Msg: fmt.Sprintf("guest ended a record with invalid status %d (%s.%s)", int32(status), abi.BatchModule, abi.ImportRecordNext)}
		panic(in.fault)
	}
	if takesOutputs(status) && len(list) > 0 {
		if e, i := in.takeOutputList(st, list, status == abi.StatusOK); e != 0 {
			st.errMsg = fmt.Sprintf("output %d handed to %s refused: %s", i, abi.ImportRecordNext, e.Error())
			status = abi.StatusFail // what the same outputs would meet again
			if e == abi.ErrnoLimit {
				status = abi.StatusRetry // they may fit later (host.max_held_output_bytes)
			}
		}
	}
	tag := st.tag
	res := in.settle(st, Result{Status: status}, true)
	in.cur = nil
	in.batchDecided(tag, res, now, nil)
}

// takesOutputs reports whether a record ended with status keeps the output
// list handed with it (ABI.md §10): ok and pending do; the list handed with
// retry or fail is neither read nor checked.
func takesOutputs(status abi.Status) bool {
	return status == abi.StatusOK || status == abi.StatusPending
}

// takeOutputList holds the outputs of an output list (abi.AppendOutputList)
// for st, as emit would one by one, or returns why not and the index of the
// output refused. The list is copied once; the outputs alias the copy.
// pooled: st ended ok, and its outputs are kept in the run's slabs
// (runOutputs).
func (in *Instance) takeOutputList(st *recState, list []byte, pooled bool) (abi.Errno, int) {
	lim := in.m.limits
	if len(list) > lim.MaxOutputBytes+4*lim.MaxOutputs {
		return abi.ErrnoLimit, 0
	}
	var raw []byte
	if b := &in.batch; pooled {
		left := len(b.recs) - b.cur
		raw = b.run.copyList(list, left)
		if len(st.outputs) == 0 {
			if n := countOutputs(raw, lim.MaxOutputs); n > 0 {
				if room, ok := st.state.(OutputRoom); ok {
					st.outputs = room.OutputRoom(n)
				}
				if st.outputs == nil {
					st.outputs = b.run.carve(n, left)
				}
			}
		}
	} else {
		raw = append([]byte(nil), list...)
	}
	for i := 0; len(raw) > 0; i++ {
		if len(raw) < 4 {
			return abi.ErrnoBadEncoding, i
		}
		n := binary.LittleEndian.Uint32(raw)
		if uint64(n) > uint64(len(raw)-4) {
			return abi.ErrnoBadEncoding, i
		}
		if e := in.takeOutput(st, raw[4:4+n:4+n], false); e != 0 {
			return e, i
		}
		raw = raw[4+n:]
	}
	return 0, 0
}

// countOutputs counts the outputs of a well-formed output list, up to
// limit+1; 0 when it is not well formed (takeOutputList then says why).
func countOutputs(list []byte, limit int) int {
	n := 0
	for len(list) > 0 && n <= limit {
		if len(list) < 4 {
			return 0
		}
		l := binary.LittleEndian.Uint32(list)
		if uint64(l) > uint64(len(list)-4) {
			return 0
		}
		list = list[4+l:]
		n++
	}
	return n
}

func (m *Module) instantiateBatchModule(ctx context.Context) error {
	s, c := batchFuncs[abi.ImportRecordNext], batchFuncs[abi.ImportCompletionNext]
	_, err := m.rt.NewHostModuleBuilder(abi.BatchModule).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostRecordNext), s.params, s.results).Export(abi.ImportRecordNext).
		NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(hostCompletionNext), c.params, c.results).Export(abi.ImportCompletionNext).
		Instantiate(ctx)
	if err != nil {
		return fmt.Errorf("host: instantiate %s: %w", abi.BatchModule, err)
	}
	return nil
}

// record_next(status, out, out_len, buf, buf_len) -> len | 0 | -errno
func hostRecordNext(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	status, out, outLen, buf, bufLen := int32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3]), uint32(stack[4])
	if in == nil || !in.batch.active {
		stack[0] = errno(abi.ErrnoBadHandle)
		return
	}
	now := in.batch.now() // one record's end, the next one's start
	if st := in.cur; st != nil {
		var list []byte
		if outLen > 0 && takesOutputs(abi.Status(status)) {
			list = in.readIn(mod, abi.BatchModule, abi.ImportRecordNext, out, outLen)
		}
		in.endBatchRecord(st, abi.Status(status), list, now)
	}
	st := in.beginBatchRecord(now)
	if st == nil {
		stack[0] = 0
		return
	}
	if uint64(bufLen) >= uint64(len(st.enc)) && !mod.Memory().Write(buf, st.enc) {
		in.badPointerIn(mod, abi.BatchModule, abi.ImportRecordNext, buf, uint32(len(st.enc)))
	}
	stack[0] = uint64(len(st.enc))
}
