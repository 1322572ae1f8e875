package host

import (
	"time"

	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmstream/wasmstream/host/limits"
)

// The clocks a guest reads (WASI clock_time_get: the wall clock and the
// monotonic clock; the host gives guests no other time) tick at the engine's
// clock resolution, not at the nanosecond: a fine clock is what timing side
// channels measure with (a cache hit against a miss, another instance's
// work), and a processor has no use for one. Browsers coarsen
// performance.now() for the same reason. A guest can still count loop
// iterations between two ticks; coarsening raises the cost of a
// measurement, it does not make one impossible (RATIONALE.md, "Guest
// clocks").

// DefaultClockResolution is the resolution of the clocks guests read unless
// set (host.clock_resolution; package host/limits holds the number).
const DefaultClockResolution = limits.DefaultClockResolution

// MaxClockResolution bounds the resolution: a guest runtime sleeps and
// schedules by the monotonic clock, and one that does not move for longer
// keeps its record waiting.
const MaxClockResolution = limits.MaxClockResolution

// guestClock is the clocks of a module's instances. res is at least 1 ns.
type guestClock struct {
	res  int64
	base time.Time // the monotonic clock's zero (the engine's start)
}

// walltime is the wall clock, truncated to the resolution.
func (c guestClock) walltime() (sec int64, nsec int32) {
	ns := time.Now().UnixNano()
	ns -= ns % c.res
	return ns / 1e9, int32(ns % 1e9)
}

// nanotime is the monotonic clock since the engine started, truncated to
// the resolution: it never goes back.
func (c guestClock) nanotime() int64 {
	ns := int64(time.Since(c.base))
	return ns - ns%c.res
}

// SetClockResolution sets the resolution of the clocks guests read
// (host.clock_resolution; DefaultClockResolution until set), from 1 ns (the
// host's own clocks) to MaxClockResolution. Modules loaded afterwards use
// it.
func (e *Engine) SetClockResolution(d time.Duration) {
	e.clockRes.Store(int64(min(max(d, time.Nanosecond), MaxClockResolution)))
}

// clock is the clocks of a module loaded now.
func (e *Engine) clock() guestClock {
	return guestClock{res: e.clockRes.Load(), base: e.started}
}

func (c guestClock) resolution() sys.ClockResolution { return sys.ClockResolution(c.res) }
