//go:build wasip1

// Command timerguest exercises the Go SDK's timer entry (guest.ProcessTimers,
// the export wasmstream_on_timer) for TestGoTimerEntry: a record sets the
// timer (its key, its timestamp); a firing emits what it was handed, or
// fails, retries or waits as its key says. A record with the key
// "unregister" removes the timer function.
package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/window"
)

func main() {}

func init() {
	guest.Process(func(r *guest.Record, out guest.Emitter) error {
		if string(r.Key) == "unregister" {
			guest.ProcessTimers(nil)
			return nil
		}
		return window.Bind(guest.Handle()).SetTimer(r.Key, r.Timestamp.UnixMilli())
	})
	guest.ProcessTimers(onTimer)
}

func onTimer(f *guest.Firing, out guest.Emitter) error {
	switch string(f.Key) {
	case "fail":
		return guest.Terminal(errors.New("the firing failed"))
	case "retry":
		return errors.New("the firing asks for a retry")
	case "wait":
		return guest.Await(guest.Timer(time.Millisecond), func(struct{}, error) error { return nil })
	}
	st, err := window.Bind(guest.Handle()).StreamTime()
	if err != nil {
		return err
	}
	return out.Emit(guest.Output{Key: f.Key, Value: fmt.Appendf(nil, "at %d stream_time %d/%d partition %d attempt %d topic %s", f.At, f.StreamTime, st, f.Partition, f.Attempt, f.Topic)})
}
