package host

import (
	"context"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmstream/wasmstream/abi"
)

// State is the state a record's calls read and write through the state_*
// host functions (ABI.md §4.1). The scheduler gives one to each attempt of
// a record (ProcessState): its writes are the record's own until the
// record's outcome is decided. Its methods are called only from the
// instance's goroutine, during a call into the guest for that record; they
// must not block for long (they run under the record's deadline). The
// asynchronous state operations (ABI.md §7.3) read through Reader instead,
// on another goroutine.
type State interface {
	// Get returns key's value, or ErrnoNotFound. The value is valid until
	// the next call on the State.
	Get(key []byte) ([]byte, abi.Errno)
	// Put sets key to value; both are the guest's memory, to be copied.
	Put(key, value []byte) abi.Errno
	// Delete removes key.
	Delete(key []byte) abi.Errno
	// Written returns the length of the value of the record's own write of
	// key (0 for a delete) and whether the record wrote key: what a new
	// write of key replaces in the record's bounds (countWrite).
	Written(key []byte) (valueLen int, ok bool)
	// Scan calls fn for the keys with prefix that sort after after (all
	// of them when after is empty), in key order, until fn returns false.
	Scan(prefix, after []byte, fn func(key, value []byte) bool) abi.Errno
	// Reader returns a read-only view for one asynchronous state operation
	// of the record: the record's own writes as they are now (later writes
	// of the record are not in it) over the state the record shares with
	// others (the task's overlay and store), which is read when the
	// operation runs. Reader is called on the instance's goroutine, during
	// the guest's async_start; the view's methods from the operation's
	// goroutine, possibly after the record ended.
	Reader() StateReader
}

// State2 is the part of a State that serves two-part keys and stream time
// (ABI.md §4.2): a State that does not implement it answers their host
// functions with ErrnoNoState. Its methods are called as State's are.
type State2 interface {
	// Get2, Put2, Delete2 and Written2 are State's Get, Put, Delete and
	// Written of the two-part key (key, sub): a namespace apart from the
	// one-part keys, where only key is checked against the partition.
	Get2(key, sub []byte) ([]byte, abi.Errno)
	Put2(key, sub, value []byte) abi.Errno
	Delete2(key, sub []byte) abi.Errno
	Written2(key, sub []byte) (valueLen int, ok bool)
	// Scan2 calls fn for the subs of key that start with prefix and sort
	// after after (all of them when after is empty), in sub order, until
	// fn returns false.
	Scan2(key, prefix, after []byte, fn func(sub, value []byte) bool) abi.Errno
	// StreamTime is the partition's stream time: the largest timestamp of
	// its decided records (not the record in progress), -1 before any.
	StreamTime() (int64, abi.Errno)
}

// OutputRoom is the part of a State that can hold its record's outputs:
// the host puts a record's n outputs in the slice OutputRoom returns (its
// capacity at least n; nil: no room) instead of in its run's slab. A State
// whose writes go out as outputs beside the record's own (the scheduler's:
// its changelog records) then adds those after them, where one slice of
// the record's outputs in the run's slab would be copied into a slice of
// outputs and writes. Called as State's methods are, when a call's outputs
// are taken (the first output list of a pooled call).
type OutputRoom interface {
	OutputRoom(n int) []abi.Output
}

// StateReader is a State's read path for asynchronous operations (State.
// Reader). Safe for use from any goroutine.
type StateReader interface {
	// Check answers whether the record may use key (ErrnoTooLarge,
	// ErrnoWrongKey), without reading it: the errno async_start returns.
	Check(key []byte) abi.Errno
	// Get returns key's value (the caller's to keep) and whether it has
	// one; an errno when the state cannot be read (ErrnoNoState: the
	// partition moved).
	Get(key []byte) ([]byte, bool, abi.Errno)
	// Scan is State.Scan over the view. Key and value are valid only
	// during fn.
	Scan(prefix, after []byte, fn func(key, value []byte) bool) abi.Errno
}

