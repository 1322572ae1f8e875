package partition

// The engine's behaviour on fakes (fakes_test.go): ordering, runs,
// hand-back, release order and pool growth, in milliseconds, with no
// broker and no wasm.

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// offsetsOf are the offsets of a run, in its order.
func offsetsOf(run []picked) []int64 {
	var o []int64
	for _, p := range run {
		o = append(o, p.r.Offset)
	}
	return o
}

// Which records are runnable together under each ordering: every record
// runnable at once is taken (a wave, compared as a set), then each taken
// record finishes and frees its lane. The records from split on arrive
// while the first wave is in progress. Partition: one at a time in offset
// order; key: one record of a key at a time, in offset order, keys and
// null keys beside each other; none: everything at once.
func TestOrderingWaves(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ordering string
		keys     []string
		split    int // records enqueued after the first wave was taken (0: none)
		want     [][]int64
	}{
		{config.OrderPartition, []string{"a", "b", "a", "", "b", "c"}, 0, [][]int64{{0}, {1}, {2}, {3}, {4}, {5}}},
		{config.OrderPartition, []string{"a", "b", "c"}, 1, [][]int64{{0}, {1}, {2}}},
		{config.OrderKey, []string{"a", "b", "a", "", "b", "c"}, 0, [][]int64{{0, 1, 3, 5}, {2, 4}}},
		{config.OrderKey, []string{"a", "b", "a", "b", "c"}, 2, [][]int64{{0, 1}, {2, 3, 4}}},
		{config.OrderKey, []string{"a", "a", "a"}, 1, [][]int64{{0}, {1}, {2}}},
		{config.OrderKey, []string{"", "", ""}, 0, [][]int64{{0, 1, 2}}},
		{config.OrderKey, []string{"", "a", "", "a"}, 0, [][]int64{{0, 1, 2}, {3}}},
		{config.OrderNone, []string{"a", "b", "a", "", "b", "c"}, 0, [][]int64{{0, 1, 2, 3, 4, 5}}},
		{config.OrderNone, []string{"a", "a", "a"}, 1, [][]int64{{0}, {1, 2}}},
	} {
		t.Run(fmt.Sprintf("%s/%v/split%d", tc.ordering, tc.keys, tc.split), func(t *testing.T) {
			e := newEngine(t, engineOpts{ordering: tc.ordering, noStart: true})
			task := e.t
			all := recs(0, tc.keys...)
			first := all
			if tc.split > 0 {
				first = all[:tc.split]
			}
			task.Enqueue(first)
			var waves [][]int64
			for range len(tc.keys) + 1 {
				var wave []int64
				var lanes []*lane
				task.mu.Lock()
				for {
					u, ln := task.pickLocked()
					if u.none() {
						break
					}
					wave = append(wave, u.r.Offset)
					lanes = append(lanes, ln)
				}
				task.mu.Unlock()
				if len(wave) == 0 {
					break
				}
				if len(waves) == 0 && tc.split > 0 {
					task.Enqueue(all[tc.split:]) // while the first wave is in progress
				}
				slices.Sort(wave)
				waves = append(waves, wave)
				for _, ln := range lanes {
					task.release(ln)
				}
			}
			if fmt.Sprint(waves) != fmt.Sprint(tc.want) {
				t.Fatalf("waves %v, want %v", waves, tc.want)
			}
			if tc.ordering == config.OrderKey && len(task.q.lanes) != 0 {
				t.Fatalf("%d lanes left after every record finished, want none", len(task.q.lanes))
			}
		})
	}
}

