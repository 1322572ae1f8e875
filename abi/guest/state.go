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
// later records of the same partition see it at once. The empty key is a
// key (r.Key of a record with a null key is nil: as a state key it is the
// empty key); it belongs to the partition an empty record key is sent to,
// and a scan of every key lists it first.
//
// Errors are abi.Errno values: abi.ErrnoTooLarge (a key over
// abi.MaxStateKeyBytes or a value over state.max_value_bytes),
// abi.ErrnoWrongKey (the key belongs to another partition), abi.ErrnoNoState
// (the pipeline has no state), abi.ErrnoLimit (StatePut, StateDelete: the
// record's writes, which count as outputs, reached limits.max_outputs or
// limits.max_output_bytes, the host holds its maximum of outputs, or the
// partition's state is at state.max_bytes; ABI.md §4.1). Return them to
// fail the record.

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

// Asynchronous state reads (ABI.md §7.3): StateGet and StateScan as
// operations for Await, so that the instance takes other records while the
// host reads the state (a read may wait on the disk). A read sees the
// record's own writes made before Await, and the partition's state as it
// is when the host performs the read: under ordering key, every write of
// the key's earlier records; under ordering partition, a record still
// waiting may not have written yet (ABI.md §4.1). A key the host refuses
// (too long, of another partition, no state) makes Await return the
// abi.Errno at once, as a terminal error.

// StateValue is the result of StateGetAsync.
type StateValue struct {
	Value []byte // the caller's to keep
	Found bool   // false: the key has no value (an empty value is a value)
}

// StateGetAsync reads key's value.
func StateGetAsync(key []byte) Op[StateValue] {
	return Op[StateValue]{kind: abi.OpStateGet, req: abi.AppendStateGet(nil, key)}
}

func decodeStateValue(p []byte) (StateValue, error) {
	v, ok, err := abi.DecodeStateGetResult(p)
	return StateValue{Value: v, Found: ok}, err
}

// StateEntry is a key and its value.
type StateEntry struct {
	Key, Value []byte
}

// StateBatch is the result of StateScanAsync: the next keys of the scan, in
// key order. No entries means no more keys.
type StateBatch struct {
	Entries []StateEntry
}

// Done reports whether the scan is over.
func (b *StateBatch) Done() bool { return len(b.Entries) == 0 }

// After is the cursor of the next batch: the last key of this one.
func (b *StateBatch) After() []byte {
	if len(b.Entries) == 0 {
		return nil
	}
	return b.Entries[len(b.Entries)-1].Key
}

// StateScanAsync reads the next batch of the keys with prefix that sort
// after after (from the first when after is empty): as many whole entries
// as fit in maxBytes (0: abi.StateScanDefaultBytes; at most
// abi.StateScanMaxBytes), at least one. To go on, call it again with
// after = batch.After(), until a batch is Done.
func StateScanAsync(prefix, after []byte, maxBytes int) Op[*StateBatch] {
	r := abi.StateScanRequest{Prefix: prefix, After: after, MaxBytes: uint32(min(max(maxBytes, 0), abi.StateScanMaxBytes))}
	return Op[*StateBatch]{kind: abi.OpStateScan, req: abi.AppendStateScan(nil, &r)}
}

func decodeStateBatch(p []byte) (*StateBatch, error) {
	b := &StateBatch{}
	err := abi.DecodeStateEntries(p, func(k, v []byte) bool {
		b.Entries = append(b.Entries, StateEntry{Key: k, Value: v})
		return true
	})
	return b, err
}

// Handle is the ABI handle of the record whose call is in progress (0
// outside calls): what a package that binds host functions of its own
// passes them, such as the event-time calls of ABI.md §4.2
// (window.Bind(guest.Handle())). It is valid only during the call.
func Handle() uint32 { return curHandle }
