package sizing

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

// Tuning of climbLimit (RATIONALE.md, "Self-sizing pools").
const (
	// A measurement closes once it lasted its window and one latency
	// (the last measured), with asyncMinSamples records decided; or after
	// asyncMaxWindow (or one latency, if longer) with one.
	asyncWindow     = 250 * time.Millisecond
	asyncFastWindow = 100 * time.Millisecond // the window while doubling the limit nearly doubles the rate...
	asyncLinear     = 1.6                    // ..."nearly"
	asyncSlowWindow = 500 * time.Millisecond // the window with the latency over asyncHigh of its lowest
	asyncMinSamples = 10
	asyncMaxWindow  = time.Second

	asyncUp      = 2.0  // a try up doubles the limit...
	asyncGain    = 1.03 // ...and is kept when the rate rose by this factor (and by twice a count's uncertainty)
	asyncKeep    = 0.95 // a try down halves it, and is kept while the rate stays above this share of the descent's highest (or 1-2/√n)
	asyncHigh    = 1.6  // a latency over this factor of its lowest, after a change: try down at once
	asyncRelief  = 0.8  // a try up that brings the latency to this share, the rate held, is kept too
	asyncSameLat = 1.25 // with pools above their minimum, so is one that keeps it within this factor

	// After a try that lost, the same try waits asyncHold (tries up: from
	// the same limit; asyncCheapHold if it cost no rate or followed a try
	// that nearly doubled it), doubling with each further loss up to
	// asyncMaxHold. A measurement whose latency is asyncChanged off the
	// last one at the same limit (the service or the input changed)
	// forgets the losses.
	asyncHold      = 2 * time.Second
	asyncCheapHold = 500 * time.Millisecond
	asyncMaxHold   = 16 * time.Second
	asyncChanged   = 2.0
	// A try down at least this often, even with nothing changed: fewer in
	// flight may carry as much (the input slowed), and it re-measures the
	// lowest latency.
	asyncDownEvery = 10 * time.Second
)

// climbLimit is a pipeline's async.max_in_flight: auto controller. Each
// measurement is the records decided after waiting on asynchronous
// operations over a window: their rate and mean latency at one limit. It
// climbs the rate:
//
//   - a try up (twice the limit, when an instance was held back by it) is
//     kept if the rate rose by asyncGain, and the next try up follows at
//     once; otherwise the limit goes back;
//   - a try down (half the limit) is kept if the rate stayed within
//     asyncKeep of the highest of the descent, and the next try down
//     follows; otherwise the limit goes back. Tries down come at once when
//     the latency moved far and is over asyncHigh of its lowest (a service
//     overloaded: its rate flat, its latency growing with what is in
//     flight), else every asyncDownEvery.
//
// So the limit settles where twice as many no longer pay and half as many
// cost. It is not safe for concurrent use: Async wraps it.
type climbLimit struct {
	min, max int
	limit    int
	start    int // the limit at the start
	// grows: the pipeline's pools can borrow instances, so a limit that
	// holds an instance back makes records wait for another one and the
	// pool grows where the limit could have. With fixed pools only the
	// rate counts.
	grows bool
	// above: the pools hold instances above their minimum now (set by
	// Async from the pipeline's flow loop).
	above bool

	from, winStart time.Time // measuring from (records decided before are the previous limit's)
	n              int
	sum            time.Duration
	limited        bool // an instance was held back by the limit during the window
	fast           bool // the last try up nearly doubled the rate

	ref    measure       // the last measurement at the limit in force before a try
	try    int           // +1 trying twice the limit, -1 half, 0 not trying
	before int           // the limit before the try
	top    float64       // the highest rate of the current descent
	upLost map[int]*lost // the tries up that lost, by the limit they were made from
	dnLost lost          // the tries down that lost
	lastDn time.Time     // the last try down
	base   time.Duration // the lowest latency measured (0: none yet)
	moved  bool          // the latency moved far since the last try down that lost
	// dnForLatency: the current descent answers a latency over asyncHigh
	// (else it is the periodic one).
	dnForLatency bool
	Reason       string // why the limit last changed
	Detail       string // the same, with its figures
}

