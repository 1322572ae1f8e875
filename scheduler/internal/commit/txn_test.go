package commit

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/background"
	"github.com/wasmstream/wasmstream/scheduler/internal/budget"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// TestTransactionsCommitNowCutsOff: exactly_once hands over the tasks of
// partitions that leave, revoked or lost alike, by cutting them off at
// once — nothing they finish later is released, the sink forgets the
// partitions, the open transaction aborts at its cut — and retires them
// in the background, telling the subscribers once their workers ended.
// It waits for nothing: it runs inside franz-go's session callback. A
// hand-over naming no partition does nothing.
func TestTransactionsCommitNowCutsOff(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pc := &config.Pipeline{Name: "x", Ordering: config.OrderPartition, MaxInFlight: 10, MaxInFlightBytes: 1 << 20, BatchRecords: 1}
	var stopped atomic.Bool
	set := partition.NewSet(&stopped)
	set.Start(&partition.Deps{Config: pc, Log: log, Budget: budget.New(10, 1<<30, 1000), Stats: &hooks.Stats{},
		PartStats: func(string, int32) *hooks.Stats { return &hooks.Stats{} }, Role: partition.Primary{}, Ledger: trackerLedger{}})
	set.Assign(map[string][]int32{"in": {0, 1}}, nil)
	lc := &lifecycle{}
	var bg background.Group
	t.Cleanup(bg.Close)
	x := NewTransactions(Deps{Pipeline: pc, Log: log, Tasks: set, Background: &bg,
		Forget: func(parts map[string][]int32) { lc.add("forget " + string(rune('0'+len(parts["in"])))) },
		Gone: func(ts []*partition.Task) func() {
			lc.add("gone " + names(ts))
			return func() { lc.add("after " + names(ts)) }
		},
	}, nil, "x")
	if !x.CommitNow(context.Background(), map[string][]int32{}, nil, false) || len(lc.got()) != 0 || x.revokedSince.Load() {
		t.Fatalf("a hand-over of no partition did %q (revoked since the cut: %v)", lc.got(), x.revokedSince.Load())
	}
	leaving := map[string][]int32{"in": {0}}
	tasks := set.Detach(leaving)
	x.CommitNow(context.Background(), leaving, tasks, true)
	if !tasks[0].Dead.Load() {
		t.Error("the lost partition's task is not cut off")
	}
	if !x.revokedSince.Load() {
		t.Error("the open transaction would not abort at its cut")
	}
	want := []string{"forget 1", "gone 0", "after 0"}
	for deadline := time.Now().Add(30 * time.Second); !slices.Equal(lc.got(), want); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("lifecycle %q, want %q within 30s", lc.got(), want)
		}
	}
	if ts := set.Attached(); len(ts) != 1 || ts[0].Partition != 1 || ts[0].Dead.Load() {
		t.Errorf("the partition that stayed was touched: attached %d", len(ts))
	}
	for _, tk := range set.Attached() {
		tk.Stop()
		tk.Close()
	}
}
