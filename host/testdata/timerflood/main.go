// Command timerflood is a test processor of the bounds on event-time
// timers (ABI.md §4.2): a record with the header "timers.n" sets that many
// timers of its key, at "timers.at" (decimal milliseconds, or "max" and "min"
// for math.MaxInt64 and math.MinInt64) plus i·"timers.step" for i = 0, 1, ... (a step of -1
// counts down from the at), and fails with the host's answer at the first
// refusal. Every record that succeeds emits "record <timestamp>"; every
// firing emits "fired <at> <stream time>".
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o timerflood.wasm .
package main

import (
	"fmt"
	"math"
	"strconv"

	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/window"
)

func main() {}

func init() {
	guest.Process(process)
	guest.ProcessTimers(fire)
}

func header(r *guest.Record, name string) (int64, error) {
	v, ok := r.Header(name)
	switch {
	case !ok:
		return 0, nil
	case string(v) == "max":
		return math.MaxInt64, nil
	case string(v) == "min":
		return math.MinInt64, nil
	}
	return strconv.ParseInt(string(v), 10, 64)
}

func process(r *guest.Record, em guest.Emitter) error {
	n, err := header(r, "timers.n")
	if err != nil {
		return guest.Terminal(err)
	}
	at, err := header(r, "timers.at")
	if err != nil {
		return guest.Terminal(err)
	}
	step, err := header(r, "timers.step")
	if err != nil {
		return guest.Terminal(err)
	}
	h := window.Bind(guest.Handle())
	for i := range n {
		if err := h.SetTimer(r.Key, at+i*step); err != nil {
			return guest.Terminal(fmt.Errorf("timer %d of %d: %w", i, n, err))
		}
	}
	return em.Emit(guest.Output{Key: r.Key, Value: fmt.Appendf(nil, "record %d", r.Timestamp.UnixMilli())})
}

func fire(f *guest.Firing, em guest.Emitter) error {
	return em.Emit(guest.Output{Key: f.Key, Value: fmt.Appendf(nil, "fired %d %d", f.At, f.StreamTime)})
}
