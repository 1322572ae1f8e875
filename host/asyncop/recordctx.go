package asyncop

import (
	"context"
	"sync"
	"time"
)

// RecordContext is the context of one record's asynchronous operations,
// as the host makes it at the record's first async_start: it has the
// record's deadline and ends when Cancel is called (the record decided,
// expired, or its instance closed: the host cancels every record it
// drops). It costs at most one allocation (none inside the record's state:
// Init) where context.WithDeadline and each operation's context.AfterFunc
// cost nine of an HTTP lookup's twelve:
//
//   - no timer unless something waits on Done (a dial, net/http's way):
//     the deadline becomes an event only then. Err compares the clock with
//     the deadline, and ends the context once it has passed, so that Done,
//     once asked for, is closed whenever Err is not nil;
//   - Watch runs a function when the context ends, without an allocation
//     (http1's cancellation watch of a connection): the host's Cancel runs
//     it, on the host's goroutine. The deadline does not run it unless the
//     timer is armed: an operation bounds its own I/O by the deadline
//     (http1 sets it on the connection).
//
// It has no values and no parent. Safe for concurrent use.
type RecordContext struct {
	deadline time.Time

	mu      sync.Mutex
	err     error         // nil until it ends
	done    chan struct{} // made by the first Done; closed when it ends
	timer   *time.Timer   // ends it at the deadline, armed by the first Done
	watches []watch       // run when it ends
	first   [2]watch      // watches' first room: a record waits on one or two operations
	lastID  uint64
}

type watch struct {
	id uint64
	f  func()
}

// NewRecordContext is the context of a record whose deadline is deadline.
func NewRecordContext(deadline time.Time) *RecordContext {
	c := new(RecordContext)
	c.Init(deadline)
	return c
}

// Init makes c, a zero RecordContext (one inside the host's record state:
// no allocation of its own), the context of a record whose deadline is
// deadline. A RecordContext is initialised once: it is not reused after
// it ends (an operation may still hold it).
func (c *RecordContext) Init(deadline time.Time) {
	c.deadline = deadline
	c.watches = c.first[:0]
}

func (c *RecordContext) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *RecordContext) Value(any) any { return nil }

// Err is context.Canceled once Cancel was called, or
// context.DeadlineExceeded once the deadline has passed (which ends c).
func (c *RecordContext) Err() error {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err == nil && !time.Now().Before(c.deadline) {
		c.end(context.DeadlineExceeded)
		c.mu.Lock()
		err = c.err
		c.mu.Unlock()
	}
	return err
}

// Done is closed when c ends; the first call arms a timer for the
// deadline.
func (c *RecordContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		} else {
			c.timer = time.AfterFunc(time.Until(c.deadline), func() { c.end(context.DeadlineExceeded) })
		}
	}
	return c.done
}

// Cancel ends c (context.Canceled), unless it has ended: its watches run
// on the caller's goroutine.
func (c *RecordContext) Cancel() { c.end(context.Canceled) }

func (c *RecordContext) end(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
	if c.timer != nil {
		c.timer.Stop()
	}
	ws := c.watches
	c.watches = nil
	c.mu.Unlock()
	for _, w := range ws {
		w.f()
	}
	clear(ws)
}

// Watch has f run once when c ends, on the goroutine that ends it; f must
// not block. It returns the watch's id for Unwatch, or 0 when c has ended
// (f ran before Watch returned).
func (c *RecordContext) Watch(f func()) uint64 {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		f()
		return 0
	}
	c.lastID++
	id := c.lastID
	c.watches = append(c.watches, watch{id, f})
	c.mu.Unlock()
	return id
}

// Unwatch stops watch id; it reports whether its function was still to
// run (false: it ran, or is running).
func (c *RecordContext) Unwatch(id uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, w := range c.watches {
		if w.id == id {
			c.watches = append(c.watches[:i], c.watches[i+1:]...)
			c.watches[len(c.watches) : len(c.watches)+1][0] = watch{}
			return true
		}
	}
	return false
}

// AfterFunc is context.AfterFunc's way with c as a parent (the context
// package asks a parent that is not its own for it): f runs in a goroutine
// of its own once c ends.
func (c *RecordContext) AfterFunc(f func()) (stop func() bool) {
	c.Done() // the deadline ends c too
	id := c.Watch(func() { go f() })
	return func() bool { return id != 0 && c.Unwatch(id) }
}
