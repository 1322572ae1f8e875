package guest

import (
	"errors"

	"github.com/wasmstream/wasmstream/abi"
)

// State: a processor's durable per-key state (ABI.md §4.1), when the
// pipeline has state.enabled. Call these only while processing a record
// (in the Func, or a continuation of Await). The state is the record's
// input partition's: a key must be one the input's partitioner sends to
// that partition (use the record's key, or a key derived so that it hashes
// like it — the simplest is the record's key itself, or a prefix scan over
// keys the processor wrote for it). A write is the record's until its
// outcome: if the record fails, its writes are discarded with its outputs;
// later records of the same partition see it at once.
//
// Errors are abi.Errno values: abi.ErrnoTooLarge (a key over
// abi.MaxStateKeyBytes or a value over state.max_value_bytes),
// abi.ErrnoWrongKey (the key belongs to another partition), abi.ErrnoNoState
// (the pipeline has no state). Return them to fail the record.

var errNoRecord = errors.New("guest: state used outside a record's call")

// StateGet returns key's value and whether it has one.
func StateGet(key []byte) ([]byte, bool, error) {
	if curHandle == 0 {
		return nil, false, errNoRecord
	}
	v, err := stateGet(curHandle, key)
	if err == abi.ErrnoNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return v, true, nil
}

// StatePut sets key to value.
func StatePut(key, value []byte) error {
	if curHandle == 0 {
		return errNoRecord
	}
	return statePut(curHandle, key, value)
}

// StateDelete removes key.
func StateDelete(key []byte) error {
	if curHandle == 0 {
		return errNoRecord
	}
	return stateDelete(curHandle, key)
}

// StateScan calls fn for every key with prefix, in key order, until fn
// returns false. The host hands the entries over in bounded batches; key
// and value are valid only during fn. A write during the scan may or may
// not be seen by it.
func StateScan(prefix []byte, fn func(key, value []byte) bool) error {
	if curHandle == 0 {
		return errNoRecord
	}
	return stateScan(curHandle, prefix, fn)
}
