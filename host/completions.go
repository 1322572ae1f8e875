package host

import (
	"context"
	"fmt"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmstream/wasmstream/abi"
)

// The completions entry (ABI.md §10.1): one call into the guest delivers
// several queued completions. The guest pulls them one at a time with
// completion_next, which ends the completion in progress (its record's
// status and, in one buffer, its outputs) and begins the next. Each
// completion is bounded by its own record's deadline and decided on its
// own, so the meter, the outputs, the failure message and a fault stay its
// record's, as with one wasmstream_on_complete call each; a fault ends the
// call and fails the record of the completion in progress only
// (RATIONALE.md, "Completions that share a call"). Completions of records
// that already ended (canceled) still go one per wasmstream_on_complete
// call, after the call: they decide nothing, and are rare.

// compState is the completions call in progress on an instance.
type compState struct {
	active   bool // a completions call is in progress: completion_next answers
	ctx      context.Context
	q        []*opState    // the completions the call may deliver, in queue order
	next     int           // the index in q completion_next looks at next
	taken    int           // completions begun
	op       *opState      // the completion in progress (in.curOp); nil: none
	begun    time.Time     // when it began
	paused   time.Duration // waits for a guest-call slot between completions
	canceled []*opState    // met on the way: delivered one per call after this one
	ended    bool          // completion_next answered 0: the call's last deadline is set
	out      []Done        // the records decided
}

// pollCompletions delivers q, the completions Poll took from the queue, in
// one call of the completions entry, appending the records decided to out.
// It returns how many of q it dealt with: the rest (none when the guest took
// them all; the ones after a fault die with the instance) go one per call
// through Poll's loop. It delivers nothing, and returns 0, when fewer than
// two completions would reach a live record: one costs less through
// wasmstream_on_complete.
func (in *Instance) pollCompletions(ctx context.Context, q []*opState, out []Done) ([]Done, int) {
	live, maxLen, first := liveCompletions(q, time.Now())
	if live < 2 {
		return out, 0
	}
	c := &in.comps
	*c = compState{ctx: ctx, q: q, out: out}
	defer func() { *c = compState{} }()
	in.fault = nil
	in.stderr.reset()
	start, aerr := in.takeSlot(ctx)
	in.calls.start, in.calls.end = start, start
	if aerr != nil {
		return c.out, 0 // Poll's calls fail as abandoned, one by one
	}
	// The guest's work before its first completion_next is the first
	// completion's.
	c.begun = start
	in.fuel.startCall(ctx, first, "record")
	in.comps.active = true
	s := in.stack[:2]
	s[0], s[1] = uint64(live), uint64(maxLen)
	err := in.entry.completions.CallWithStack(in.ctx, s)
	end := time.Now()
	in.calls.end = end
	in.calls.run += end.Sub(start) - c.paused
	in.fuel.endCall()
	in.comps.active = false
	st := in.cur
	in.cur, in.curOp = nil, nil
	if !in.slot.keep || err != nil {
		in.Yield()
	}
	in.completionsReturned(ctx, st, err, abi.Status(int32(s[0])), end)
	for _, op := range c.canceled {
		if in.dead {
			break
		}
		in.deliverCanceled(ctx, op)
	}
	return c.out, c.next
}

// liveCompletions counts the completions of q that would reach a live
// record at now, and returns the longest one's size in guest memory and
// the deadline of the first one's record.
func liveCompletions(q []*opState, now time.Time) (live, maxLen int, first time.Time) {
	for _, op := range q {
		if st := op.rec; !op.orphan && !st.ended && now.Before(st.deadline) {
			if live == 0 {
				first = st.deadline
			}
			live++
			maxLen = max(maxLen, abi.CompletionHeaderSize+len(op.result))
		}
	}
	return live, maxLen, first
}