// measure is one window's rate (records decided per second) and mean
// latency (first call to decision).
type measure struct {
	rate float64
	lat  time.Duration
	n    int // records decided
}

func (m measure) String() string {
	return fmt.Sprintf("%.0f records/s at %s", m.rate, m.lat.Round(100*time.Microsecond))
}

func newClimbLimit(min, max, initial int, grows bool) *climbLimit {
	return &climbLimit{min: min, max: max, limit: clampInt(initial, min, max), start: clampInt(initial, min, max), grows: grows,
		upLost: map[int]*lost{}, Reason: ReasonStart, Detail: "start"}
}

func clampInt(v, lo, hi int) int { return max(lo, min(v, hi)) }

// current is the limit in force.
func (l *climbLimit) current() int { return l.limit }

// observe takes the latency of one record decided after waiting on
// asynchronous operations; limited says whether an instance was held back
// by the limit since the last observation. It reports whether the limit
// changed.
func (l *climbLimit) observe(now time.Time, rtt time.Duration, limited bool) bool {
	if l.from.IsZero() {
		l.from, l.winStart, l.lastDn = now, now, now
	}
	if now.Before(l.from) {
		return false
	}
	l.n++
	l.sum += rtt
	l.limited = l.limited || limited
	el := now.Sub(l.winStart)
	win := asyncWindow
	switch {
	case l.fast:
		// The rate follows the limit: a measurement's noise is small
		// beside the next try's gain, and a start from 4 in flight gets
		// to hundreds in about a second.
		win = asyncFastWindow
	case l.try >= 0 && l.base > 0 && l.ref.lat > time.Duration(asyncHigh*float64(l.base)):
		// Past the knee the gains are a few percent: measure longer
		// (but not a descent, which answers an overloaded service).
		win = asyncSlowWindow
	}
	span := max(win, l.ref.lat)
	if !(el >= span && l.n >= asyncMinSamples) && el < max(asyncMaxWindow, span) {
		return false
	}
	m := measure{rate: float64(l.n) / max(el, time.Millisecond).Seconds(), lat: max(l.sum/time.Duration(l.n), 1), n: l.n}
	limitedWin := l.limited
	l.winStart, l.n, l.sum, l.limited = now, 0, 0, false
	if l.base == 0 || m.lat < l.base {
		l.base = m.lat
	}
	old := l.limit
	l.step(now, m, limitedWin)
	if l.limit != old {
		// Records decided within one latency of the change started under
		// the old limit: leave them out of the next measurement. Two
		// after a rise: the new operations open connections, and the
		// records they admit queue behind the old ones.
		skip := m.lat
		if l.limit > old {
			skip *= 2
		}
		l.from = now.Add(skip)
		l.winStart = l.from
	}
	return l.limit != old
}

// step decides on one measurement.
func (l *climbLimit) step(now time.Time, m measure, limited bool) {
	switch l.try {
	case +1:
		l.endUp(now, m, limited)
	case -1:
		l.endDown(now, m, limited)
	default:
		if l.ref.rate > 0 && far(float64(m.lat), float64(l.ref.lat)) {
			// The service or the input changed: what the last tries
			// found no longer holds.
			clear(l.upLost)
			l.dnLost, l.moved = lost{}, true
		}
		l.ref, l.top = m, m.rate
		l.next(now, m, limited, 0)
	}
}

