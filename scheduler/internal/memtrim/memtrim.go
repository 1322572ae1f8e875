// Package memtrim hands the memory of module instances given back to the
// operating system soon after they are closed, rather than whenever Go's
// garbage collector next gets to it.
//
// A closed instance's linear memory is garbage on the Go heap. Until the
// collector runs, the process keeps it, and the collector's next goal was
// set while those instances were alive: after a burst that borrowed a dozen
// instances, the host's resident memory went on growing for ~25 s after
// they were given back before it fell (RATIONALE.md, "Giving memory back").
// A Trimmer runs one collection (runtime.GC) once instances stop being
// closed, at most once per Gap; Go's background scavenger then returns the
// freed pages down to about the heap's new goal.
package memtrim

import (
	"runtime"
	"sync/atomic"
	"time"
)

const (
	// Settle is how long after the last instance closed a Trimmer waits:
	// a pool gives its instances back one by one, an idle timeout apart
	// at most, and a rebalance closes a task's instances together.
	Settle = time.Second
	// Gap is the least time between two trims: each is one collection
	// cycle more than the record path's own.
	Gap = 10 * time.Second
)

// Trimmer returns the memory of closed instances to the operating system.
// Closed is safe for concurrent use; Stop is called once.
type Trimmer struct {
	settle, gap time.Duration
	trim        func()
	kick        chan struct{} // Closed: an instance closed (buffered 1)
	stop        chan struct{}
	done        chan struct{}
	trims       atomic.Int64
}

// Start starts a Trimmer that runs runtime.GC Settle after the last
// instance closed, at most once per Gap. Its goroutine runs until Stop.
func Start() *Trimmer { return start(Settle, Gap, runtime.GC) }

func start(settle, gap time.Duration, trim func()) *Trimmer {
	t := &Trimmer{settle: settle, gap: gap, trim: trim,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go t.run()
	return t
}

// Closed says an instance was closed: its memory is garbage now.
func (t *Trimmer) Closed() {
	select {
	case t.kick <- struct{}{}:
	default: // one is pending: this one joins it
	}
}

// Trims is how many trims ran.
func (t *Trimmer) Trims() int64 { return t.trims.Load() }

// Stop ends the Trimmer's goroutine and waits for it; a trim running
// finishes first.
func (t *Trimmer) Stop() {
	close(t.stop)
	<-t.done
}

func (t *Trimmer) run() {
	defer close(t.done)
	var last time.Time // the previous trim
	for {
		select {
		case <-t.stop:
			return
		case <-t.kick:
		}
		// Wait until no instance closed for settle, and gap since the
		// previous trim.
		wait := max(t.settle, time.Until(last.Add(t.gap)))
		timer := time.NewTimer(wait)
	settling:
		for {
			select {
			case <-t.stop:
				timer.Stop()
				return
			case <-t.kick:
				timer.Reset(max(t.settle, time.Until(last.Add(t.gap))))
			case <-timer.C:
				break settling
			}
		}
		t.trim()
		t.trims.Add(1)
		last = time.Now()
	}
}
