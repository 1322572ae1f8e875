// Command count-async is the count example with its state read as an
// asynchronous operation: for each record it starts a state get of the
// record's key (guest.StateGetAsync) and returns; when the host has read
// the count, the continuation stores the count plus one (guest.StatePut)
// and emits the key with it (decimal). The instance takes other records
// while a read waits. Under ordering: key a key's next record starts once
// this one is decided, so the counts are exact; under ordering: partition
// a record may read its key before an earlier one still waiting wrote it
// (ABI.md §4.1).
//
// Headers for the host's tests: "count.key" counts under that key instead
// of the record's (a key of another partition: Await fails with
// abi.ErrnoWrongKey at once); "count.scan" (a prefix) also emits every key
// with that prefix and its value, read with guest.StateScanAsync in
// batches of "count.scanbytes" bytes (default: the host's), after the
// count; "count.abandon" starts the read and decides the record at once
// (ok, no output), so that the host cancels the read. A state error fails
// the record terminally. "count.set" (a value) stores that value under the
// key before the read, which then reads it (the record's own write): the
// count continues from it. "count.sync" counts in the record's own call,
// with the synchronous guest.StateGet (no operation: the record is decided
// in its call), so that records decided in their calls and records that
// wait mix in one run of records. "count.retry" fails the record's first
// attempt retryably after its count was stored (the host drops the write
// with the attempt): the next attempt counts from the same state.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o count-async.wasm .
package main

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(count) }

func count(r *guest.Record, out guest.Emitter) error {
	key := r.Key
	if k, ok := r.Header("count.key"); ok {
		key = k
	}
	if v, ok := r.Header("count.set"); ok {
		if err := guest.StatePut(key, v); err != nil {
			return guest.Terminal(err)
		}
	}
	if _, ok := r.Header("count.sync"); ok {
		v, _, err := guest.StateGet(key)
		if err != nil {
			return guest.Terminal(err)
		}
		return bump(r, key, v, out)
	}
	if _, ok := r.Header("count.abandon"); ok {
		if err := guest.Await(guest.StateGetAsync(key), func(guest.StateValue, error) error { return nil }); err != guest.Pending {
			return err
		}
		return nil // decided while the read is outstanding: the host cancels it
	}
	return guest.Await(guest.StateGetAsync(key), func(sv guest.StateValue, err error) error {
		if err != nil {
			return guest.Terminal(err)
		}
		return bump(r, key, sv.Value, out)
	})
}

// bump stores the count v read for key plus one and emits it, then the
// scan the record asks for.
func bump(r *guest.Record, key, v []byte, out guest.Emitter) error {
	n, _ := strconv.ParseUint(string(v[:len(v)-len(bytes.TrimLeft(v, "0123456789"))]), 10, 64)
	n++
	val := strconv.AppendUint(nil, n, 10)
	if err := guest.StatePut(key, val); err != nil {
		return guest.Terminal(err)
	}
	if _, ok := r.Header("count.retry"); ok && r.Attempt == 1 {
		return errors.New("count.retry: the first attempt fails after its write")
	}
	if err := out.Emit(guest.Output{Key: key, Value: val}); err != nil {
		return err
	}
	if p, ok := r.Header("count.scan"); ok {
		size := 0
		if s, ok := r.Header("count.scanbytes"); ok {
			size, _ = strconv.Atoi(string(s))
		}
		return scan(p, nil, size, out)
	}
	return nil
}

// scan emits the keys with prefix after after, one batch per operation,
// until a batch is empty.
func scan(prefix, after []byte, size int, out guest.Emitter) error {
	return guest.Await(guest.StateScanAsync(prefix, after, size), func(b *guest.StateBatch, err error) error {
		if err != nil {
			return guest.Terminal(err)
		}
		if b.Done() {
			return nil
		}
		for _, e := range b.Entries {
			if err := out.Emit(guest.Output{Key: e.Key, Value: e.Value}); err != nil {
				return err
			}
		}
		return scan(prefix, b.After(), size, out)
	})
}
