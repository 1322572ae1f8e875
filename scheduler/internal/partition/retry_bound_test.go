package partition

import (
	"context"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/budget"
	"github.com/wasmstream/wasmstream/scheduler/internal/version"
)

// A due inline retry on an instance at async.max_in_flight waits for room:
// startDueRetries does not start it (its operations would pass the bound),
// and nextWake gives it no time — a time past would turn the worker without
// end; a completion wakes it. With room, the retry's due time is the
// worker's next wake again. At the host's bound it waits as well, and the
// worker looks again in a moment.
func TestDueRetryWaitsForAsyncRoom(t *testing.T) {
	ctx := context.Background()
	e, err := host.NewEngine("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	// host/testdata/batch.wat: a record of offset 5 waits on a timer of
	// its timestamp in ms.
	mod, err := e.Load(ctx, wt.BuildWat(t, "host/testdata/batch.wat"), host.ModuleConfig{Name: "t", Limits: host.Limits{RecordTimeout: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	in, err := mod.NewInstance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)
	recs := []host.BatchRecord{{Rec: &abi.Record{Topic: "in", Offset: 5, Timestamp: 3_600_000}, Tag: 1}, {Rec: &abi.Record{Topic: "in", Offset: 5, Timestamp: 3_600_000}, Tag: 2}}
	out := make([]host.Outcome, len(recs))
	if ran := in.ProcessBatch(ctx, recs, out); ran != 2 || out[0].Status != abi.StatusPending || out[1].Status != abi.StatusPending || in.AsyncInFlight() != 2 {
		t.Fatalf("ran %d: %v %v, %d operations in flight; want 2 records waiting on 2", ran, out[0].Status, out[1].Status, in.AsyncInFlight())
	}

	pc := &config.Pipeline{Async: config.Async{MaxInFlight: 2}}
	d := &Deps{Config: pc, Mods: &version.Modules{}, Budget: budget.New(1000, 1<<40, 1<<40)}
	d.Mods.Async.Store(true)
	w := &worker{t: &Task{d: d}, inst: in}
	due := time.Now().Add(-time.Second)
	w.retry.add(&job{rare: &jobRare{due: due}})
	if next := w.nextWake(true, false); !next.IsZero() && !next.After(time.Now()) {
		t.Fatalf("at the bound, nextWake is %v ago: the worker would spin on the due retry", time.Since(next))
	}
	w.startDueRetries()
	if w.retry.len() != 1 {
		t.Fatal("a due retry was started at async.max_in_flight")
	}
	pc.Async.MaxInFlight = 3 // room for one more on the instance
	if next := w.nextWake(true, false); !next.Equal(due) {
		t.Fatalf("with room, nextWake is %v, want the retry's due time %v", next, due)
	}

	// The host's bound (host.max_async_in_flight) full: the retry waits
	// too, and the worker looks again in a moment (another instance's
	// completion frees that room, which this worker does not hear of).
	d.Budget.LimitAsync(2, func() int64 { return 2 })
	w.startDueRetries()
	if w.retry.len() != 1 {
		t.Fatal("a due retry was started at host.max_async_in_flight")
	}
	now := time.Now()
	if next := w.nextWake(true, false); !next.After(now) || next.After(now.Add(time.Second)) {
		t.Fatalf("at the host's bound, nextWake is %v from now, want a recheck soon", next.Sub(now))
	}
}