// ProcessState is Process for a record whose calls may use state: st
// answers its state_* host functions (nil: they return ErrnoNoState).
func (in *Instance) ProcessState(ctx context.Context, rec *abi.Record, tag any, st State) Result {
	in.nextState = st
	return in.Process(ctx, rec, tag)
}

// stateCall reads the arguments (handle, key, key_len) common to the
// state_* host functions: the record and its State and the key, or an
// errno.
func stateCall(ctx context.Context, mod api.Module, stack []uint64, fn string) (*Instance, *recState, []byte, abi.Errno) {
	in, rs, key := recordCall(ctx, mod, stack, fn)
	switch {
	case rs == nil:
		return in, nil, nil, abi.ErrnoBadHandle
	case rs.state == nil:
		return in, nil, nil, abi.ErrnoNoState
	case len(key) > abi.MaxStateKeyBytes:
		return in, nil, nil, abi.ErrnoTooLarge
	}
	return in, rs, key, 0
}

// state_get(handle, key, key_len, buf, buf_len) -> value_len | -errno.
// The value is written only when it fits (value_len <= buf_len); a guest
// given a larger value_len calls again with a buffer that size.
func hostStateGet(ctx context.Context, mod api.Module, stack []uint64) {
	in, rs, key, e := stateCall(ctx, mod, stack, abi.ImportStateGet)
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	buf, n := uint32(stack[3]), uint32(stack[4])
	v, e := rs.state.Get(key)
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	if len(v) <= int(n) && !mod.Memory().Write(buf, v) {
		in.badPointer(mod, abi.ImportStateGet, buf, uint32(len(v)))
	}
	stack[0] = uint64(len(v))
}

// state_put(handle, key, key_len, val, val_len) -> 0 | -errno
func hostStatePut(ctx context.Context, mod api.Module, stack []uint64) {
	in, rs, key, e := stateCall(ctx, mod, stack, abi.ImportStatePut)
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	val := in.read(mod, abi.ImportStatePut, uint32(stack[3]), uint32(stack[4]))
	prev, wrote := rs.state.Written(key)
	stack[0] = errno(in.countWrite(rs, len(key), len(val), prev, wrote, func() abi.Errno { return rs.state.Put(key, val) }))
}

// state_delete(handle, key, key_len) -> 0 | -errno
func hostStateDelete(ctx context.Context, mod api.Module, stack []uint64) {
	in, rs, key, e := stateCall(ctx, mod, stack, abi.ImportStateDelete)
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	prev, wrote := rs.state.Written(key)
	stack[0] = errno(in.countWrite(rs, len(key), 0, prev, wrote, func() abi.Errno { return rs.state.Delete(key) }))
}

// countWrite makes the write of a value of valueLen bytes to a key of
// keyLen bytes (a delete: 0; a two-part key: its key's and sub's) with
// write, within the record's bounds on outputs (ABI.md §4.1); prev and
// wrote are what the record's own earlier write of the key left
// (State.Written). A
// write becomes a changelog record among the record's outputs, so it counts
// as one, in limits.max_outputs (once per key the record writes), its key
// and value in limits.max_output_bytes, and those bytes (plus an output's
// overhead) in host.max_held_output_bytes until the caller releases the
// record's outputs. A key written again replaces what its last write
// counted. Past a bound the write is not made: ErrnoLimit, as emit's.
func (in *Instance) countWrite(rs *recState, keyLen, valueLen, prevLen int, wrote bool, write func() abi.Errno) abi.Errno {
	lim := in.m.limits
	n, prev, more := keyLen+valueLen, 0, 1
	if wrote {
		prev, more = keyLen+prevLen, 0
	}
	if len(rs.outputs)+rs.written+more > lim.MaxOutputs || rs.outBytes-prev+n > lim.MaxOutputBytes {
		return abi.ErrnoLimit
	}
	// More bytes are taken before the write, fewer given back after it:
	// giving back always succeeds.
	held := int64(n - prev + more*outputOverhead)
	if held > 0 && !in.hold(rs, held, "state write refused", n) {
		return abi.ErrnoLimit
	}
	if e := write(); e != 0 {
		if held > 0 {
			in.hold(rs, -held, "", 0)
		}
		return e
	}
	if held < 0 {
		in.hold(rs, held, "", 0)
	}
	rs.outBytes += n - prev
	rs.written += more
	return 0
}