// A run (pickRunLocked, runSizeLocked): under ordering partition the
// partition's next batch_records records, all holding its one lane; under
// key and none at most a share of the runnable records as large as the
// pool could grow to take, one record of a key.
func TestRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ordering string
		batch    int
		max      int
		keys     []string
		size     int
		run      []int64
	}{
		{config.OrderPartition, 4, 1, []string{"a", "b", "c", "d", "e"}, 4, []int64{0, 1, 2, 3}},
		{config.OrderPartition, 4, 8, []string{"a", "b"}, 4, []int64{0, 1}},
		{config.OrderPartition, 1, 1, []string{"a", "b"}, 1, []int64{0}},
		{config.OrderKey, 64, 2, []string{"a", "b", "c", "d", "e", "f"}, 3, []int64{0, 1, 2}},
		{config.OrderKey, 64, 1, []string{"a", "a", "b", "b"}, 2, []int64{0, 2}},
		{config.OrderKey, 2, 1, []string{"", "", ""}, 2, []int64{0, 1}},
		{config.OrderNone, 64, 4, []string{"a", "b", "c", "d", "e", "f", "g", "h"}, 2, []int64{0, 1}},
		{config.OrderNone, 64, 1, []string{"a", "a", "a"}, 3, []int64{0, 1, 2}},
	} {
		t.Run(fmt.Sprintf("%s/batch%d/max%d/%v", tc.ordering, tc.batch, tc.max, tc.keys), func(t *testing.T) {
			e := newEngine(t, engineOpts{ordering: tc.ordering, batch: tc.batch, noStart: true})
			task := e.t
			task.Enqueue(recs(0, tc.keys...))    // instances.max 0: no worker is borrowed
			task.d.Config.Instances.Max = tc.max // what runSizeLocked divides by
			task.mu.Lock()
			defer task.mu.Unlock()
			if n := task.runSizeLocked(); n != tc.size {
				t.Fatalf("run size %d, want %d", n, tc.size)
			}
			run := task.pickRunLocked(nil, task.runSizeLocked())
			if got := offsetsOf(run); !slices.Equal(got, tc.run) {
				t.Fatalf("run %v, want %v", got, tc.run)
			}
			for _, p := range run {
				switch {
				case tc.ordering == config.OrderPartition && p.ln != &task.q.single:
					t.Fatalf("offset %d of a partition run does not hold the partition's lane", p.r.Offset)
				case tc.ordering == config.OrderKey && p.r.Key != nil && (p.ln == nil || p.ln.key != string(p.r.Key) || !p.ln.busy):
					t.Fatalf("offset %d does not hold its key's lane: %+v", p.r.Offset, p.ln)
				case (tc.ordering == config.OrderNone || p.r.Key == nil) && tc.ordering != config.OrderPartition && p.ln != nil:
					t.Fatalf("offset %d holds a lane without an order constraint", p.r.Offset)
				}
			}
		})
	}
}

// A run's records the call did not run go back (unpickLocked) to the
// front of their queues in offset order, and the keys' lanes are freed;
// the partition's one lane stays held until the record run frees it.
func TestUnpick(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ordering string
		keys     []string
		take     int     // the run's length
		ran      int     // records of it run
		next     []int64 // what is picked next, one by one, each freeing its lane (across keys: in any order)
	}{
		{config.OrderKey, []string{"a", "a", "b"}, 2, 1, []int64{1, 2}},
		{config.OrderKey, []string{"a", "b", "c", "a"}, 3, 1, []int64{1, 2, 3}},
		{config.OrderPartition, []string{"a", "b", "c", "d"}, 3, 1, []int64{1, 2, 3}},
		{config.OrderNone, []string{"a", "b", "c", "d"}, 3, 1, []int64{1, 2, 3}},
	} {
		t.Run(fmt.Sprintf("%s/%v", tc.ordering, tc.keys), func(t *testing.T) {
			e := newEngine(t, engineOpts{ordering: tc.ordering, batch: 64, noStart: true})
			task := e.t
			task.Enqueue(recs(0, tc.keys...))
			task.mu.Lock()
			defer task.mu.Unlock()
			run := task.pickRunLocked(nil, tc.take)
			if len(run) != tc.take {
				t.Fatalf("run %v, want %d records", offsetsOf(run), tc.take)
			}
			task.q.queued -= len(run) // as takeRunLocked counts a run
			task.q.started += len(run)
			task.unpickLocked(run[tc.ran:])
			if task.q.queued != len(tc.keys)-tc.ran || task.q.started != tc.ran {
				t.Fatalf("after the hand-back %d queued, %d started; want %d, %d", task.q.queued, task.q.started, len(tc.keys)-tc.ran, tc.ran)
			}
			if tc.ordering == config.OrderPartition {
				if u, _ := task.pickLocked(); !u.none() {
					t.Fatalf("offset %d picked while the run's record holds the partition's lane", u.r.Offset)
				}
			}
			for _, p := range run[:tc.ran] {
				task.releaseLocked(p.ln) // the records run finish
			}
			var got []int64
			for range tc.next {
				u, ln := task.pickLocked()
				if u.none() {
					break
				}
				got = append(got, u.r.Offset)
				task.releaseLocked(ln)
			}
			if tc.ordering == config.OrderKey {
				slices.Sort(got) // each key has one record left: its order is within the key
			}
			if !slices.Equal(got, tc.next) {
				t.Fatalf("picked %v after the hand-back, want %v", got, tc.next)
			}
		})
	}
}

