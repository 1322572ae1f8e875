// Command goallocs is the uppercase processor of plugins/examples/uppercase
// built with the Go SDK, with one more export: the guest's own count of
// heap allocations (runtime.MemStats.Mallocs), so that a test can tell how
// many allocations the SDK's path costs a record inside the guest
// (host/goallocs_test.go).
package main

import (
	"runtime"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(uppercase) }

func uppercase(r *guest.Record, out guest.Emitter) error {
	v := r.Value
	for i, c := range v {
		if 'a' <= c && c <= 'z' {
			v[i] = c - ('a' - 'A')
		}
	}
	return out.Emit(guest.Output{Key: r.Key, Value: v, Headers: r.Headers})
}

var ms runtime.MemStats

//go:wasmexport test_mallocs
func mallocs() int64 {
	runtime.ReadMemStats(&ms)
	return int64(ms.Mallocs)
}