// state_scan(handle, prefix, prefix_len, after, after_len, buf, buf_len)
// -> bytes written | -errno: the entries (abi.AppendStateEntry) of the keys
// with prefix after the cursor after, as many whole ones as fit in buf and
// in abi.StateScanMaxBytes; 0 when there are no more. ErrnoBufTooSmall when
// not even the first fits, or only the empty key's (abi.StateBatchCut). The
// buffer must lie in the guest's memory (it is checked before the scan, so
// that buf_len never sizes anything); the entries are written straight into
// it, with no copy kept by the host.
func hostStateScan(ctx context.Context, mod api.Module, stack []uint64) {
	in, rs, prefix, e := stateCall(ctx, mod, stack, abi.ImportStateScan)
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	after := in.read(mod, abi.ImportStateScan, uint32(stack[3]), uint32(stack[4]))
	if len(after) > abi.MaxStateKeyBytes {
		stack[0] = errno(abi.ErrnoTooLarge)
		return
	}
	buf := in.read(mod, abi.ImportStateScan, uint32(stack[5]), uint32(stack[6]))
	sc := &in.kept.scan
	stack[0] = sc.end(rs.state.Scan(prefix, after, sc.begin(buf)))
}

// stateScanner writes into the guest's buffer the entries a scan lists
// (§4.1): as many whole ones as fit in it and in abi.StateScanMaxBytes
// (state_scan's and state_scan2's). An instance keeps one (keptForReuse)
// with its add method's value, so that a scan allocates neither.
type stateScanner struct {
	out      []byte // within the buffer: never reallocated
	limit    int
	tooSmall bool
	cut      abi.StateBatchCut
	fn       func(k, v []byte) bool // add, made once
}

// begin starts a scan into buf and returns the function the scan calls
// for each entry.
func (s *stateScanner) begin(buf []byte) func(k, v []byte) bool {
	if s.fn == nil {
		s.fn = s.add
	}
	*s = stateScanner{out: buf[:0:len(buf)], limit: min(len(buf), abi.StateScanMaxBytes), fn: s.fn}
	return s.fn
}

// add writes one entry; false stops the scan. A call writes at most
// StateScanMaxBytes, but for the entry that must follow the empty key's
// (abi.StateBatchCut): two entries of the largest value do not fit in it,
// and without it the guest would be told to grow its buffer forever.
func (s *stateScanner) add(k, v []byte) bool {
	n := len(s.out) + abi.StateEntrySize(k, v)
	if n > cap(s.out) || n > s.limit && s.cut.MayEnd() {
		s.tooSmall = !s.cut.MayEnd()
		return false
	}
	s.out = abi.AppendStateEntry(s.out, k, v)
	s.cut.Add(k)
	return true
}

// end returns the bytes written, or an errno for the guest (the scan's
// e, or the buffer too small for the first entry), and lets go of the
// buffer.
func (s *stateScanner) end(e abi.Errno) uint64 {
	n, tooSmall := len(s.out), s.tooSmall
	s.out = nil
	switch {
	case e != 0:
		return errno(e)
	case tooSmall:
		return errno(abi.ErrnoBufTooSmall)
	}
	return uint64(n)
}

// state2Call reads the arguments (handle, key, key_len, sub, sub_len)
// common to the two-part state functions (ABI.md §4.2): the record, its
// State2, the key and the sub, or an errno.
func state2Call(ctx context.Context, mod api.Module, stack []uint64, fn string) (*Instance, *recState, State2, []byte, []byte, abi.Errno) {
	in, rs, key, e := stateCall(ctx, mod, stack, fn)
	if e != 0 {
		return in, nil, nil, nil, nil, e
	}
	sub := in.read(mod, fn, uint32(stack[3]), uint32(stack[4]))
	st, ok := rs.state.(State2)
	switch {
	case !ok:
		return in, nil, nil, nil, nil, abi.ErrnoNoState
	case len(sub) > abi.MaxStateKeyBytes:
		return in, nil, nil, nil, nil, abi.ErrnoTooLarge
	}
	return in, rs, st, key, sub, 0
}

