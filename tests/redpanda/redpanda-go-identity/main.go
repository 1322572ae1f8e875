// The identity transform of Redpanda's Go SDK documentation, unmodified by
// wasmstream: every record written back as it came. The benchmark
// (tests/bench/redpanda_bench_test.go) runs it beside the native uppercase
// Go guest. Built with the standard Go toolchain:
//
//	GOOS=wasip1 GOARCH=wasm go build -o redpanda_go_identity.wasm .
package main

import (
	"github.com/redpanda-data/redpanda/src/transform-sdk/go/transform"
)

func main() {
	transform.OnRecordWritten(identity)
}

func identity(e transform.WriteEvent, w transform.RecordWriter) error {
	return w.Write(e.Record())
}
