// Command window-count is a windowed processor on the Go SDK's windows
// (abi/guest/window) and the host's event-time timers (ABI.md §4.2): it
// counts each key's records per tumbling window of event time and, once a
// window has closed (stream time reached its end plus the grace), emits
// one final result: the key, and the value "<start> <end> <count>"
// (milliseconds; end exclusive), like Kafka Streams'
// windowedBy(TimeWindows.ofSizeAndGrace(size, grace)).count() with
// EmitStrategy.onWindowClose(). A record for a closed window is late:
// counted and dropped, or sent unchanged to the topic WINDOW_LATE_TOPIC
// names (with the header window.late; the pipeline's allowed_outputs must
// list it). The pipeline needs state.enabled and ordering: partition (the
// host refuses the module otherwise).
//
// Its environment sets the windows (the pipeline's env): WINDOW_SIZE and
// WINDOW_GRACE, Go durations (1m and 10s by default), and
// WINDOW_LATE_TOPIC (none by default). The scheduler's
// tests compare its read-committed output with internal/windowmodel's on
// random input (scheduler/timers_window_test.go).
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/window"
)

func main() {}

// windows are the tumbling windows, made at the first record from the
// environment (a module's environment is read at run time).
var windows *window.TimeWindows

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
	}
	return def
}

func tumbling() (*window.TimeWindows, error) {
	if windows != nil {
		return windows, nil
	}
	w, err := window.Tumbling(envDuration("WINDOW_SIZE", time.Minute), window.Options{
		Name:      "count",
		Grace:     envDuration("WINDOW_GRACE", 10*time.Second),
		OnClose:   emitCount,
		LateTopic: os.Getenv("WINDOW_LATE_TOPIC"),
	})
	if err != nil {
		return nil, guest.Terminal(err)
	}
	windows = w
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

// processor is what runs for a record and for a due timer, given the
// Host of that call: the module's (wasm.go) or a test's in-memory
// partition (windowtest).
type processor struct{}

func (processor) Record(h window.Host, r *guest.Record, out guest.Emitter) error {
	w, err := tumbling()
	if err != nil {
		return err
	}
	return w.Add(h, r, out)
}

func (processor) Timer(h window.Host, key []byte, at int64, out guest.Emitter) error {
	w, err := tumbling()
	if err != nil {
		return err
	}
	return w.Fire(h, key, at, out)
}