// The release order delivers a settled job once every job before it has
// settled, in order; a dropped job (no verdict) lets the ones after it go
// without being delivered.
func TestReleaseOrder(t *testing.T) {
	t.Parallel()
	type step struct {
		off     int64
		dropped bool
		want    []int64 // delivered by this settle
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"in order", []step{{0, false, []int64{0}}, {1, false, []int64{1}}, {2, false, []int64{2}}}},
		{"last first", []step{{2, false, nil}, {0, false, []int64{0}}, {1, false, []int64{1, 2}}}},
		{"reversed", []step{{3, false, nil}, {2, false, nil}, {1, false, nil}, {0, false, []int64{0, 1, 2, 3}}}},
		{"dropped", []step{{1, true, nil}, {0, false, []int64{0}}, {2, false, []int64{2}}}},
		{"dropped head", []step{{2, false, nil}, {0, true, nil}, {1, false, []int64{1, 2}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sk := &recordingSink{}
			rl := &releaser{sk: sk}
			jobs := map[int64]*job{}
			for _, r := range recs(0, make([]string, len(tc.steps))...) {
				j := &job{r: r}
				jobs[r.Offset] = j
				rl.add(j)
			}
			seen := 0
			for _, s := range tc.steps {
				j := jobs[s.off]
				j.release.verdict = verdictDone
				if s.dropped {
					j.release.verdict = verdictNone
				}
				rl.settle(j)
				var got []int64
				for _, d := range sk.deliveries()[seen:] {
					got = append(got, d.offset)
				}
				seen = len(sk.deliveries())
				if !slices.Equal(got, s.want) {
					t.Fatalf("settling %d delivered %v, want %v", s.off, got, s.want)
				}
			}
		})
	}
}

// keyWatch is a fake guest's view of the records in its calls: it notes
// each call's record, and any record that started while another of its
// key (or, under ordering partition, of the partition) was in a call, or
// before an earlier offset of its key.
type keyWatch struct {
	mu    sync.Mutex
	busy  map[string]int
	last  map[string]int64
	calls []int64
	errs  []string
	scope func(rec *abi.Record) (string, bool) // the order scope of a record; false: none
}

func (kw *keyWatch) guest(rec *abi.Record) host.Result {
	scope, ordered := kw.scope(rec)
	kw.mu.Lock()
	kw.calls = append(kw.calls, rec.Offset)
	if ordered {
		if kw.busy[scope] > 0 {
			kw.errs = append(kw.errs, fmt.Sprintf("offset %d started while another record of %q was in a call", rec.Offset, scope))
		}
		if l, ok := kw.last[scope]; ok && l >= rec.Offset {
			kw.errs = append(kw.errs, fmt.Sprintf("offset %d started after offset %d of %q", rec.Offset, l, scope))
		}
		kw.busy[scope]++
		kw.last[scope] = rec.Offset
	}
	kw.mu.Unlock()
	runtime.Gosched() // room for another worker to overlap
	if ordered {
		kw.mu.Lock()
		kw.busy[scope]--
		kw.mu.Unlock()
	}
	return host.Result{Status: abi.StatusOK, Outputs: []abi.Output{{Value: rec.Value}}}
}

