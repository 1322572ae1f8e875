// Command customerupper is the processor of BenchmarkSchemaPipeline: an
// uppercase-style JSON processor that reads an order's JSON, upper-cases
// the value of its "customer" field in place and emits the rest as it
// came. The same field of the same JSON is changed whether the host read
// the record raw or decoded it from Avro or Protobuf, so the rows of the
// benchmark differ only by the host's decode and encode. A value without
// a "customer" string fails the record (the benchmark then fails: it
// wants no dead letters).
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o customerupper.wasm .
package main

import (
	"bytes"
	"errors"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(customerUpper) }

var field = []byte(`"customer":"`)

func customerUpper(r *guest.Record, out guest.Emitter) error {
	v := r.Value
	i := bytes.Index(v, field)
	if i < 0 {
		return errors.New(`no "customer" string in the value`)
	}
	// The value's bytes up to its closing quote; an escape's next byte is
	// skipped (it cannot end the string).
	for j := i + len(field); j < len(v); j++ {
		switch c := v[j]; {
		case c == '"':
			return out.Emit(guest.Output{Key: r.Key, Value: v, Headers: r.Headers})
		case c == '\\':
			j++
		case 'a' <= c && c <= 'z':
			v[j] = c - ('a' - 'A')
		}
	}
	return errors.New(`the "customer" string is not closed`)
}
