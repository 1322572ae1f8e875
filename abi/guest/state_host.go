//go:build !wasip1

package guest

import (
	"bytes"
	"sort"

	"github.com/wasmstream/wasmstream/abi"
)

// On the host (go test), the state is an in-memory map: Run applies a
// record's writes when its status is ok and discards them otherwise, as
// the wasmstream host does. Every key is taken to be in the record's
// partition; the empty key is a key (a null record key reads and writes
// it), listed first by a scan of every key. ResetState empties it between
// tests.

// MaxStateValueBytes is the value bound the host-side state enforces (the
// default of state.max_value_bytes).
var MaxStateValueBytes = 64 << 10

var (
	stateCommitted = map[string][]byte{}
	// statePending is the writes of the record being run: a nil value
	// entry with its key present is a delete.
	statePending = map[string][]byte{}
)

// ResetState forgets every key.
func ResetState() {
	stateCommitted = map[string][]byte{}
	statePending = map[string][]byte{}
}

// StateSnapshot returns a copy of the committed state (tests).
func StateSnapshot() map[string][]byte {
	out := make(map[string][]byte, len(stateCommitted))
	for k, v := range stateCommitted {
		out[k] = bytes.Clone(v)
	}
	return out
}

// endState applies or discards the record's writes.
func endState(st abi.Status) {
	if st == abi.StatusOK {
		for k, v := range statePending {
			if v == nil {
				delete(stateCommitted, k)
			} else {
				stateCommitted[k] = v
			}
		}
	}
	statePending = map[string][]byte{}
}

func stateGet(_ uint32, key []byte) ([]byte, error) {
	if len(key) > abi.MaxStateKeyBytes {
		return nil, abi.ErrnoTooLarge
	}
	if v, ok := statePending[string(key)]; ok {
		if v == nil {
			return nil, abi.ErrnoNotFound
		}
		return bytes.Clone(v), nil
	}
	if v, ok := stateCommitted[string(key)]; ok {
		return bytes.Clone(v), nil
	}
	return nil, abi.ErrnoNotFound
}

func statePut(_ uint32, key, value []byte) error {
	if len(key) > abi.MaxStateKeyBytes || len(value) > MaxStateValueBytes {
		return abi.ErrnoTooLarge
	}
	if value == nil {
		value = []byte{}
	}
	statePending[string(key)] = bytes.Clone(value)
	return nil
}

func stateDelete(_ uint32, key []byte) error {
	if len(key) > abi.MaxStateKeyBytes {
		return abi.ErrnoTooLarge
	}
	statePending[string(key)] = nil
	return nil
}

func stateScan(_ uint32, prefix []byte, fn func(key, value []byte) bool) error {
	merged := map[string][]byte{}
	for k, v := range stateCommitted {
		merged[k] = v
	}
	for k, v := range statePending {
		if v == nil {
			delete(merged, k)
		} else {
			merged[k] = v
		}
	}
	keys := make([]string, 0, len(merged))
	for k := range merged {
		if bytes.HasPrefix([]byte(k), prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !fn([]byte(k), merged[k]) {
			return nil
		}
	}
	return nil
}

// startStateOp answers an asynchronous state operation at async_start, as
// the host checks it then: the in-memory state does not change while a
// record runs, so reading it now is reading it when the host would (the
// record's writes so far over the committed state). It returns the
// operation's result, or the errno async_start would.
func startStateOp(kind abi.OpKind, req []byte) ([]byte, error) {
	if kind == abi.OpStateGet {
		key, err := abi.DecodeStateGet(req)
		if err != nil {
			return nil, abi.ErrnoBadEncoding
		}
		v, err := stateGet(0, key)
		switch {
		case err == abi.ErrnoNotFound:
			return abi.AppendStateGetResult([]byte{abi.CompletionOK}, nil), nil
		case err != nil:
			return nil, err
		}
		return abi.AppendStateGetResult([]byte{abi.CompletionOK}, v), nil
	}
	r, err := abi.DecodeStateScan(req)
	if err != nil {
		return nil, abi.ErrnoBadEncoding
	}
	if len(r.Prefix) > abi.MaxStateKeyBytes || len(r.After) > abi.MaxStateKeyBytes {
		return nil, abi.ErrnoTooLarge
	}
	out, limit := []byte{abi.CompletionOK}, r.Limit()
	var cut abi.StateBatchCut // as the host cuts: never after the empty key alone
	stateScan(0, r.Prefix, func(k, v []byte) bool {
		if len(r.After) > 0 && string(k) <= string(r.After) {
			return true
		}
		if cut.MayEnd() && len(out)-1+abi.StateEntrySize(k, v) > limit {
			return false
		}
		out = abi.AppendStateEntry(out, k, v)
		cut.Add(k)
		return true
	})
	return out, nil
}