// A pool of workers keeps each ordering's promise (one record of a key,
// or of the partition, at a time, in offset order), every record is done
// once its outputs are acknowledged, and under ordering partition the
// sink is handed the outcomes in offset order.
func TestOrderingWithWorkers(t *testing.T) {
	t.Parallel()
	const n = 400
	keys := make([]string, n)
	for i := range keys {
		keys[i] = []string{"a", "b", "c", "", "d"}[i%5]
	}
	for _, tc := range []struct {
		ordering string
		batch    int
	}{
		{config.OrderPartition, 1}, {config.OrderPartition, 8},
		{config.OrderKey, 1}, {config.OrderKey, 8},
		{config.OrderNone, 1}, {config.OrderNone, 8},
	} {
		t.Run(fmt.Sprintf("%s/batch%d", tc.ordering, tc.batch), func(t *testing.T) {
			t.Parallel()
			kw := &keyWatch{busy: map[string]int{}, last: map[string]int64{}}
			kw.scope = func(rec *abi.Record) (string, bool) {
				switch tc.ordering {
				case config.OrderPartition:
					return "partition", true
				case config.OrderKey:
					return string(rec.Key), rec.Key != nil
				}
				return "", false
			}
			e := newEngine(t, engineOpts{ordering: tc.ordering, min: 3, max: 3, batch: tc.batch, growAfter: 1, guest: kw.guest, autoAck: true})
			for i := 0; i < n; i += 50 {
				e.t.Enqueue(recs(int64(i), keys[i:i+50]...))
				// The next records arrive while these run: some of their
				// keys' lanes are busy then.
				waitFor(t, "records done", func() bool { return len(e.ledger.doneOffsets()) >= i/2 })
			}
			waitFor(t, "every record done", func() bool { return len(e.ledger.doneOffsets()) == n })
			kw.mu.Lock()
			defer kw.mu.Unlock()
			if len(kw.errs) > 0 {
				t.Fatalf("%d ordering violations, the first: %s", len(kw.errs), kw.errs[0])
			}
			if len(kw.calls) != n {
				t.Fatalf("%d calls for %d records", len(kw.calls), n)
			}
			ds := e.sink.deliveries()
			if len(ds) != n {
				t.Fatalf("the sink was handed %d outcomes, want %d", len(ds), n)
			}
			for i, d := range ds {
				if d.verdict != verdictOutputs || len(d.outs) != 1 {
					t.Fatalf("outcome of offset %d: verdict %d, outputs %q; want one output", d.offset, d.verdict, d.outs)
				}
				if tc.ordering == config.OrderPartition && d.offset != int64(i) {
					t.Fatalf("delivery %d is offset %d: under ordering partition outcomes leave in offset order", i, d.offset)
				}
			}
			if w, _, ok := e.t.Tracker.Watermark(); !ok || w != n {
				t.Fatalf("watermark %d (%v), want %d", w, ok, n)
			}
			if e.ledger.doneTwice != 0 {
				t.Fatalf("%d records finished twice", e.ledger.doneTwice)
			}
		})
	}
}

// blockingGuest holds every record of a key in blockKeys (all records when
// empty) in its call until release is closed; inCall counts the calls in
// progress.
type blockingGuest struct {
	release   chan struct{}
	once      sync.Once
	blockKeys map[string]bool
	inCall    atomic.Int32
}

// newBlockingGuest makes a blockingGuest whose records are released at the
// latest when the test ends (before its engine's cleanup waits for them).
func newBlockingGuest(tb testing.TB, blockKeys ...string) *blockingGuest {
	g := &blockingGuest{release: make(chan struct{}), blockKeys: map[string]bool{}}
	for _, k := range blockKeys {
		g.blockKeys[k] = true
	}
	return g
}

// open releases the records held and lets every later one through.
func (g *blockingGuest) open() { g.once.Do(func() { close(g.release) }) }

// engine makes g's engine, which opens g before it stops.
func (g *blockingGuest) engine(tb testing.TB, o engineOpts) *engine {
	o.guest = g.guest
	e := newEngine(tb, o)
	tb.Cleanup(g.open)
	return e
}

func (g *blockingGuest) guest(rec *abi.Record) host.Result {
	if len(g.blockKeys) == 0 || g.blockKeys[string(rec.Key)] {
		g.inCall.Add(1)
		<-g.release
		g.inCall.Add(-1)
	}
	return host.Result{Status: abi.StatusOK}
}

