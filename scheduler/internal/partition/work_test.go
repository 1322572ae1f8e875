package partition

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// callLog is a fake guest that notes each call ("r<offset>" for a record,
// the value of anything else: work's calls) and holds the record at
// offset hold in its call until release is closed.
type callLog struct {
	mu      sync.Mutex
	calls   []string
	hold    int64
	inHold  chan struct{} // closed once the held record is in its call
	release chan struct{}
	once    sync.Once
}

func newCallLog(tb testing.TB, hold int64) *callLog {
	c := &callLog{hold: hold, inHold: make(chan struct{}), release: make(chan struct{})}
	tb.Cleanup(c.open)
	return c
}

func (c *callLog) open() { c.once.Do(func() { close(c.release) }) }

func (c *callLog) guest(rec *abi.Record) host.Result {
	name := string(rec.Value)
	if name == "v" {
		name = fmt.Sprintf("r%d", rec.Offset)
	}
	c.mu.Lock()
	c.calls = append(c.calls, name)
	c.mu.Unlock()
	if name == fmt.Sprintf("r%d", c.hold) {
		close(c.inHold)
		<-c.release
	}
	return host.Result{Status: abi.StatusOK, Outputs: []abi.Output{{Value: []byte("out-" + name)}}}
}

func (c *callLog) log() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls)
}

// timerWork is work as a timer firing would be: it calls the instance with
// a record of its own (value "timer"), and notes what Done is told.
type timerWork struct {
	Work
	done chan error // Done's error, buffered: Done is told once
}

func newTimerWork(key string) *timerWork {
	w := &timerWork{done: make(chan error, 2)}
	if key != "" {
		w.Key = []byte(key)
	}
	w.Call = func(ctx context.Context, in Instance, tag any) host.Result {
		return in.Process(ctx, &abi.Record{Key: w.Key, Value: []byte("timer"), Offset: -1}, tag)
	}
	w.Done = func(err error) { w.done <- err }
	return w
}

// Work that is not a record runs in its key's lane (or the partition's),
// placed at its front while a record of the lane is in its call: it runs
// after that record and before the lane's next one, its outputs reach the
// sink in that order (in offset order where a release order is kept, and
// before the next record's under exactly_once), no offset is done or
// committed for it, and Done is told once its outputs are acknowledged.
// Under ordering partition a run of records (batch_records) holds the
// records it took: work placed while it runs comes after them.
func TestWorkRunsInItsLane(t *testing.T) {
	t.Parallel()
	inLane := []string{"r0", "timer", "r1", "r2"}
	afterRun := []string{"r0", "r1", "r2", "timer"}
	for _, tc := range []struct {
		ordering string
		byOffset bool
		batch    int
		want     []string
	}{
		{config.OrderKey, false, 1, inLane}, {config.OrderKey, true, 1, inLane}, {config.OrderKey, false, 8, inLane},
		{config.OrderPartition, false, 1, inLane}, {config.OrderPartition, true, 1, inLane}, {config.OrderPartition, false, 8, afterRun},
	} {
		t.Run(fmt.Sprintf("%s/byOffset%v/batch%d", tc.ordering, tc.byOffset, tc.batch), func(t *testing.T) {
			t.Parallel()
			c := newCallLog(t, 0)
			e := newEngine(t, engineOpts{ordering: tc.ordering, min: 2, max: 2, batch: tc.batch, growAfter: 1, guest: c.guest, byOffset: tc.byOffset})
			e.t.Enqueue(recs(0, "a", "a", "a"))
			<-c.inHold
			w := newTimerWork("a")
			if !e.t.PlaceWork(&w.Work, true) {
				t.Fatal("PlaceWork refused work on a running task")
			}
			e.t.mu.Lock()
			u, _ := e.t.pickLocked()
			e.t.mu.Unlock()
			if !u.none() {
				t.Fatalf("picked %+v while the lane's record is in its call: the lane is not held", u)
			}
			c.open()
			waitFor(t, "every call", func() bool { return len(c.log()) == 4 })
			e.sink.ack() // what was delivered so far becomes durable
			waitFor(t, "every outcome delivered and acknowledged", func() bool {
				e.sink.ack()
				return len(e.ledger.doneOffsets()) == 3 && len(e.sink.deliveries()) == 4
			})
			if got := c.log(); !slices.Equal(got, tc.want) {
				t.Fatalf("calls %v, want %v: the work runs after the record in its call and before the lane's next", got, tc.want)
			}
			var got, want []string
			for _, d := range e.sink.deliveries() {
				got = append(got, fmt.Sprintf("%d:%s", d.offset, d.outs))
			}
			for _, c := range tc.want {
				off := "-1"
				if c != "timer" {
					off = c[1:]
				}
				want = append(want, fmt.Sprintf("%s:[out-%s]", off, c))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("the sink was handed %v, want %v", got, want)
			}
			if err := <-w.done; err != nil {
				t.Fatalf("work done with %v, want nil", err)
			}
			if done := e.ledger.doneOffsets(); slices.Contains(done, -1) || len(done) != 3 {
				t.Fatalf("the ledger was told %v done, want the records' offsets only", done)
			}
			if wm, _, _ := e.t.Tracker.Watermark(); wm != 3 {
				t.Fatalf("watermark %d, want 3", wm)
			}
			if g := e.t.Gauges(false); g.InFlight != 0 || g.Queued != 0 || e.t.StartedPending() != 0 {
				t.Fatalf("in flight %d, queued %d, started %d after everything finished; want 0", g.InFlight, g.Queued, e.t.StartedPending())
			}
		})
	}
}

