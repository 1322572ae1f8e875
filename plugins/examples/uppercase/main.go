// Command uppercase is a wasmstream processor: it emits each record with its
// value in upper case, keeping key and headers.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o uppercase.wasm .
package main

import (
	"bytes"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(uppercase) }

func uppercase(r *guest.Record, out guest.Emitter) error {
	v := r.Value
	if v != nil { // keep a null value null
		v = bytes.ToUpper(v)
	}
	return out.Emit(guest.Output{Key: r.Key, Value: v, Headers: r.Headers})
}