// Records that wait instances.grow_after make the pool borrow instances up
// to instances.max, and no further; records that cannot run (the
// partition's one lane is held) do not.
func TestPoolGrowth(t *testing.T) {
	t.Parallel()
	t.Run("grows to max", func(t *testing.T) {
		t.Parallel()
		g := newBlockingGuest(t)
		e := g.engine(t, engineOpts{ordering: config.OrderKey, min: 1, max: 3, growAfter: 1, autoAck: true})
		e.t.Enqueue(recs(0, "a", "b", "c", "d", "e", "f"))
		waitFor(t, "three records in calls", func() bool { return g.inCall.Load() == 3 })
		for range 5 {
			e.t.DispatchAbove() // records still wait: the pool is at its maximum
		}
		if gg := e.t.Gauges(false); gg.Workers != 3 || e.t.ps.Borrowed.Load() != 2 {
			t.Fatalf("%d workers, %d borrowed; want 3 and 2", gg.Workers, e.t.ps.Borrowed.Load())
		}
		g.open()
		waitFor(t, "every record done", func() bool { return len(e.ledger.doneOffsets()) == 6 })
		if n := e.insts.Load(); n != 3 {
			t.Fatalf("%d instances made, want 3", n)
		}
	})
	t.Run("partition lane held", func(t *testing.T) {
		t.Parallel()
		g := newBlockingGuest(t)
		e := g.engine(t, engineOpts{ordering: config.OrderPartition, min: 1, max: 3, autoAck: true})
		e.t.Enqueue(recs(0, "a", "b", "c", "d"))
		waitFor(t, "a record in its call", func() bool { return g.inCall.Load() == 1 })
		e.t.mu.Lock()
		e.t.d.Config.Instances.GrowAfter = 1 // from now any record runnable would have waited long enough
		e.t.mu.Unlock()
		for range 5 {
			e.t.DispatchAbove()
		}
		if gg := e.t.Gauges(false); gg.Workers != 1 || e.t.ps.Borrowed.Load() != 0 {
			t.Fatalf("%d workers, %d borrowed while the partition's lane is held; want 1 and 0", gg.Workers, e.t.ps.Borrowed.Load())
		}
		g.open()
		waitFor(t, "every record done", func() bool { return len(e.ledger.doneOffsets()) == 4 })
	})
}

// A run under ordering key whose first record is slow hands the records it
// has not yet given the guest back after runHandBack, and another worker
// runs them while the slow one is still in its call.
func TestRunHandBack(t *testing.T) {
	t.Parallel()
	g := newBlockingGuest(t, "slow")
	e := g.engine(t, engineOpts{ordering: config.OrderKey, min: 2, max: 2, batch: 64, growAfter: 1, autoAck: true})
	e.t.Enqueue(recs(0, "slow", "k1", "k2", "k3"))
	waitFor(t, "the records after the slow one done", func() bool { return len(e.ledger.doneOffsets()) == 3 })
	if g.inCall.Load() != 1 {
		t.Fatal("the slow record is not in its call")
	}
	if slices.Contains(e.ledger.doneOffsets(), 0) {
		t.Fatal("the slow record is done before it was released")
	}
	if n := e.d.Stats.HandedBack.Load(); n != 1 {
		t.Fatalf("%d records handed back, want 1 (the one run with the slow record)", n)
	}
	g.open()
	waitFor(t, "every record done", func() bool { return len(e.ledger.doneOffsets()) == 4 })
}

// Backpressure through the Pauser: a task at PauseFactor times its bounds
// is due a pause, pauses its partition once, resumes it once it drained to
// half of its bounds, and a task stopped while paused resumes it (the
// next owner fetches).
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	e := newEngine(t, engineOpts{ordering: config.OrderPartition, noStart: true, maxInFlight: 4})
	task := e.t
	rs := recs(0, "a", "b", "c", "d", "e", "f", "g", "h")
	task.Enqueue(rs)
	if d := task.DemandState(); d != DemandPauseDue {
		t.Fatalf("demand %d at twice max_in_flight, want DemandPauseDue", d)
	}
	task.Pause()
	task.Pause()
	if d := task.DemandState(); d != DemandPaused {
		t.Fatalf("demand %d once paused, want DemandPaused", d)
	}
	task.MaybeResume() // still over half its bounds
	for _, r := range rs[:6] {
		task.mu.Lock()
		task.q.started++ // as a worker's pick counts it
		task.mu.Unlock()
		task.Finish(r)
	}
	task.MaybeResume()
	task.Pause()
	task.Stop()
	want := []string{"pause in/0", "resume in/0", "pause in/0", "resume in/0"}
	if got := e.pauser.log(); !slices.Equal(got, want) {
		t.Fatalf("pauser told %v, want %v", got, want)
	}
}