// Work without an order constraint (ordering none, or a null key under
// ordering key) runs beside the records; work at a lane's back runs after
// the records already there.
func TestWorkUnordered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ordering, key string
		front         bool
		want          []string
	}{
		{config.OrderNone, "a", true, []string{"r0", "timer", "r1"}},
		{config.OrderKey, "", true, []string{"r0", "timer", "r1"}},
		{config.OrderKey, "a", false, []string{"r0", "r1", "timer"}},
	} {
		t.Run(fmt.Sprintf("%s/%q/front%v", tc.ordering, tc.key, tc.front), func(t *testing.T) {
			t.Parallel()
			c := newCallLog(t, 0)
			// One instance: the record in its call holds it, so the work
			// placed then is what the worker takes next, if it may.
			e := newEngine(t, engineOpts{ordering: tc.ordering, min: 1, max: 1, guest: c.guest, autoAck: true})
			e.t.Enqueue(recs(0, "a", "a"))
			<-c.inHold
			w := newTimerWork(tc.key)
			e.t.PlaceWork(&w.Work, tc.front)
			c.open()
			if err := <-w.done; err != nil {
				t.Fatalf("work done with %v", err)
			}
			waitFor(t, "the records done", func() bool { return len(e.ledger.doneOffsets()) == 2 })
			if got := c.log(); !slices.Equal(got, tc.want) {
				t.Fatalf("calls %v, want %v", got, tc.want)
			}
		})
	}
}

// Work whose call fails, or whose outputs a topic would refuse, releases
// nothing: Done is told why, and its lane is freed for the next record.
// Work still queued when the task stops is told ErrWorkDropped; a stopped
// task takes no more.
func TestWorkFailsAndDrops(t *testing.T) {
	t.Parallel()
	t.Run("fails", func(t *testing.T) {
		t.Parallel()
		g := func(rec *abi.Record) host.Result {
			if string(rec.Value) == "timer" {
				return host.Result{Status: abi.StatusFail, Err: &host.GuestError{Status: abi.StatusFail, Msg: "no"}}
			}
			return host.Result{Status: abi.StatusOK}
		}
		e := newEngine(t, engineOpts{ordering: config.OrderPartition, min: 1, max: 1, guest: g, autoAck: true})
		w := newTimerWork("a")
		e.t.PlaceWork(&w.Work, false)
		e.t.Enqueue(recs(0, "a"))
		if err := <-w.done; err == nil || errors.Is(err, ErrWorkDropped) {
			t.Fatalf("failed work done with %v, want its failure", err)
		}
		waitFor(t, "the record after it done", func() bool { return len(e.ledger.doneOffsets()) == 1 })
		for _, d := range e.sink.deliveries() {
			if d.offset < 0 {
				t.Fatalf("failed work delivered: %+v", d)
			}
		}
	})
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		c := newCallLog(t, -2)
		e := newEngine(t, engineOpts{ordering: config.OrderKey, min: 1, max: 1, guest: c.guest, autoAck: true})
		e.sink.refuse = "too large"
		w := newTimerWork("a")
		e.t.PlaceWork(&w.Work, false)
		if err := <-w.done; err == nil {
			t.Fatal("work whose output is refused done without an error")
		}
		if n := len(e.sink.deliveries()); n != 0 {
			t.Fatalf("%d deliveries of refused work", n)
		}
	})
	t.Run("aborted while waiting", func(t *testing.T) {
		t.Parallel()
		g := func(*abi.Record) host.Result { return host.Result{Status: abi.StatusPending} }
		e := newEngine(t, engineOpts{ordering: config.OrderKey, min: 1, max: 1, guest: g})
		w := newTimerWork("a")
		e.t.PlaceWork(&w.Work, false)
		waitFor(t, "the work's call waiting", func() bool { return e.pend.waiting("timer") })
		e.t.Stop()
		e.t.Abort() // its instance closes: the call ends canceled
		if err := <-w.done; !errors.Is(err, ErrWorkDropped) {
			t.Fatalf("work waiting at abort done with %v, want ErrWorkDropped", err)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		t.Parallel()
		e := newEngine(t, engineOpts{ordering: config.OrderKey, noStart: true})
		w := newTimerWork("a")
		e.t.PlaceWork(&w.Work, true)
		e.t.Stop()
		if err := <-w.done; !errors.Is(err, ErrWorkDropped) {
			t.Fatalf("queued work at stop done with %v, want ErrWorkDropped", err)
		}
		if e.t.PlaceWork(&newTimerWork("a").Work, true) {
			t.Fatal("a stopped task took work")
		}
	})
}