// state_get2(handle, key, key_len, sub, sub_len, buf, buf_len) ->
// value_len | -errno: state_get of (key, sub).
func hostStateGet2(ctx context.Context, mod api.Module, stack []uint64) {
	in, _, st, key, sub, e := state2Call(ctx, mod, stack, abi.ImportStateGet2)
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	buf, n := uint32(stack[5]), uint32(stack[6])
	v, e := st.Get2(key, sub)
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	if len(v) <= int(n) && !mod.Memory().Write(buf, v) {
		in.badPointer(mod, abi.ImportStateGet2, buf, uint32(len(v)))
	}
	stack[0] = uint64(len(v))
}

// state_put2(handle, key, key_len, sub, sub_len, val, val_len) -> 0 |
// -errno: counted as a write of a key of the key's and sub's bytes.
func hostStatePut2(ctx context.Context, mod api.Module, stack []uint64) {
	in, rs, st, key, sub, e := state2Call(ctx, mod, stack, abi.ImportStatePut2)
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	val := in.read(mod, abi.ImportStatePut2, uint32(stack[5]), uint32(stack[6]))
	prev, wrote := st.Written2(key, sub)
	stack[0] = errno(in.countWrite(rs, len(key)+len(sub), len(val), prev, wrote, func() abi.Errno { return st.Put2(key, sub, val) }))
}

// state_delete2(handle, key, key_len, sub, sub_len) -> 0 | -errno
func hostStateDelete2(ctx context.Context, mod api.Module, stack []uint64) {
	in, rs, st, key, sub, e := state2Call(ctx, mod, stack, abi.ImportStateDelete2)
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	prev, wrote := st.Written2(key, sub)
	stack[0] = errno(in.countWrite(rs, len(key)+len(sub), 0, prev, wrote, func() abi.Errno { return st.Delete2(key, sub) }))
}

// state_scan2(handle, key, key_len, prefix, prefix_len, after, after_len,
// buf, buf_len) -> bytes written | -errno: state_scan over the subs of
// key, each entry's key its sub.
func hostStateScan2(ctx context.Context, mod api.Module, stack []uint64) {
	in, _, st, key, prefix, e := state2Call(ctx, mod, stack, abi.ImportStateScan2)
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	after := in.read(mod, abi.ImportStateScan2, uint32(stack[5]), uint32(stack[6]))
	if len(after) > abi.MaxStateKeyBytes {
		stack[0] = errno(abi.ErrnoTooLarge)
		return
	}
	buf := in.read(mod, abi.ImportStateScan2, uint32(stack[7]), uint32(stack[8]))
	sc := &in.kept.scan
	stack[0] = sc.end(st.Scan2(key, prefix, after, sc.begin(buf)))
}

// stream_time(handle, out) -> 0 | -errno: the partition's stream time,
// an i64 little-endian at out (8 bytes; outside memory faults the call).
func hostStreamTime(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	handle, out := uint32(stack[0]), uint32(stack[1])
	if in == nil {
		stack[0] = errno(abi.ErrnoBadHandle)
		return
	}
	rs := in.current(handle)
	switch {
	case rs == nil:
		stack[0] = errno(abi.ErrnoBadHandle)
		return
	case rs.state == nil:
		stack[0] = errno(abi.ErrnoNoState)
		return
	}
	st, ok := rs.state.(State2)
	if !ok {
		stack[0] = errno(abi.ErrnoNoState)
		return
	}
	t, e := st.StreamTime()
	if e != 0 {
		stack[0] = errno(e)
		return
	}
	if !mod.Memory().WriteUint64Le(out, uint64(t)) {
		in.badPointer(mod, abi.ImportStreamTime, out, 8)
	}
	stack[0] = 0
}
