// Command statefill is a test processor that fills state: it writes
// "fill.n" values of "fill.bytes" bytes (decimal headers) under the keys
// <record key>/<i>, or all under the record key when the header
// "fill.same" is present, or deletes those keys when "fill.delete" is. The
// first state error fails the record (retryably) with the errno's message.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o statefill.wasm .
package main

import (
	"strconv"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(fill) }

var value []byte

func fill(r *guest.Record, _ guest.Emitter) error {
	n, size := header(r, "fill.n"), header(r, "fill.bytes")
	if len(value) < size {
		value = make([]byte, size)
	}
	_, same := r.Header("fill.same")
	_, del := r.Header("fill.delete")
	key := r.Key
	for i := 0; i < n; i++ {
		if !same {
			key = strconv.AppendInt(append(append(key[:0:0], r.Key...), '/'), int64(i), 10)
		}
		var err error
		if del {
			err = guest.StateDelete(key)
		} else {
			err = guest.StatePut(key, value[:size])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func header(r *guest.Record, name string) int {
	v, _ := r.Header(name)
	n, _ := strconv.Atoi(string(v))
	return n
}
