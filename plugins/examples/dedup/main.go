// Command dedup is a stateful wasmstream processor: it emits the first
// record of each id and drops (succeeds without output) every later one.
// The id is the record's key — produce with the id as key, so that every
// copy of a record lands in the same partition and its state. The state
// keeps one empty value per id seen.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o dedup.wasm .
package main

import (
	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(dedup) }

func dedup(r *guest.Record, out guest.Emitter) error {
	_, seen, err := guest.StateGet(r.Key)
	if err != nil {
		return guest.Terminal(err)
	}
	if seen {
		return nil
	}
	if err := guest.StatePut(r.Key, nil); err != nil {
		return guest.Terminal(err)
	}
	return out.Emit(guest.Output{Key: r.Key, Value: r.Value, Headers: r.Headers})
}