// endUp ends a try of twice the limit on its measurement m: the limit is
// kept, and the climb goes on, or goes back, and the try is held back a
// while.
func (l *climbLimit) endUp(now time.Time, m measure, limited bool) {
	l.try = 0
	linear := l.fast
	l.fast = m.rate >= l.ref.rate*asyncLinear
	if l.upWins(m, limited) {
		l.set(ReasonGain, fmt.Sprintf("%d in flight: %s, was %s at %d", l.limit, m, l.ref, l.before))
		l.ref, l.top = m, m.rate
		l.next(now, m, limited, +1)
		return
	}
	l.set(ReasonNoGain, fmt.Sprintf("%d in flight: %s, no more than %s at %d", l.limit, m, l.ref, l.before))
	// A try that cost no rate may be repeated sooner than one that
	// did, and so may one right after a try that nearly doubled the
	// rate: on a host still warming up (the first seconds of a run,
	// its heap growing) one window's stall looks like a knee.
	first := asyncHold
	if linear || m.rate >= l.ref.rate*asyncKeep {
		first = asyncCheapHold
	}
	h := l.upLost[l.before]
	if h == nil {
		h = &lost{}
		l.upLost[l.before] = h
	}
	h.record(now, first)
	l.limit = l.before
}

// upWins reports whether the try up that measured m is kept.
func (l *climbLimit) upWins(m measure, limited bool) bool {
	// A count of n records is uncertain by about √n: the gain must
	// be over twice that as well as over asyncGain.
	// Kept too with the rate held if the latency fell (the limit kept
	// operations queued), or, where pools grow, if twice the limit no
	// longer holds any instance back: a limit that binds under an
	// input the pipeline keeps up with only makes records wait for an
	// instance, and the pool grows for them where the limit could
	// have. (With fixed pools a try up that costs rate is not kept:
	// past the knee each one would cost a little more.)
	//
	// And kept up to the limit's start, with pools above their
	// minimum, when the rate and the latency held: by Little's law as
	// many operations were in flight as before, so twice the limit
	// only let the instances that had records take more of them, where
	// the records would otherwise wait for another instance, and the
	// borrowed ones can retire. Without this, a limit that fell below
	// what the input needs stays there, the pools grown for it. (Past
	// a knee twice the limit queues: the latency rises with it, and
	// the try goes back; above the start only a gain counts.)
	held := m.rate >= l.ref.rate*asyncKeep
	regain := l.above && l.limit <= l.start && m.lat <= time.Duration(asyncSameLat*float64(l.ref.lat))
	relief := held && ((l.grows && (!limited || regain)) || m.lat <= time.Duration(asyncRelief*float64(l.ref.lat)))
	return relief || m.rate >= l.ref.rate*max(asyncGain, 1+2/math.Sqrt(float64(m.n)))
}

// endDown ends a try of half the limit on its measurement m: the limit is
// kept, and the descent goes on, or goes back, and the descent is held
// back a while.
func (l *climbLimit) endDown(now time.Time, m measure, limited bool) {
	l.try, l.fast = 0, false
	// The same uncertainty widens what "as many" means: at a few
	// hundred records/s a window's count varies by more than 5%.
	// With fixed pools a descent is judged on the rate alone. Where
	// pools grow, it also needs the halved limit to hold no instance
	// back, or to bring the latency down (the service queued what it
	// held, as an overloaded one does): a limit that holds instances
	// back with the latency unchanged only makes records wait for more
	// instances, and the pool grows where the limit shrank. That holds
	// for a descent for the latency too: a latency that moved for a
	// moment (a stall) does not make the service overloaded.
	relief := m.lat <= time.Duration(asyncRelief*float64(l.ref.lat))
	rateHeld := m.rate >= l.top*min(asyncKeep, 1-2/math.Sqrt(float64(m.n)))
	if rateHeld && (!l.grows || !limited || relief) {
		reason := ReasonFewer
		if l.dnForLatency {
			reason = ReasonLatencyRise
		}
		l.set(reason, fmt.Sprintf("%d in flight: %s, as many as %s at %d", l.limit, m, l.ref, l.before))
		l.ref, l.top = m, max(l.top, m.rate)
		l.next(now, m, limited, -1)
		return
	}
	reason, what := ReasonNeeded, "fewer than"
	switch {
	case rateHeld:
		what = "but instances held back by it, against"
	case float64(m.lat)*1.2 >= float64(l.ref.lat):
		// Half as many in flight, fewer records decided, and the
		// latency no lower: it is the service's own, not a queue's.
		l.base, reason = m.lat, ReasonRebase
	}
	l.set(reason, fmt.Sprintf("%d in flight: %s, %s %s at %d", l.limit, m, what, l.ref, l.before))
	l.dnLost.record(now, asyncHold)
	l.moved = false
	l.limit = l.before
}

