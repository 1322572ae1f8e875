// Package sizing holds the controllers of self-sizing pools: Pool chooses a
// partition task's instances (instances: auto), Async the asynchronous
// operations in flight per instance (async.max_in_flight: auto). Both are
// pure: fed with measurements, tested without a broker.
package sizing

import (
	"fmt"
	"math"
	"time"
)

// Self-sizing (RATIONALE.md, "Self-sizing pools"): two controllers, pure
// types fed with measurements so that they can be tested without a broker.
//
//   - Pool chooses a partition task's maximum instances (instances:
//     auto) every Window, from whether records waited for an instance
//     while the pool was at that maximum (queueing) and from how long its
//     guest calls waited for a core against how long they ran. It is AIMD
//     with a dead band: +1 while records queue and calls do not wait for a
//     core, ×0.75 (at least −1) when calls wait for a core, nothing in
//     between; after a cut it does not grow back to the size it cut from
//     for poolCeilingHold.
//   - climbLimit (async.go) chooses the asynchronous operations in flight
//     per instance (async.max_in_flight: auto) by climbing the throughput:
//     it tries twice the limit and keeps it if the records decided per
//     second rose, tries half and keeps it if they did not fall, and
//     tries half at once when the records' latency is well over its
//     lowest.

// Tuning of Pool.
const (
	Window          = 250 * time.Millisecond // one decision per window...
	MinWindow       = 50 * time.Millisecond  // ...or sooner, once records waited at the target Early times
	Early           = 2                      // (and EarlyCalls calls per instance were accounted)
	EarlyCalls      = 2
	poolCoreGrow    = 0.10             // grow only while calls wait for a core less than this share of their time
	poolCoreShrink  = 0.30             // shrink when they wait more
	poolCeilingHold = 30 * time.Second // after a cut, the size cut from is not tried again for this long...
	poolIdleCores   = 0.5              // ...unless this many cores sat idle on average over the window
)

// Reasons for a size change, as the metrics' reason attribute gives them.
const (
	ReasonStart       = "start"
	ReasonQueueing    = "queueing"        // records waited for an instance with the pool at its target
	ReasonCores       = "core_contention" // calls waited for a core: more instances cannot run
	ReasonIdle        = "idle"            // instances retired after idle_timeout: the target follows
	ReasonGain        = "throughput_gain" // twice the limit decided more records per second: kept
	ReasonNoGain      = "no_gain"         // twice the limit decided no more: back
	ReasonLatencyRise = "latency_rise"    // latency well over its lowest and half the limit decided as many: kept
	ReasonFewer       = "fewer_suffice"   // the periodic try of half the limit decided as many: kept
	ReasonNeeded      = "needed"          // half the limit decided fewer: back
	ReasonRebase      = "baseline_reset"  // ...and its latency was no lower: the service itself is slower
)

// PoolReasons and AsyncReasons are every reason each controller gives (the
// metrics export them as a state set, one series per reason), ReasonFixed
// that of a fixed async.max_in_flight.
var (
	PoolReasons  = []string{ReasonStart, ReasonQueueing, ReasonCores, ReasonIdle}
	AsyncReasons = []string{ReasonStart, ReasonGain, ReasonNoGain, ReasonLatencyRise, ReasonFewer, ReasonNeeded, ReasonRebase, ReasonFixed}
)

// ReasonFixed is the async limit's reason when async.max_in_flight is a number.
const ReasonFixed = "fixed"

// Sample is what a task measured over one window.
type Sample struct {
	Capped    int           // times records waited grow_after with the pool at its target
	Wait, Run time.Duration // its guest calls' wait for a core, and their run time
	Workers   int           // its live workers at the end of the window
	Warm      int           // those of them whose instance is created
	// IdleCores is how many of the host's cores had no guest call to run,
	// on average over the window (every pipeline's calls counted).
	IdleCores float64
}

// Pool is a task's instances: auto controller.
type Pool struct {
	min, max     int       // the target's bounds
	Target       int       // the most instances the task may have now
	ceiling      int       // not grown to while before ceilingUntil
	ceilingUntil time.Time // zero: no ceiling
	Reason       string    // why Target last changed
	Detail       string    // the same, with its figures (status line)
	ChangedAt    time.Time
	changes      int64 // changes in all
}

func NewPool(min, max int) *Pool {
	return &Pool{min: min, max: max, Target: min, Reason: ReasonStart, Detail: "start at instances.min"}
}

// step takes one window's measurements and moves the target; it reports
// whether the target changed.
func (s *Pool) Step(now time.Time, m Sample) bool {
	core := 0.0
	if m.Wait+m.Run > 0 {
		core = float64(m.Wait) / float64(m.Wait+m.Run)
	}
	if !s.ceilingUntil.IsZero() && now.After(s.ceilingUntil) {
		s.ceiling, s.ceilingUntil = 0, time.Time{}
	}
	old := s.Target
	switch {
	case core > poolCoreShrink && s.Target > s.min:
		s.ceiling, s.ceilingUntil = s.Target, now.Add(poolCeilingHold)
		s.Target = max(s.min, min(s.Target-1, int(math.Ceil(float64(s.Target)*0.75))))
		s.set(now, ReasonCores, fmt.Sprintf("calls waited for a core %.0f%% of their time", core*100))
	case m.Capped > 0 && core < poolCoreGrow && s.Target < s.max && m.Workers >= s.Target &&
		m.Warm >= s.Target && m.Wait+m.Run > 0 && (s.ceiling == 0 || s.Target+1 < s.ceiling || m.IdleCores >= poolIdleCores):
		// Only once the last instance added runs calls: while it is being
		// created, the others' calls do not show what it will cost them.
		// A ceiling from an earlier cut stops growth only while the cores
		// are busy: once a core sits idle (other tasks drained), the
		// contention it was set for is gone.
		if m.IdleCores >= poolIdleCores {
			s.ceiling, s.ceilingUntil = 0, time.Time{}
		}
		s.Target++
		s.set(now, ReasonQueueing, fmt.Sprintf("records waited for an instance %d time(s); calls waited for a core %.0f%% of their time; %.1f core(s) idle", m.Capped, core*100, m.IdleCores))
	case m.Capped == 0 && s.Target > max(m.Workers, s.min):
		s.Target = max(m.Workers, s.min)
		s.set(now, ReasonIdle, "idle instances retired")
	}
	return s.Target != old
}

func (s *Pool) set(now time.Time, reason, detail string) {
	s.Reason, s.Detail, s.ChangedAt = reason, detail, now
	s.changes++
}
