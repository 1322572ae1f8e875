package host

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/rpabi"
)

// A Redpanda transform's instance (docs/REDPANDA-TRANSFORMS.md). The
// transform is a WASI command: its _start registers a callback and loops
// forever on read_batch_header, which blocks until the host has a batch.
// So its _start runs on a goroutine of its own, owned by the instance
// (started by NewInstance, ended by Close, which waits for it), and the
// instance's owner and that goroutine hand the instance back and forth:
//
//   - the guest parks in read_batch_header: it sends on parked and waits
//     on batches (or stop);
//   - ProcessBatch sends a batch on batches and waits for parked (the guest
//     asked for the next batch: this one is done) or exited (_start ended:
//     a trap, a panic, an exit, a deadline).
//
// Between a send and its receipt only the receiving side touches the
// instance, so each channel operation orders every access to the
// instance's state (its fuel, fault, records, outputs, stderr) and no lock
// is needed. Nothing else blocks the guest goroutine: the other host
// functions return at once, and the meter interrupts a guest that runs
// past its record's deadline (fuel.go), so ProcessBatch's wait is bounded
// by the records' deadlines.
//
// Within a batch, read_next_record ends the record in progress (ok, with
// the writes made since it was read: its outputs) and begins the next one
// with its own deadline (limits.record_timeout), as record_next does for a
// wasmstream module's batch entry (batch.go); read_batch_header ends the
// last one. A fault fails the record in progress, the records before it
// keep their outcomes, and the instance is discarded.

// rpInstance is a Redpanda transform's side of an Instance.
type rpInstance struct {
	batches chan *rpBatch // owner → guest: the next batch
	parked  chan struct{} // guest → owner: it asked for the next batch
	exited  chan struct{} // closed when _start returned; err says how
	stop    chan struct{} // closed by Close: a parked guest ends
	once    sync.Once     // closes stop
	err     error
	b       *rpBatch // the guest goroutine's batch, between a receipt and a park

	// The deterministic WASI clocks (Redpanda's): the wall clock is the
	// current record's timestamp (ms), the monotonic one moves by res at
	// each read. Read on the guest goroutine only.
	wall atomic.Int64
	mono atomic.Int64
	res  int64

	// The schema-registry calls (redpanda_sr.go); guest goroutine only.
	sr    srAnswer // the last lookup's answer
	srRec uint32   // the handle of the record srOps counts for
	srOps int      // operations its calls ran (async.max_per_record bounds them)
}

// rpBatch is one batch handed to the guest.
type rpBatch struct {
	recs  []BatchRecord
	out   []Outcome
	next  int       // records read: read_next_record returns recs[next]
	cur   int       // the record in progress; -1: none yet
	begun time.Time // when the record in progress began
	enc   []byte    // the payload of recs[encFor]
	encOf int
	short bool       // the guest asked for the next batch before reading them all
	run   runOutputs // where its records' outputs are kept (batch.go)
}

// errRPStopped ends a parked guest when its instance closes.
var errRPStopped = errors.New("the instance was closed while the transform waited for a batch")

// newRedpandaInstance instantiates a Redpanda transform and runs its
// _start up to its first read_batch_header, within InstantiateTimeout.
func (m *Module) newRedpandaInstance(ctx context.Context) (*Instance, error) {
	in := &Instance{m: m, id: m.nextID.Add(1), q: completionQueue{ready: make(chan struct{}, 1)}}
	in.stderr.max = 2048
	rp := &rpInstance{batches: make(chan *rpBatch, 1), parked: make(chan struct{}, 1),
		exited: make(chan struct{}), stop: make(chan struct{}), res: max(m.clock.res, 1)}
	in.entry.rp = rp
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(). // _start runs on the instance's goroutine, below
		WithStdout(&in.stderr).
		WithStderr(&in.stderr).
		WithWalltime(rp.walltime, m.clock.resolution()).
		WithNanotime(rp.nanotime, m.clock.resolution()).
		WithRandSource(constantReader(9)) // Redpanda's random_get: a transform is deterministic
	for _, kv := range m.rpEnv {
		mc = mc.WithEnv(kv[0], kv[1])
	}
	in.ctx = context.WithValue(context.Background(), instanceKey{}, in)
	in.fuel.startCall(ctx, time.Now().Add(max(InstantiateTimeout, m.limits.RecordTimeout)), "initialisation")
	defer in.fuel.endCall()
	// Its memory grows by doubling (linmem), not by the pages asked, from
	// room for twice what its module's load check grew to.
	mod, err := m.rt.InstantiateModule(experimental.WithMemoryAllocator(in.ctx, m.mems.Allocator()), m.compiled, mc)
	if err != nil {
		if in.fault != nil {
			err = in.fault
		}
		return nil, fmt.Errorf("%w: instantiate: %v%s", ErrIncompatible, err, in.stderr.suffix())
	}
	in.mod = mod
	in.stack = make([]uint64, 3)
	in.base, in.baseCancel = context.WithCancel(context.Background())
	go rp.run(in.ctx, mod.ExportedFunction(rpabi.ExportStart))
	select {
	case <-rp.parked:
		in.fault = nil
		return in, nil
	case <-rp.exited:
		flt := in.rpExitFault(ctx)
		in.dead = true
		mod.Close(ctx)
		return nil, fmt.Errorf("%w: %s ended before asking for a batch (%s.%s): %v", ErrIncompatible, rpabi.ExportStart, rpabi.Module, rpabi.ReadBatchHeader, flt)
	}
}