// Under exactly_once work takes its place in the release order right
// before its lane's next record (insertBefore), so its outputs enter the
// transaction before that record's; a record's reserved place is still
// found (claim) with work in front of it; with no next record it goes
// last.
func TestReleaserInsertBefore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		next int64 // -1: none
		want []int64
	}{
		{"before 2", 2, []int64{0, 1, -1, 2, 3}},
		{"before 0", 0, []int64{-1, 0, 1, 2, 3}},
		{"last", -1, []int64{0, 1, 2, 3, -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sk := &recordingSink{}
			rl := &releaser{sk: sk, byOffset: true}
			rs := recs(0, "a", "b", "a", "b")
			rl.reserve(rs, func(*kgo.Record) bool { return true })
			wj := &job{}
			wj.rareFields().work = &newTimerWork("a").Work
			var next *kgo.Record
			if tc.next >= 0 {
				next = rs[tc.next]
			}
			rl.insertBefore(wj, next)
			var settle []*job
			for _, r := range rs {
				j := rl.claim(r, newJobForTest)
				if j.r != r || !j.release.ordered {
					t.Fatalf("claim(%d) returned %+v, not its reserved place", r.Offset, j)
				}
				settle = append(settle, j)
			}
			settle = append(settle, wj)
			for _, j := range slices.Backward(settle) {
				j.release.verdict = verdictDone
				rl.settle(j)
			}
			var got []int64
			for _, d := range sk.deliveries() {
				got = append(got, d.offset)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("delivered %v, want %v", got, tc.want)
			}
		})
	}
}

// Work whose call waits on asynchronous operations keeps its place: under
// ordering key its lane stays held until the completion decides it (the
// key's records wait); under ordering partition the partition's next
// records run meanwhile (pipelining) and their outputs wait behind the
// work's in the release order. Either way the sink gets the work's outputs
// first, and Done is told once they are durable.
func TestWorkWaitsOnOperations(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ordering     string
		byOffset     bool
		whileWaiting []string // the calls made before the work's completion
	}{
		{config.OrderKey, false, []string{"timer"}},
		{config.OrderKey, true, []string{"timer"}},
		{config.OrderPartition, false, []string{"timer", "r0", "r1"}},
		{config.OrderPartition, true, []string{"timer", "r0", "r1"}},
	} {
		t.Run(fmt.Sprintf("%s/byOffset%v", tc.ordering, tc.byOffset), func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var calls []string
			g := func(rec *abi.Record) host.Result {
				mu.Lock()
				calls = append(calls, callName(rec))
				mu.Unlock()
				if string(rec.Value) == "timer" {
					return host.Result{Status: abi.StatusPending}
				}
				return host.Result{Status: abi.StatusOK, Outputs: []abi.Output{{Value: []byte("out-" + callName(rec))}}}
			}
			log := func() []string {
				mu.Lock()
				defer mu.Unlock()
				return slices.Clone(calls)
			}
			e := newEngine(t, engineOpts{ordering: tc.ordering, min: 1, max: 1, guest: g, autoAck: true, byOffset: tc.byOffset})
			w := newTimerWork("a")
			e.t.PlaceWork(&w.Work, false)
			waitFor(t, "the work's call waiting", func() bool { return e.pend.waiting("timer") })
			e.t.Enqueue(recs(0, "a", "a"))
			if len(tc.whileWaiting) > 1 {
				waitFor(t, "the records' calls", func() bool { return len(log()) == len(tc.whileWaiting) })
			} else {
				e.t.mu.Lock()
				u, _ := e.t.pickLocked()
				e.t.mu.Unlock()
				if !u.none() {
					t.Fatalf("offset %d runnable while the work of its key waits", u.r.Offset)
				}
			}
			if got := log(); !slices.Equal(got, tc.whileWaiting) {
				t.Fatalf("calls %v while the work waits, want %v", got, tc.whileWaiting)
			}
			if n := len(e.sink.deliveries()); n != 0 {
				t.Fatalf("%d outcomes delivered while the work before them waits", n)
			}
			e.pend.complete(t, "timer", host.Result{Status: abi.StatusOK, Outputs: []abi.Output{{Value: []byte("out-timer")}}})
			if err := <-w.done; err != nil {
				t.Fatalf("work done with %v", err)
			}
			waitFor(t, "the records done", func() bool { return len(e.ledger.doneOffsets()) == 2 })
			var got []int64
			for _, d := range e.sink.deliveries() {
				got = append(got, d.offset)
			}
			if want := []int64{-1, 0, 1}; !slices.Equal(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
		})
	}
}

