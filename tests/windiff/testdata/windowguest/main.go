// Command windowguest is the differential test's wasmstream party
// (tests/windiff): a count per key in tumbling, hopping or session windows
// of the Go SDK (abi/guest/window) over the host's event-time timers, one
// final result per window on close — the key, and the value "<start> <end>
// <count>" (milliseconds; end exclusive for time windows, inclusive for
// sessions) — and each late record sent unchanged to a late topic, so that
// the test counts them.
//
// Its environment (the pipeline's env): WINDOW_KIND (tumbling, hopping or
// session), WINDOW_SIZE (a time window's size or a session's gap),
// WINDOW_ADVANCE (hopping), WINDOW_GRACE, all Go durations, and
// LATE_TOPIC.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/window"
)

func main() {}

// windows is what both a record and a timer firing go to.
type windows interface {
	Add(h window.Host, r *guest.Record, out guest.Emitter) error
	Fire(h window.Host, key []byte, at int64, out guest.Emitter) error
}

// made are the windows, made at the first call from the environment (a
// module's environment is read at run time).
var made windows

func env(name string) time.Duration {
	d, _ := time.ParseDuration(os.Getenv(name))
	return d
}

func get() (windows, error) {
	if made != nil {
		return made, nil
	}
	opt := window.Options{Name: "count", Grace: env("WINDOW_GRACE"), OnClose: emitCount, LateTopic: os.Getenv("LATE_TOPIC")}
	var w windows
	var err error
	switch kind := os.Getenv("WINDOW_KIND"); kind {
	case "tumbling":
		w, err = window.Tumbling(env("WINDOW_SIZE"), opt)
	case "hopping":
		w, err = window.Hopping(env("WINDOW_SIZE"), env("WINDOW_ADVANCE"), opt)
	case "session":
		w, err = window.Sessions(env("WINDOW_SIZE"), opt)
	default:
		err = fmt.Errorf("WINDOW_KIND %q: tumbling, hopping or session", kind)
	}
	if err != nil {
		return nil, guest.Terminal(err)
	}
	made = w
	return w, nil
}

// emitCount emits a closed window's count.
func emitCount(r window.Result, out guest.Emitter) error {
	n, err := window.DecodeCount(r.Agg)
	if err != nil {
		return guest.Terminal(err)
	}
	return out.Emit(guest.Output{Key: r.Key, Value: fmt.Appendf(nil, "%d %d %d", r.Start, r.End, n)})
}

func init() {
	guest.Process(func(r *guest.Record, out guest.Emitter) error {
		w, err := get()
		if err != nil {
			return err
		}
		return w.Add(window.Bind(guest.Handle()), r, out)
	})
	guest.ProcessTimers(func(f *guest.Firing, out guest.Emitter) error {
		w, err := get()
		if err != nil {
			return err
		}
		return w.Fire(window.Bind(guest.Handle()), f.Key, f.At, out)
	})
}
