//go:build wasip1

package main

import (
	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/window"
)

// In the module, each call's Host is the host's functions for that call:
// the record's, or the timer firing's (wasmstream_on_timer).
func init() {
	guest.Process(func(r *guest.Record, out guest.Emitter) error {
		return processor{}.Record(window.Bind(guest.Handle()), r, out)
	})
	guest.ProcessTimers(func(f *guest.Firing, out guest.Emitter) error {
		return processor{}.Timer(window.Bind(guest.Handle()), f.Key, f.At, out)
	})
}