// Under exactly_once work placed with the record that triggered it
// (Work.After) before that record is released holds the record's release:
// both leave in one delivery (one hold of the transaction's gate: one
// transaction), the record's outputs first. Without After the record
// leaves alone, as soon as it settles.
func TestWorkSharesItsTriggersDelivery(t *testing.T) {
	t.Parallel()
	for _, tied := range []bool{true, false} {
		t.Run(fmt.Sprintf("after%v", tied), func(t *testing.T) {
			t.Parallel()
			c := newCallLog(t, 0)
			e := newEngine(t, engineOpts{ordering: config.OrderKey, min: 1, max: 1, guest: c.guest, autoAck: true, byOffset: true})
			rs := recs(0, "a", "a")
			e.t.Enqueue(rs)
			<-c.inHold
			w := newTimerWork("a")
			if tied {
				w.After = rs[0]
			}
			e.t.PlaceWork(&w.Work, true)
			c.open()
			if err := <-w.done; err != nil {
				t.Fatalf("work done with %v", err)
			}
			waitFor(t, "the records done", func() bool { return len(e.ledger.doneOffsets()) == 2 })
			ds := e.sink.deliveries()
			var got []int64
			for _, d := range ds {
				got = append(got, d.offset)
			}
			if want := []int64{0, -1, 1}; !slices.Equal(got, want) {
				t.Fatalf("delivered %v, want %v", got, want)
			}
			if same := ds[0].run == ds[1].run; same != tied {
				t.Fatalf("the record and its work delivered together: %v, want %v (runs %d, %d)", same, tied, ds[0].run, ds[1].run)
			}
		})
	}
}

// Work placed with its trigger that will not run (the task stops) leaves
// its place unsettled, as a dropped record under exactly_once: the trigger
// is not released without it (it stays uncommitted, and runs again with
// the partition's next owner); Done is told ErrWorkDropped.
func TestWorkNotRunHoldsItsTrigger(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{ordering: config.OrderKey, noStart: true, byOffset: true})
	rs := recs(0, "a")
	e.t.Enqueue(rs)
	w := newTimerWork("a")
	w.After = rs[0]
	e.t.PlaceWork(&w.Work, true)
	rl := e.t.rel
	j := rl.claim(rs[0], newJobForTest)
	j.t, j.release.verdict = e.t, verdictDone
	rl.settle(j)
	if n := len(e.sink.deliveries()); n != 0 {
		t.Fatalf("%d delivered while the record's work has not settled", n)
	}
	e.t.Stop()
	if err := <-w.done; !errors.Is(err, ErrWorkDropped) {
		t.Fatalf("work done with %v, want ErrWorkDropped", err)
	}
	if n := len(e.sink.deliveries()); n != 0 {
		t.Fatalf("%d delivered once the task stopped: the record went without its work", n)
	}
}

// newJobForTest is a claim's allocator in tests: a new job.
func newJobForTest() *job { return new(job) }
