// Command uppercase is a wasmstream processor: it emits each record with its
// value in upper case, keeping key and headers. Built with a version
// (-ldflags "-X main.version=2"), it also sets the header processor.version,
// which shows which version processed a record (hot-swap tests).
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o uppercase.wasm .
package main

import (
	"bytes"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(uppercase) }

var version string

func uppercase(r *guest.Record, out guest.Emitter) error {
	v := r.Value
	if v != nil { // keep a null value null
		v = bytes.ToUpper(v)
	}
	hs := r.Headers
	if version != "" {
		hs = append(hs[:len(hs):len(hs)], guest.Header{Key: "processor.version", Value: []byte(version)})
	}
	return out.Emit(guest.Output{Key: r.Key, Value: v, Headers: hs})
}