// completionsReturned decides what the completions call that ended at end
// leaves undecided: the completion in progress, st (nil for none), gets
// the guest's fault err or, without one, its status; a call that faulted
// or returned before its first completion fails the first completion's
// record. A fault discards the instance.
func (in *Instance) completionsReturned(ctx context.Context, st *recState, err error, status abi.Status, end time.Time) {
	c := &in.comps
	switch {
	case err != nil:
		flt := in.classify(err, ctx.Err())
		if st == nil && c.taken == 0 {
			st = in.beginCompletion(end) // before its first completion_next: the first completion's
			in.cur, in.curOp = nil, nil
		}
		if st == nil {
			in.Close(context.Background()) // its waiting records are lost
			in.m.log.Warn("guest faulted after the last completion of a completions call; instance discarded", "instance", in.id, "err", flt)
			return
		}
		delete(in.waiting.recs, st.handle) // st gets this fault, not "lost"
		in.Close(context.Background())
		in.completionDecided(st, Result{Status: abi.StatusRetry, Err: flt}, end, err)
	case st != nil:
		// The guest returned during a completion: what it returned is the
		// record's status, as from wasmstream_on_complete.
		in.completionDecided(st, Result{Status: status}, end, nil)
	case c.taken == 0:
		// A guest that returns without taking a completion would never
		// make progress: the first completion's record fails.
		if st = in.beginCompletion(end); st != nil {
			in.cur, in.curOp = nil, nil
			delete(in.waiting.recs, st.handle)
			in.Close(context.Background())
			in.completionDecided(st, Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultProtocol,
				Msg: fmt.Sprintf("guest returned from %s without taking a completion (%s.%s)", abi.ExportOnCompletions, abi.BatchModule, abi.ImportCompletionNext)}}, end, nil)
		}
	}
}

// beginCompletion makes the call's next completion of a live record the
// one in progress, bounded by its record's deadline; nil when there is
// none left. On the way it does for each completion what Poll's loop does
// before a call: a canceled one is kept for a call of its own, the others
// stop counting as outstanding and are observed, and one whose record's
// deadline passed is skipped (the next Poll fails the record). now is the
// time completion_next was called.
func (in *Instance) beginCompletion(now time.Time) *recState {
	c := &in.comps
	timeout := in.m.limits.RecordTimeout
	if c.ended {
		in.completionsEnded(now, timeout)
		return nil
	}
	if c.taken > 0 && in.slot.leased && now.Sub(in.slot.turn) >= slotQuantum {
		// A turn with the slot is over between two completions as between
		// two calls (takeSlot): queue behind the calls that waited.
		if _, err := in.takeSlot(c.ctx); err != nil {
			in.completionsEnded(time.Now(), timeout)
			return nil
		}
		t := time.Now()
		c.paused += t.Sub(now)
		now = t
	}
	for c.next < len(c.q) {
		op := c.q[c.next]
		c.next++
		st := op.rec
		switch in.takeCompletion(op) {
		case completionCanceled:
			c.canceled = append(c.canceled, op)
			continue
		case completionExpired:
			continue // the next Poll fails it
		}
		if c.taken > 0 {
			c.begun = now
			in.stderr.reset() // a fault's output is the record's
		}
		c.taken++
		in.fuel.deadline, in.fuel.during, in.fuel.last = st.deadline, "record", time.Time{}
		in.cur, in.curOp, c.op = st, op, op
		return st
	}
	in.completionsEnded(now, timeout)
	return nil
}

// completionsEnded gives the guest's work after the call's last completion
// one deadline of its own, set once and never renewed (batchEnded).
func (in *Instance) completionsEnded(now time.Time, timeout time.Duration) {
	if c := &in.comps; !c.ended {
		c.ended = true
		in.fuel.deadline, in.fuel.during, in.fuel.last = now.Add(timeout), afterLastCompletion, time.Time{}
		return
	}
	in.pastEnd(now)
}

