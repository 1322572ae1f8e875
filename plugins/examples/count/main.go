// Command count is a stateful wasmstream processor: it keeps a running count
// per record key in the pipeline's state (state.enabled) and emits, for each
// record, the key with its count so far (decimal). A record with a null key
// is counted under the empty key, which belongs to one partition of the
// input: in any other it fails (abi.ErrnoWrongKey) — null-key records are
// spread over the partitions, so give the records to count a key.
//
// Two headers exist for the host's tests: "count.key" counts under that
// key instead of the record's (a key of another partition gets
// abi.ErrnoWrongKey), and "count.pad" (a decimal n) stores n bytes of
// padding with the count (over state.max_value_bytes: abi.ErrnoTooLarge).
// A third, "count.scan" (a prefix), also emits every key with that prefix
// and its stored value, in key order, after the count (guest.StateScan).
// A state error fails the record terminally: it goes to the dead-letter
// topic. Built with a version (-ldflags "-X main.version=2"), it sets the
// header processor.version on its outputs, which shows which build counted
// a record (hot-swap tests).
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o count.wasm .
package main

import (
	"bytes"
	"strconv"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(count) }

var version string

func count(r *guest.Record, out guest.Emitter) error {
	key := r.Key
	if k, ok := r.Header("count.key"); ok {
		key = k
	}
	v, _, err := guest.StateGet(key)
	if err != nil {
		return guest.Terminal(err)
	}
	n, _ := strconv.ParseUint(string(v[:len(v)-len(bytes.TrimLeft(v, "0123456789"))]), 10, 64)
	n++
	val := strconv.AppendUint(nil, n, 10)
	stored := val
	if p, ok := r.Header("count.pad"); ok {
		pad, _ := strconv.Atoi(string(p))
		stored = append(append(stored, ' '), bytes.Repeat([]byte{'.'}, pad)...)
	}
	if err := guest.StatePut(key, stored); err != nil {
		return guest.Terminal(err)
	}
	var hs []guest.Header
	if version != "" {
		hs = []guest.Header{{Key: "processor.version", Value: []byte(version)}}
	}
	if err := out.Emit(guest.Output{Key: key, Value: val, Headers: hs}); err != nil {
		return err
	}
	if p, ok := r.Header("count.scan"); ok {
		var emitErr error
		err := guest.StateScan(p, func(k, v []byte) bool {
			emitErr = out.Emit(guest.Output{Key: bytes.Clone(k), Value: bytes.Clone(v)})
			return emitErr == nil
		})
		if err != nil {
			return guest.Terminal(err)
		}
		return emitErr
	}
	return nil
}