// next starts a try if one is due, from the measurement m at the limit in
// force; dir is the direction of a try just kept (0: none), which goes on.
func (l *climbLimit) next(now time.Time, m measure, limited bool, dir int) {
	canDown := l.limit > l.min && !l.dnLost.blocks(now)
	canUp := limited && l.limit < l.max && (l.upLost[l.limit] == nil || !l.upLost[l.limit].blocks(now))
	// A latency well over its lowest calls for a try down at once only
	// after a change: past the knee of a host whose cores are the bound
	// it stays high at the best limit, and trying half of it every few
	// seconds costs rate for nothing.
	high := l.moved && m.lat > time.Duration(asyncHigh*float64(l.base))
	due := high || now.Sub(l.lastDn) >= asyncDownEvery
	switch {
	case dir > 0 && canUp, dir == 0 && canUp && !(canDown && due):
		l.try, l.before = +1, l.limit
		l.limit = min(l.max, int(float64(l.limit)*asyncUp))
	case dir < 0 && canDown, dir == 0 && canDown && due:
		if dir == 0 {
			l.dnForLatency = high
		}
		l.try, l.before, l.lastDn = -1, l.limit, now
		l.limit = max(l.min, l.limit/2)
	}
}

// lost holds a try back after it lost: for first (asyncHold or
// asyncCheapHold) after the first loss, doubling with each further one up
// to asyncMaxHold. A try that wins does not shorten the wait (near the top
// the rate's noise makes tries win and lose by chance); only a change of
// the service or the input does (the losses are forgotten).
type lost struct {
	until time.Time
	hold  time.Duration
}

func (h *lost) record(now time.Time, first time.Duration) {
	h.hold = max(h.hold, first)
	h.until, h.hold = now.Add(h.hold), min(2*h.hold, asyncMaxHold)
}

func (h *lost) blocks(now time.Time) bool { return now.Before(h.until) }

// far reports whether a and b differ by more than asyncChanged.
func far(a, b float64) bool { return a > asyncChanged*b || b > asyncChanged*a }

func (l *climbLimit) set(reason, detail string) {
	l.Reason, l.Detail = reason, detail
}

// Async is a pipeline's async.max_in_flight: auto: its climbLimit, fed by
// the workers of every task, and the limit in force for them to read
// without a lock. mu is a leaf: taken with no other lock held.
type Async struct {
	Limit atomic.Int64 // the operations in flight per instance
	Held  atomic.Bool  // an instance was held back by Limit since the last observation
	Above atomic.Bool  // some task holds instances above instances.min (the flow loop sets it)

	mu sync.Mutex
	l  *climbLimit
}

// NewAsync sizes a pipeline's operations in flight per instance up to max;
// grows says whether its pools can borrow instances.
func NewAsync(max int, grows bool) *Async {
	a := &Async{l: newClimbLimit(1, max, config.AutoAsyncInitialInFlight, grows)}
	a.Limit.Store(int64(a.l.current()))
	return a
}

// Observe takes the latency of a record decided after waiting on
// asynchronous operations.
func (a *Async) Observe(now time.Time, d time.Duration) {
	held := a.Held.Swap(false)
	a.mu.Lock()
	a.l.above = a.Above.Load()
	if a.l.observe(now, d, held) {
		a.Limit.Store(int64(a.l.current()))
	}
	a.mu.Unlock()
}

// State returns the limit and why it last changed.
func (a *Async) State() (limit int, reason, detail string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.l.current(), a.l.Reason, a.l.Detail
}
