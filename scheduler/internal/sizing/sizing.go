// Package sizing holds the controllers of self-sizing pools: Pool chooses a
// partition task's instances (instances: auto), Async the asynchronous
// operations in flight per instance (async.max_in_flight: auto). Both are
// pure: fed with measurements, tested without a broker.
package sizing

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/config"
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
//   - latencyLimit chooses the asynchronous operations in flight per
//     instance (async.max_in_flight: auto) from the records' latency (first
//     call to decision) against its recent minimum, the baseline: ×1.25
//     while the latency stays within latencyGrow of the baseline and an
//     instance was at the limit, ×0.8 when it passes latencyShrink, nothing
//     in between. The baseline is the lowest window latency, re-measured
//     at half the limit when no window came near it for baselineSpan, so a
//     service that became slower for good is re-learnt within that span
//     without the baseline creeping up with the controller's own queueing.

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
	ReasonLatencyOK   = "latency_at_baseline"
	ReasonLatencyRise = "latency_rise"
	ReasonProbe       = "baseline_probe" // the limit halved for a moment to re-measure the latency baseline
	ReasonRebase      = "baseline_reset" // at the minimum and still slow: the service itself is slower
)

// PoolReasons and AsyncReasons are every reason each controller gives (the
// metrics export them as a state set, one series per reason), ReasonFixed
// that of a fixed async.max_in_flight.
var (
	PoolReasons  = []string{ReasonStart, ReasonQueueing, ReasonCores, ReasonIdle}
	AsyncReasons = []string{ReasonStart, ReasonLatencyOK, ReasonLatencyRise, ReasonProbe, ReasonRebase, ReasonFixed}
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

// Tuning of latencyLimit.
const (
	latencyWindow     = 100 * time.Millisecond // a window closes after this long...
	latencyMinSamples = 10                     // ...with at least this many records decided (or after latencyMaxWindow with one)
	latencyMaxWindow  = time.Second
	latencyGrow       = 1.2  // grow while the window's latency is within this factor of the baseline
	latencyShrink     = 1.6  // shrink once it is over this factor
	latencyUp         = 1.25 // growth factor (at least +1)
	latencyDown       = 0.8  // decrease factor
	// The baseline is the lowest window latency seen, re-measured when no
	// window came within latencyGrow of it for baselineSpan: the limit is
	// halved for probeWindows windows and the last one's latency is the
	// new baseline (BBR's ProbeRTT). It is also re-measured at once when
	// the limit is at its minimum and the latency still over latencyShrink
	// of it: the service itself became slower.
	baselineSpan = 10 * time.Second
	probeWindows = 2
)

// latencyLimit is a pipeline's async.max_in_flight: auto controller. It is
// not safe for concurrent use: Async wraps it.
type latencyLimit struct {
	min, max int
	limit    float64

	winStart time.Time
	n        int
	sum      time.Duration
	limited  bool // an instance was held back by the limit during the window

	base    time.Duration // the baseline (0: none yet)
	baseAt  time.Time     // when a window last came within latencyGrow of it
	probing int           // windows of the probe left (0: not probing)
	saved   float64       // the limit before the probe

	last      time.Duration // the last window's mean latency
	Reason    string
	Detail    string
	ChangedAt time.Time
	changes   int64
}

func newLatencyLimit(min, max, initial int) *latencyLimit {
	return &latencyLimit{min: min, max: max, limit: float64(clampInt(initial, min, max)), Reason: ReasonStart, Detail: "start"}
}

func clampInt(v, lo, hi int) int { return max(lo, min(v, hi)) }

// current is the limit in force.
func (l *latencyLimit) current() int { return clampInt(int(math.Round(l.limit)), l.min, l.max) }

// observe takes the latency of one record decided after waiting on
// asynchronous operations; limited says whether an instance was held back
// by the limit since the last observation. It reports whether the limit
// changed.
func (l *latencyLimit) observe(now time.Time, rtt time.Duration, limited bool) bool {
	if l.winStart.IsZero() {
		l.winStart = now
	}
	l.n++
	l.sum += rtt
	l.limited = l.limited || limited
	el := now.Sub(l.winStart)
	if !(el >= latencyWindow && l.n >= latencyMinSamples) && el < latencyMaxWindow {
		return false
	}
	mean := max(l.sum/time.Duration(l.n), 1)
	limitedWin := l.limited
	l.winStart, l.n, l.sum, l.limited = now, 0, 0, false
	l.last = mean
	old := l.current()
	if l.probing > 0 {
		if l.probing--; l.probing > 0 {
			return false
		}
		l.base, l.baseAt, l.limit = mean, now, l.saved
		l.set(now, ReasonProbe, fmt.Sprintf("baseline re-measured at half the limit: %s", mean.Round(100*time.Microsecond)))
		return l.current() != old
	}
	if l.base == 0 || mean < l.base {
		l.base = mean
	}
	ratio := float64(mean) / float64(l.base)
	if ratio <= latencyGrow {
		l.baseAt = now
	}
	fig := func(what string) string {
		return fmt.Sprintf("latency %s, %.1f× its baseline %s%s", mean.Round(100*time.Microsecond), ratio, l.base.Round(100*time.Microsecond), what)
	}
	switch {
	case ratio > latencyShrink && old == l.min:
		// As few in flight as allowed and still slow: the service is.
		l.base, l.baseAt = mean, now
		l.set(now, ReasonRebase, fig(" at the minimum: the new baseline"))
	case now.Sub(l.baseAt) >= baselineSpan:
		l.saved, l.probing = l.limit, probeWindows
		l.limit = max(float64(l.min), l.limit/2)
		l.set(now, ReasonProbe, fig(": probing the baseline at half the limit"))
	case ratio > latencyShrink:
		l.limit = max(float64(l.min), l.limit*latencyDown)
		l.set(now, ReasonLatencyRise, fig(""))
	case ratio <= latencyGrow && limitedWin:
		l.limit = min(float64(l.max), max(l.limit*latencyUp, l.limit+1))
		if l.current() != old {
			l.set(now, ReasonLatencyOK, fig(", instances at the limit"))
		}
	}
	return l.current() != old
}

func (l *latencyLimit) set(now time.Time, reason, detail string) {
	l.Reason, l.Detail, l.ChangedAt = reason, detail, now
	l.changes++
}

// Async is a pipeline's async.max_in_flight: auto: its latencyLimit,
// fed by the workers of every task, and the limit in force for them to
// read without a lock. mu is a leaf: taken with no other lock held.
type Async struct {
	Limit atomic.Int64 // the operations in flight per instance
	Held  atomic.Bool  // an instance was held back by Limit since the last observation

	mu sync.Mutex
	l  *latencyLimit
}

func NewAsync(max int) *Async {
	a := &Async{l: newLatencyLimit(1, max, config.AutoAsyncInitialInFlight)}
	a.Limit.Store(int64(a.l.current()))
	return a
}

// observe takes the latency of a record decided after waiting on
// asynchronous operations.
func (a *Async) Observe(now time.Time, d time.Duration) {
	held := a.Held.Swap(false)
	a.mu.Lock()
	if a.l.observe(now, d, held) {
		a.Limit.Store(int64(a.l.current()))
	}
	a.mu.Unlock()
}

// state returns the limit and why it last changed.
func (a *Async) State() (limit int, reason, detail string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.l.current(), a.l.Reason, a.l.Detail
}
