// Command filter is a wasmstream processor that keeps only the records whose
// value contains the bytes in the record header "match", or, when the header
// is absent, the word "keep". Dropped records succeed with no output.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o filter.wasm .
package main

import (
	"bytes"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(filter) }

func filter(r *guest.Record, out guest.Emitter) error {
	want := []byte("keep")
	if m, ok := r.Header("match"); ok {
		want = m
	}
	if !bytes.Contains(r.Value, want) {
		return nil
	}
	return out.Emit(guest.Output{Key: r.Key, Value: r.Value, Headers: r.Headers})
}