// run is the instance's goroutine: the transform's _start.
func (rp *rpInstance) run(ctx context.Context, start api.Function) {
	defer close(rp.exited)
	_, rp.err = start.Call(ctx)
}

// rpExitFault is the fault that ended _start, read once exited is closed.
func (in *Instance) rpExitFault(ctx context.Context) *Fault {
	if in.entry.rp.err == nil {
		return &Fault{Kind: FaultExit, Msg: fmt.Sprintf("the transform's %s returned: a transform must loop on %s.%s", rpabi.ExportStart, rpabi.Module, rpabi.ReadBatchHeader), Stderr: in.stderr.String()}
	}
	return in.classify(in.entry.rp.err, ctx.Err())
}

// rpStop ends the instance's goroutine and waits for it: the owner calls it
// only while the guest is parked (or already ended), so it ends at once.
func (in *Instance) rpStop() {
	in.entry.rp.once.Do(func() { close(in.entry.rp.stop) })
	<-in.entry.rp.exited
}

func (rp *rpInstance) walltime() (sec int64, nsec int32) {
	ms := rp.wall.Load()
	return ms / 1e3, int32(ms%1e3) * 1e6
}

func (rp *rpInstance) nanotime() int64 { return rp.mono.Add(rp.res) }

// constantReader fills every read with one byte.
type constantReader byte

func (c constantReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(c)
	}
	return len(p), nil
}

// rpProcessBatch is ProcessBatch for a Redpanda transform: the batch is
// handed to the parked guest whole (the header tells it the count, so the
// gate, GateBatch, is asked for every record before), and the call ends
// when the guest asks for the next batch or its _start ends.
func (in *Instance) rpProcessBatch(ctx context.Context, recs []BatchRecord, out []Outcome) (ran int) {
	n := min(len(recs), len(out), MaxBatch)
	if n == 0 || in.dead || ctx.Err() != nil {
		return 0
	}
	if take := in.batchOpts.take; take != nil {
		for i := 1; i < n; i++ {
			if !take(i) {
				n = i
				break
			}
		}
	}
	in.nextState = nil // a transform has no state
	in.fault = nil
	in.stderr.reset()
	start, err := in.takeSlot(ctx)
	in.calls.start, in.calls.end = start, start
	if err != nil {
		return 0
	}
	timeout := in.m.limits.RecordTimeout
	b := &rpBatch{recs: recs[:n], out: out[:n], cur: -1, begun: start, encOf: -1}
	in.fuel.startCall(ctx, start.Add(timeout), "record")
	in.entry.rp.batches <- b
	var exited bool
	select {
	case <-in.entry.rp.parked:
	case <-in.entry.rp.exited:
		exited = true
	}
	end := time.Now()
	in.calls.end = end
	in.calls.run += end.Sub(start)
	in.fuel.endCall()
	if !in.slot.keep || exited || b.short {
		in.Yield()
	}
	ran = b.next
	var flt *Fault
	switch {
	case exited:
		flt = in.rpExitFault(ctx)
		if b.cur < 0 { // before its first record: the first record's turn
			b.cur, ran = 0, 1
		}
		st := in.cur
		in.cur = nil
		if st != nil {
			in.finishRec(st) // its writes die with it
		}
		b.out[b.cur] = Outcome{Result: Result{Status: abi.StatusRetry, Err: flt}, Start: b.begun, End: end}
		in.Close(context.Background())
	case b.short:
		flt = &Fault{Kind: FaultProtocol, Msg: fmt.Sprintf("the transform asked for the next batch (%s) after reading %d of the batch's %d records (%s)", rpabi.ReadBatchHeader, b.next, n, rpabi.ReadNextRecord)}
		b.out[ran] = Outcome{Result: Result{Status: abi.StatusRetry, Err: flt}, Start: end, End: end}
		ran++
		in.Close(context.Background())
	}
	if obs := in.m.cfg.Observer; obs != nil {
		for i := range b.out[:ran] {
			o := &b.out[i]
			var err error
			if o.Err != nil {
				err = o.Err
			}
			if t := b.recs[i].Tag; t != nil {
				obs.GuestCall(t, rpabi.Module, o.Start, o.End.Sub(o.Start), err)
			}
		}
	}
	return ran
}

