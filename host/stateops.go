package host

import (
	"context"
	"strconv"

	"github.com/wasmstream/wasmstream/abi"
)

// The asynchronous state operations (ABI.md §7.3, kinds 3 and 4): the reads
// of state_get and state_scan as operations, so that an instance takes
// other records while a read waits on the disk. What the guest can get
// wrong about the request (a key too long, of another partition, no state)
// is checked at async_start, on the instance's goroutine, and returned as
// its errno; the read itself runs on its own goroutine through the
// record's State.Reader: the record's own writes as they were at
// async_start, over the shared state as it is when the read runs.

// stateGetOp is abi.OpStateGet.
type stateGetOp struct{}

func (stateGetOp) Start(context.Context, []byte, func([]byte)) (string, error) {
	return "", abi.ErrnoNoState // only through StartRecord
}

func (stateGetOp) StartRecord(ctx context.Context, st State, req []byte, done func([]byte)) (string, error) {
	key, err := abi.DecodeStateGet(req)
	if err != nil {
		return "", err
	}
	rd, e := stateReader(st, key)
	if e == 0 {
		e = rd.Check(key)
	}
	if e != 0 {
		return "", e
	}
	key = append([]byte(nil), key...) // req is guest memory
	go func() {
		if err := ctx.Err(); err != nil {
			done(abi.AppendCompletionError(nil, abi.CompletionError, "state get: "+err.Error()))
			return
		}
		v, found, e := rd.Get(key)
		switch err := ctx.Err(); {
		case e != 0:
			done(abi.AppendCompletionError(nil, abi.CompletionError, "state get: "+e.Error()))
		case err != nil: // ended while it read: the record is gone
			done(abi.AppendCompletionError(nil, abi.CompletionError, "state get: "+err.Error()))
		case !found:
			done(abi.AppendStateGetResult([]byte{abi.CompletionOK}, nil))
		default:
			if v == nil {
				v = []byte{} // found: never null
			}
			done(abi.AppendStateGetResult(append(make([]byte, 0, 5+len(v)), abi.CompletionOK), v))
		}
	}()
	return "key " + quoteKey(key), nil
}

// stateScanOp is abi.OpStateScan.
type stateScanOp struct{}

func (stateScanOp) Start(context.Context, []byte, func([]byte)) (string, error) {
	return "", abi.ErrnoNoState // only through StartRecord
}

func (stateScanOp) StartRecord(ctx context.Context, st State, raw []byte, done func([]byte)) (string, error) {
	req, err := abi.DecodeStateScan(raw)
	if err != nil {
		return "", err
	}
	rd, e := stateReader(st, req.Prefix)
	if e == 0 && len(req.After) > abi.MaxStateKeyBytes {
		e = abi.ErrnoTooLarge
	}
	if e != 0 {
		return "", e
	}
	prefix, after, limit := append([]byte(nil), req.Prefix...), append([]byte(nil), req.After...), req.Limit()
	go func() {
		if err := ctx.Err(); err != nil {
			done(abi.AppendCompletionError(nil, abi.CompletionError, "state scan: "+err.Error()))
			return
		}
		out := []byte{abi.CompletionOK}
		var cut abi.StateBatchCut
		e := rd.Scan(prefix, after, func(k, v []byte) bool {
			if cut.MayEnd() && len(out)-1+abi.StateEntrySize(k, v) > limit {
				return false
			}
			out = abi.AppendStateEntry(out, k, v)
			cut.Add(k)
			return ctx.Err() == nil
		})
		switch err := ctx.Err(); {
		case e != 0:
			done(abi.AppendCompletionError(nil, abi.CompletionError, "state scan: "+e.Error()))
		case err != nil: // cut short: not a whole batch
			done(abi.AppendCompletionError(nil, abi.CompletionError, "state scan: "+err.Error()))
		default:
			done(out)
		}
	}()
	return "prefix " + quoteKey(prefix) + " after " + quoteKey(after), nil
}

// stateReader checks what every state operation needs: a record with
// state and a key (or prefix) within the bound.
func stateReader(st State, key []byte) (StateReader, abi.Errno) {
	switch {
	case st == nil:
		return nil, abi.ErrnoNoState
	case len(key) > abi.MaxStateKeyBytes:
		return nil, abi.ErrnoTooLarge
	}
	rd := st.Reader()
	if rd == nil {
		return nil, abi.ErrnoNoState
	}
	return rd, 0
}

// quoteKey names a key in reports, cut to 64 bytes.
func quoteKey(k []byte) string {
	if len(k) > 64 {
		return strconv.Quote(string(k[:64])) + "…"
	}
	return strconv.Quote(string(k))
}
