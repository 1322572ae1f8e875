// Command goallocs is the uppercase processor of plugins/examples/uppercase
// built with the Go SDK, with one more export: the guest's own count of
// heap allocations (runtime.MemStats.Mallocs), so that a test can tell how
// many allocations the SDK's path costs a record inside the guest
// (host/goallocs_test.go). A record with the header "await" waits first:
// on a 1 ms timer ("timer"), or on a GET of $LOOKUP_URL ("http"), whose
// continuation emits the record uppercased.
package main

import (
	"errors"
	"os"
	"runtime"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
)

func main() {}

func init() { guest.Process(uppercase) }

func uppercase(r *guest.Record, out guest.Emitter) error {
	switch v, _ := r.Header("await"); string(v) {
	case "timer":
		return guest.Await(guest.Timer(time.Millisecond), func(_ struct{}, err error) error {
			if err != nil {
				return err
			}
			return emitUpper(r, out)
		})
	case "http":
		return guest.Await(guest.HTTP(guest.HTTPRequest{URL: lookupURL}), func(resp *guest.HTTPResponse, err error) error {
			if err != nil {
				return err
			}
			if resp.Status != 200 || len(resp.Headers) == 0 {
				return guest.Terminal(errors.New("unexpected response"))
			}
			return emitUpper(r, out)
		})
	}
	return emitUpper(r, out)
}

var lookupURL = os.Getenv("LOOKUP_URL") + "k"

func emitUpper(r *guest.Record, out guest.Emitter) error {
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
