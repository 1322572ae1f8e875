package partition

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

// runHandBack is how long a run under ordering key or none may go on
// before the records it has not yet given to the guest go back to the
// task's queues, for other instances to run: a slow record holds up the
// records picked with it for at most this long, not for its whole
// deadline. (RATIONALE.md, "Runs of records: what the engine takes in one
// pick".)
const runHandBack = 10 * time.Millisecond

// gateClosed marks a run's gate closed: the records after the ones taken
// are no longer the run's.
const gateClosed = math.MaxUint32/2 + 1

// runGate decides, between a worker running a run and the hand-back timer,
// which side has each record of the run not yet given to the guest. taken
// is how many records the guest was given (record 0 before the call), with
// gateClosed set once the rest left the run: a record is the guest's only
// if take counted it before the gate closed.
type runGate struct {
	taken atomic.Uint32
}

// open makes a run whose first record is taken.
func (g *runGate) open() { g.taken.Store(1) }

// take gives record i to the guest, unless the gate closed before it
// (host.Instance.GateBatch).
func (g *runGate) take(i int) bool {
	return g.taken.CompareAndSwap(uint32(i), uint32(i)+1)
}

// close closes the gate if it is open, and returns how many records were
// taken and whether this call closed it.
func (g *runGate) close() (taken int, closed bool) {
	for {
		v := g.taken.Load()
		if v&gateClosed != 0 {
			return int(v &^ gateClosed), false
		}
		if g.taken.CompareAndSwap(v, v|gateClosed) {
			return int(v), true
		}
	}
}

// handsBack reports whether the worker's runs may hand records back while
// they run: only when another instance could take them and be released
// before the slow record (ordering key or none, a pool of more than one,
// not exactly_once). Under ordering partition the run holds the
// partition's one lane, and its records wait for it in any case; under
// exactly_once nothing behind the slow record enters a transaction before
// it, and each record's job is reserved at enqueue (releaser.claim), one
// object that only one worker may hold.
func (t *Task) handsBack() bool {
	return t.d.Config.Ordering != config.OrderPartition && t.d.Config.Instances.Max > 1 &&
		(t.rel == nil || !t.rel.byOffset)
}

// armHandBack starts the run's hand-back timer (run is the run, as picked;
// gen its number): after runHandBack, the records not yet given to the
// guest go back to the front of their queues.
func (w *worker) armHandBack(run []picked) *time.Timer {
	t := w.t
	t.mu.Lock()
	w.runs.runGen++
	gen := w.runs.runGen
	w.runs.running = run
	t.mu.Unlock()
	w.runs.gate.open()
	return time.AfterFunc(runHandBack, func() { w.handBack(gen) })
}

// handBack is the hand-back timer of run gen: if the run still goes on,
// its records not yet taken leave it, back to the front of their queues.
func (w *worker) handBack(gen uint64) {
	t := w.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.runs.runGen != gen || w.runs.running == nil {
		return // the run ended
	}
	taken, closed := w.runs.gate.close()
	if !closed || taken >= len(w.runs.running) {
		return
	}
	t.unpickLocked(w.runs.running[taken:])
	t.d.Stats.HandedBack.Add(int64(len(w.runs.running) - taken))
}

// endHandBack ends a run's hand-back (timer from armHandBack): it closes
// the gate and returns how many of the run's records are still the
// worker's (the rest went back).
func (w *worker) endHandBack(timer *time.Timer, run []picked) int {
	timer.Stop()
	t := w.t
	t.mu.Lock()
	defer t.mu.Unlock()
	w.runs.running = nil
	if taken, closed := w.runs.gate.close(); !closed {
		return taken // the timer handed back the rest
	}
	return len(run)
}
