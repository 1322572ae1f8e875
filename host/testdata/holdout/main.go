// Command holdout is a test processor that holds outputs while it waits: it
// emits the number of bytes in the record header "hold.bytes" (as outputs of
// up to 64 KiB), waits "hold.wait" on a timer, then succeeds, or fails
// terminally when the header "hold.fail" is present. An output the host
// refuses fails the record retryably.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o holdout.wasm .
package main

import (
	"errors"
	"strconv"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(hold) }

var chunk = make([]byte, 64<<10)

func hold(r *guest.Record, out guest.Emitter) error {
	b, _ := r.Header("hold.bytes")
	n, _ := strconv.Atoi(string(b))
	for n > 0 {
		k := min(n, len(chunk))
		if err := out.Emit(guest.Output{Key: r.Key, Value: chunk[:k]}); err != nil {
			return err
		}
		n -= k
	}
	w, _ := r.Header("hold.wait")
	d, _ := time.ParseDuration(string(w))
	_, fail := r.Header("hold.fail")
	return guest.Await(guest.Timer(d), func(_ struct{}, err error) error {
		if err != nil {
			return err
		}
		if fail {
			return guest.Terminal(errors.New("asked to fail"))
		}
		return nil
	})
}
