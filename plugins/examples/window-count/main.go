// Command window-count is a windowed processor on the Go SDK's windows
// (abi/guest/window) and the host's event-time timers (ABI.md §4.2): it
// counts each key's records per window of event time — tumbling by
// default, hopping or session windows as its environment says — and, once
// a window has closed (stream time reached its end plus the grace; a
// session's end plus the gap and the grace), emits one final result: the
// key, and the value "<start> <end> <count>" (milliseconds; end exclusive
// for time windows, inclusive for sessions), like Kafka Streams'
// windowedBy(TimeWindows.ofSizeAndGrace(size, grace)).count() with
// EmitStrategy.onWindowClose(). A record for a closed window is late:
// counted and dropped, or sent unchanged to the topic WINDOW_LATE_TOPIC
// names (with the header window.late; the pipeline's allowed_outputs must
// list it). The pipeline needs state.enabled and ordering: partition (the
// host refuses the module otherwise).
//
// Its environment sets the windows (the pipeline's env): WINDOW_KIND
// (tumbling, hopping or session; tumbling by default), WINDOW_SIZE (a
// time window's size or a session's gap), WINDOW_ADVANCE (hopping: the
// size by default) and WINDOW_GRACE, Go durations (1m and 10s by
// default; one that does not parse fails the record, naming it), and
// WINDOW_LATE_TOPIC (none by default). The scheduler's
// tests compare its read-committed output with internal/windowmodel's on
// random input (scheduler/timers_window_test.go); tests/windiff runs each
// kind against Kafka Streams and the model.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/window"
)

func main() {}

// counter is what a record and a timer firing go to: tumbling and
// hopping windows (window.TimeWindows) and sessions
// (window.SessionWindows) alike.
type counter interface {
	Add(h window.Host, r *guest.Record, out guest.Emitter) error
	Fire(h window.Host, key []byte, at int64, out guest.Emitter) error
}

// windows are the windows, made at the first record from the environment
// (a module's environment is read at run time).
var windows counter

// envDuration reads the duration name (def when unset); one that does not
// parse is an error naming it, never a silent default.
func envDuration(name string, def time.Duration) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s %q: a Go duration such as 1m or 10s", name, v)
	}
	return d, nil
}

func made() (counter, error) {
	if windows != nil {
		return windows, nil
	}
	w, err := fromEnv()
	if err != nil {
		return nil, guest.Terminal(err)
	}
	windows = w
	return w, nil
}

// fromEnv makes the windows the environment names.
func fromEnv() (counter, error) {
	size, err := envDuration("WINDOW_SIZE", time.Minute)
	if err != nil {
		return nil, err
	}
	grace, err := envDuration("WINDOW_GRACE", 10*time.Second)
	if err != nil {
		return nil, err
	}
	opt := window.Options{
		Name:      "count",
		Grace:     grace,
		OnClose:   emitCount,
		LateTopic: os.Getenv("WINDOW_LATE_TOPIC"),
	}
	switch kind := os.Getenv("WINDOW_KIND"); kind {
	case "", "tumbling":
		return window.Tumbling(size, opt)
	case "hopping":
		advance, err := envDuration("WINDOW_ADVANCE", size)
		if err != nil {
			return nil, err
		}
		return window.Hopping(size, advance, opt)
	case "session":
		return window.Sessions(size, opt)
	default:
		return nil, fmt.Errorf("WINDOW_KIND %q: tumbling, hopping or session", kind)
	}
}

// emitCount emits a closed window's count.
func emitCount(r window.Result, out guest.Emitter) error {
	n, err := window.DecodeCount(r.Agg)
	if err != nil {
		return guest.Terminal(err)
	}
	// "<start> <end> <count>", as fmt's "%d %d %d" without its cost.
	v := strconv.AppendInt(make([]byte, 0, 48), r.Start, 10)
	v = strconv.AppendInt(append(v, ' '), r.End, 10)
	v = strconv.AppendUint(append(v, ' '), n, 10)
	return out.Emit(guest.Output{Key: r.Key, Value: v})
}

// processor is what runs for a record and for a due timer, given the
// Host of that call: the module's (wasm.go) or a test's in-memory
// partition (windowtest).
type processor struct{}

func (processor) Record(h window.Host, r *guest.Record, out guest.Emitter) error {
	w, err := made()
	if err != nil {
		return err
	}
	return w.Add(h, r, out)
}

func (processor) Timer(h window.Host, key []byte, at int64, out guest.Emitter) error {
	w, err := made()
	if err != nil {
		return err
	}
	return w.Fire(h, key, at, out)
}