// rpProcess is Process for a Redpanda transform: a batch of one.
func (in *Instance) rpProcess(ctx context.Context, rec *abi.Record, tag any) Result {
	one := [1]BatchRecord{{Rec: rec, Tag: tag}}
	var out [1]Outcome
	if in.rpProcessBatch(ctx, one[:], out[:]) == 0 {
		if in.dead {
			return Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultProtocol, Msg: "instance is closed"}}
		}
		return Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultCanceled, Msg: "call abandoned by the host before it started: " + context.Cause(ctx).Error()}}
	}
	return out[0].Result
}

// rpDecide ends the record in progress ok, with its writes as its outputs.
// now is when it ended. On the guest goroutine.
func (in *Instance) rpDecide(b *rpBatch, now time.Time) {
	st := in.cur
	in.cur = nil
	res := in.settle(st, Result{Status: abi.StatusOK}, true)
	b.out[b.cur] = Outcome{Result: res, Start: b.begun, End: now}
}

// read_batch_header(base_offset *i64, record_count *i32,
// partition_leader_epoch *i32, attributes *i16, last_offset_delta *i32,
// base_timestamp *i64, max_timestamp *i64, producer_id *i64,
// producer_epoch *i16, base_sequence *i32) -> largest payload size
//
// Calling it ends the batch the guest had. It blocks until the host hands
// the next one (ProcessBatch) or closes the instance.
func hostRPReadBatchHeader(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	rp := in.entry.rp
	if b := rp.b; b != nil {
		if in.cur != nil {
			in.rpDecide(b, time.Now())
		}
		b.short = b.next < len(b.recs)
		rp.b = nil
	}
	rp.parked <- struct{}{} // the owner's now, until it hands a batch
	var b *rpBatch
	select {
	case b = <-rp.batches:
	case <-rp.stop:
		panic(errRPStopped)
	}
	rp.b = b
	first, last := b.recs[0].Rec, b.recs[len(b.recs)-1].Rec
	maxTS, maxLen := first.Timestamp, 0
	for i := range b.recs {
		r := b.recs[i].Rec
		maxTS = max(maxTS, r.Timestamp)
		maxLen = max(maxLen, rpabi.PayloadSize(r))
	}
	rp.wall.Store(first.Timestamp)
	mem := mod.Memory()
	ok := mem.WriteUint64Le(uint32(stack[0]), uint64(first.Offset)) &&
		mem.WriteUint32Le(uint32(stack[1]), uint32(len(b.recs))) &&
		mem.WriteUint32Le(uint32(stack[2]), ^uint32(0)) && // partition leader epoch: not known to a consumer
		mem.WriteUint16Le(uint32(stack[3]), 0) && // attributes: the records are handed uncompressed
		mem.WriteUint32Le(uint32(stack[4]), uint32(last.Offset-first.Offset)) &&
		mem.WriteUint64Le(uint32(stack[5]), uint64(first.Timestamp)) &&
		mem.WriteUint64Le(uint32(stack[6]), uint64(maxTS)) &&
		mem.WriteUint64Le(uint32(stack[7]), ^uint64(0)) && // producer id, epoch, sequence: -1, none
		mem.WriteUint16Le(uint32(stack[8]), ^uint16(0)) &&
		mem.WriteUint32Le(uint32(stack[9]), ^uint32(0))
	if !ok {
		in.rpBadPointer(mod, rpabi.ReadBatchHeader, stack[:10])
	}
	stack[0] = uint64(uint32(int32(maxLen)))
}

