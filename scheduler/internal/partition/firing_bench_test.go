package partition

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
	"github.com/wasmstream/wasmstream/scheduler/internal/version"
)

// firingInstance is a fake instance whose guest does the least a timer
// module can: a record's call ends ok with nothing, a firing's emits one
// output (a window's result) and writes nothing itself. What a firing
// costs on it is the host's.
type firingInstance struct {
	*fakeInstance
	val []byte
}

func (fi *firingInstance) ProcessState(context.Context, *abi.Record, any, host.State) host.Result {
	return host.Result{Status: abi.StatusOK}
}

func (fi *firingInstance) ProcessTimer(context.Context, *abi.TimerFiring, any, host.State) host.Result {
	return host.Result{Status: abi.StatusOK, Outputs: []abi.Output{{Value: fi.val}}} // the guest's one allocation
}

// firingSink makes every outcome durable at once, as inlineSink does,
// work among them (j.finish: a firing has no record).
type firingSink struct{}

func (firingSink) refuses(*kgo.Record, []abi.Output, []state.Write) string { return "" }
func (firingSink) Forget(map[string][]int32)                               {}
func (firingSink) deliver(run []*job) {
	for _, j := range run {
		switch j.release.verdict {
		case verdictDone:
			j.t.filtered(j)
		case verdictOutputs:
			j.prepareOutputs("out", time.Now())
			for i := range j.outcome.outs {
				j.acked(j.outputRecord(i), nil)
			}
			j.t.d.Budget.ReleaseOutputs(j.outcome.held)
			j.finish()
			j.tr.End("ok", "", "")
		}
	}
}

// firingRounds runs rounds of firings on a partition task with state and
// a module that sets timers (firingInstance), without a broker: ordering
// partition, a release order by offset when byOffset (as under
// exactly_once), outputs and changelog records acknowledged at once
// (firingSink). Each round sets round timers of distinct keys (outside
// the timed part), then a record whose timestamp makes them all due; the
// round ends when they fired and the record is done. It fires n timers
// in all; tm is paused while a round is set.
func firingRounds(b testing.TB, tm roundTimer, byOffset bool, round, n int) {
	e := newEngine(b, engineOpts{ordering: config.OrderPartition, min: 1, max: 1, noStart: true, byOffset: byOffset})
	st, err := statestore.Open(filepath.Join(b.TempDir(), "s.db"), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	e.t.State = state.NewPartition(st, 0, 1, state.Limits{MaxValueBytes: 100, Changelog: "cl"})
	e.d.Timers = true
	e.d.Sink = firingSink{}
	e.t.rel.sk = e.d.Sink // the releaser was made with the engine's sink
	e.d.Inst.New = func(context.Context, *version.Version) (Instance, error) {
		return &firingInstance{fakeInstance: newFakeInstance(nil, e.pend), val: []byte("closed")}, nil
	}
	e.t.Start()
	keys := make([][]byte, round)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key-%05d", i)
	}
	tm.StartTimer()
	var off, at int64
	for fired := 0; fired < n; {
		k := min(round, n-fired)
		tm.StopTimer()
		for i := range k {
			rs := e.t.State.Begin()
			if en := rs.SetTimer(keys[i], at+int64(i)); en != 0 {
				b.Fatal(en)
			}
			e.t.State.CommitAt(off-1, -1, rs, nil)
		}
		if err := e.t.State.Flush(off); err != nil {
			b.Fatal(err)
		}
		at += int64(k)
		r := recs(off, "trigger")[0]
		r.Timestamp = time.UnixMilli(at - 1)
		tm.StartTimer()
		e.t.Enqueue([]*kgo.Record{r})
		fired += k
		deadline := time.Now().Add(10 * time.Second)
		for e.d.Stats.TimersFired.Load() < int64(fired) || e.ledger.doneCount() <= int(off) {
			if time.Now().After(deadline) {
				b.Fatalf("round of record %d: %d of %d timers fired, %d records done", off, e.d.Stats.TimersFired.Load(), fired, e.ledger.doneCount())
			}
			time.Sleep(20 * time.Microsecond)
		}
		off++
	}
	tm.StopTimer()
}

// roundTimer is what firingRounds pauses while it sets a round: a
// benchmark's timer, or an allocation count (mallocCount).
type roundTimer interface {
	StartTimer()
	StopTimer()
}

// mallocCount counts the allocations made while it runs.
type mallocCount struct {
	m0, m1 runtime.MemStats
	n      uint64
}

func (c *mallocCount) StartTimer() { runtime.ReadMemStats(&c.m0) }
func (c *mallocCount) StopTimer() {
	runtime.ReadMemStats(&c.m1)
	c.n += c.m1.Mallocs - c.m0.Mallocs
}

// BenchmarkTimerFirings is a firing's host cost: rounds of 1,000 firings
// of a guest that emits one output and does nothing else
// (firingInstance), under at_least_once's release order and exactly_once's
// (by offset). ns/op and allocs/op are a firing's.
func BenchmarkTimerFirings(b *testing.B) {
	for _, byOffset := range []bool{false, true} {
		b.Run(fmt.Sprintf("byOffset=%v", byOffset), func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			firingRounds(b, b, byOffset, 1000, b.N)
		})
	}
}

// doneCount is how many offsets l was told are done.
func (l *fakeLedger) doneCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.done)
}

// A firing's host allocations stay few: the firing with its Work and its
// call's argument (one), its Work.Done, the job's rare fields (its second
// output record inside), its state run, its timer's delete key, and the
// cache's copy of its key and the store's read of its timer (Due's scan,
// DueFirst), besides the guest's one output (firingInstance): 7 under
// at_least_once, 8 by offset. They were 19-20 when the Work, the firing,
// the abi.TimerFiring, the mark's Context, Due's answer, the delete key's
// growth and the second output record were each their own (BENCHMARKS.md,
// "A timer firing's host cost"). The fewest of three measures: the
// runtime and goroutines earlier tests left allocate now and then beside
// the firings. Not parallel: the counts are the whole binary's.
func TestTimerFiringAllocs(t *testing.T) {
	const most = 9.5
	const n = 2000
	for _, byOffset := range []bool{false, true} {
		least := uint64(1 << 62)
		for range 3 {
			var c mallocCount
			firingRounds(t, &c, byOffset, 500, n)
			least = min(least, c.n)
		}
		if a := float64(least) / n; a > most {
			t.Errorf("byOffset %v: %.1f allocations a firing, want at most %.1f", byOffset, a, most)
		} else {
			t.Logf("byOffset %v: %.1f allocations a firing", byOffset, a)
		}
	}
}
