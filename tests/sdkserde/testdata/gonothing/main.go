// Command gonothing is the baseline of BenchmarkSDKSerde: the Go avro-serde
// example's processor without its decode and encode — the same SDK path
// (sr.Process, its held outputs), the value emitted as it came.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o gonothing.wasm .
package main

import (
	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/sr"
)

func main() {}

func init() {
	sr.Process(func(r *guest.Record, out guest.Emitter) error {
		return out.Emit(guest.Output{Key: r.Key, Value: r.Value})
	})
}