// read_next_record(attributes *u8, timestamp *i64, offset *i64, buf, len)
// -> payload length | -1 (no record left) | -2 (buf too small: the record
// stays next)
func hostRPReadNextRecord(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	b := in.entry.rp.b
	if b == nil || b.next >= len(b.recs) {
		stack[0] = rpCode(rpabi.NoActive)
		return
	}
	r := b.recs[b.next].Rec
	if b.encOf != b.next {
		b.enc, b.encOf = rpabi.AppendPayload(b.enc[:0], r), b.next
	}
	buf, bufLen := uint32(stack[3]), uint32(stack[4])
	if uint64(bufLen) < uint64(len(b.enc)) {
		stack[0] = rpCode(rpabi.BufferTooSmall)
		return
	}
	now := time.Now()
	if in.cur != nil {
		in.rpDecide(b, now)
	}
	st := in.newRec(b.recs[b.next].Tag)
	st.deadline = now.Add(in.m.limits.RecordTimeout)
	in.fuel.deadline, in.fuel.during, in.fuel.last = st.deadline, "record", time.Time{}
	in.cur, b.cur, b.begun = st, b.next, now
	b.next++
	in.entry.rp.wall.Store(r.Timestamp)
	mem := mod.Memory()
	if !(mem.WriteByte(uint32(stack[0]), 0) &&
		mem.WriteUint64Le(uint32(stack[1]), uint64(r.Timestamp)) &&
		mem.WriteUint64Le(uint32(stack[2]), uint64(r.Offset)) &&
		mem.Write(buf, b.enc)) {
		in.rpBadPointer(mod, rpabi.ReadNextRecord, stack[:5])
	}
	stack[0] = uint64(len(b.enc))
}

// write_record(buf, len) -> len | -2 (bad payload) | -3 (refused)
func hostRPWriteRecord(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	stack[0] = rpCode(in.rpWrite(mod, rpabi.WriteRecord, uint32(stack[0]), uint32(stack[1]), nil))
}

// write_record_with_options(buf, len, opts, opts_len) -> len | -2 | -3
func hostRPWriteRecordWithOptions(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	opts := in.readIn(mod, rpabi.Module, rpabi.WriteRecordWithOptions, uint32(stack[2]), uint32(stack[3]))
	if opts == nil {
		opts = []byte{} // an empty list: the default output
	}
	stack[0] = rpCode(in.rpWrite(mod, rpabi.WriteRecordWithOptions, uint32(stack[0]), uint32(stack[1]), opts))
}

// rpWrite holds one write of the record in progress as one of its outputs.
// A topic the options name must be one of the pipeline's (its output or
// allowed_outputs), else the write fails with -3, as Redpanda fails a
// write to a topic that is not one of the transform's outputs.
func (in *Instance) rpWrite(mod api.Module, fn string, ptr, n uint32, opts []byte) int32 {
	data := in.readIn(mod, rpabi.Module, fn, ptr, n)
	st := in.cur
	if st == nil {
		return rpabi.WriteFailed // no record in progress: nothing to tie it to
	}
	topic := ""
	if opts != nil {
		t, err := rpabi.DecodeOptions(opts)
		if err != nil {
			return rpabi.InvalidPayload
		}
		topic = t
	}
	lim := in.m.limits
	if len(st.outputs) >= lim.MaxOutputs || st.outBytes+len(data) > lim.MaxOutputBytes {
		return rpabi.WriteFailed // refused before it is copied: a guest cannot make the host allocate past the bounds
	}
	// The output must not alias guest memory: copied into the batch's
	// slab, as a wasmstream module's batch outputs are (runOutputs).
	b := in.entry.rp.b
	left := len(b.recs) - b.cur
	raw := b.run.copyList(data, left)
	o, err := rpabi.DecodePayload(raw)
	if err != nil {
		return rpabi.InvalidPayload
	}
	if in.m.cfg.Redpanda.PartitionSameAsInput {
		o.Partition = b.recs[b.cur].Rec.Partition
	}
	if topic != "" {
		if !in.m.allowed[topic] {
			return rpabi.WriteFailed
		}
		if topic != in.m.cfg.AllowedTopics[0] {
			o.Topic = topic // output 0 stays "": the pipeline's output
		}
	}
	cost := outputCost(len(raw), len(o.Headers))
	if st.outBytes+cost > lim.MaxOutputBytes || !in.holdOutput(st, cost) {
		return rpabi.WriteFailed
	}
	if st.outputs == nil {
		st.outputs = b.run.carve(1, left) // most records write one output
	}
	st.outputs = append(st.outputs, o)
	st.outBytes += cost
	return int32(n)
}

// read_batch_metadata(key, buf, buf_len) -> 0: no key has a value here (a
// Kafka consumer does not see the producer's principal or client).
func hostRPReadBatchMetadata(_ context.Context, _ api.Module, stack []uint64) {
	stack[0] = rpCode(rpabi.MetadataAbsent)
}

// rpCode is an import's i32 result on the stack.
func rpCode(v int32) uint64 { return uint64(uint32(v)) }

// rpBadPointer faults the call: fn was handed a pointer outside the guest's
// memory.
func (in *Instance) rpBadPointer(mod api.Module, fn string, args []uint64) {
	in.fault = &Fault{Kind: FaultBadPointer, Msg: fmt.Sprintf("%s.%s%v: a pointer is outside guest memory of %d bytes", rpabi.Module, fn, args, mod.Memory().Size())}
	panic(in.fault)
}