// endCompletion decides the record of the completion in progress with the
// status and output list the guest handed to completion_next, as Poll
// decides it from what wasmstream_on_complete returns. A status the record
// cannot have faults the call (a *Fault panic), failing the record. now is
// the time completion_next was called.
func (in *Instance) endCompletion(st *recState, status abi.Status, list []byte, now time.Time) {
	switch status {
	case abi.StatusOK, abi.StatusRetry, abi.StatusFail:
	case abi.StatusPending:
		if len(st.ops) == 0 {
			in.fault = &Fault{Kind: FaultProtocol, Msg: "guest ended a completion pending, but the record has no asynchronous operation outstanding: it could never complete"}
			panic(in.fault)
		}
	default:
		in.fault = &Fault{Kind: FaultProtocol, Msg: fmt.Sprintf("guest ended a completion with invalid status %d (%s.%s)", int32(status), abi.BatchModule, abi.ImportCompletionNext)}
		panic(in.fault)
	}
	if takesOutputs(status) && len(list) > 0 {
		if e, i := in.takeOutputList(st, list, false); e != 0 {
			st.errMsg = fmt.Sprintf("output %d handed to %s refused: %s", i, abi.ImportCompletionNext, e.Error())
			status = abi.StatusFail // what the same outputs would meet again
			if e == abi.ErrnoLimit {
				status = abi.StatusRetry // they may fit later (host.max_held_output_bytes)
			}
		}
	}
	in.cur, in.curOp = nil, nil
	in.completionDecided(st, Result{Status: status}, now, nil)
}

// completionDecided ends the completion in progress, whose record is st,
// with res: the record keeps waiting if it went pending on further
// operations, else it is settled and goes to the call's decided records.
func (in *Instance) completionDecided(st *recState, res Result, end time.Time, err error) {
	c := &in.comps
	if c.op != nil {
		c.op.result = nil
		c.op = nil
	}
	if obs := in.m.cfg.Observer; obs != nil && st.tag != nil {
		obs.GuestCall(st.tag, abi.ExportOnCompletions, c.begun, end.Sub(c.begun), err)
	}
	if res.Err == nil && res.Status == abi.StatusPending && len(st.ops) > 0 {
		return // waits on the operations it started
	}
	tag := st.tag
	res = in.settle(st, res, false)
	c.out = append(c.out, Done{Tag: tag, Result: res})
}

// completion_next(status, out, out_len, buf, buf_len) -> len | 0 | -errno
func hostCompletionNext(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	status, out, outLen, buf, bufLen := int32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3]), uint32(stack[4])
	if in == nil || !in.comps.active {
		stack[0] = errno(abi.ErrnoBadHandle)
		return
	}
	now := time.Now() // one completion's end, the next one's start
	if st := in.cur; st != nil {
		var list []byte
		if outLen > 0 && takesOutputs(abi.Status(status)) {
			list = in.readIn(mod, abi.BatchModule, abi.ImportCompletionNext, out, outLen)
		}
		in.endCompletion(st, abi.Status(status), list, now)
	}
	st := in.beginCompletion(now)
	if st == nil {
		stack[0] = 0
		return
	}
	if bufLen < abi.CompletionHeaderSize {
		in.fault = &Fault{Kind: FaultProtocol, Msg: fmt.Sprintf("%s.%s given a buffer of %d bytes: a completion's header needs %d", abi.BatchModule, abi.ImportCompletionNext, bufLen, abi.CompletionHeaderSize)}
		panic(in.fault)
	}
	res := in.curOp.result
	total := abi.CompletionHeaderSize + len(res)
	mem := mod.Memory()
	if !mem.WriteUint32Le(buf, st.handle) || !mem.WriteUint32Le(buf+4, in.curOp.id) || !mem.WriteUint32Le(buf+8, uint32(len(res))) {
		in.badPointerIn(mod, abi.BatchModule, abi.ImportCompletionNext, buf, abi.CompletionHeaderSize)
	}
	if uint64(bufLen) >= uint64(total) && len(res) > 0 && !mem.Write(buf+abi.CompletionHeaderSize, res) {
		in.badPointerIn(mod, abi.BatchModule, abi.ImportCompletionNext, buf, uint32(total))
	}
	stack[0] = uint64(total)
}
