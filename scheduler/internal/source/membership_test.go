package source

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/budget"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/offsets"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// The membership of a consumer group's source, without a client or a
// broker: the partition callbacks fill the task map and hand the tasks of
// partitions that leave to the committer, detached once.

// handed records what the source handed its committer.
type handed struct {
	how   string // "revoked" or "lost"
	parts map[string][]int32
	tasks []partition.TP
}

type fakeCommitter struct{ got []handed }

func (*fakeCommitter) Begin() bool { return true }
func (*fakeCommitter) PollContext(ctx context.Context) (context.Context, func()) {
	return ctx, func() {}
}
func (*fakeCommitter) AfterPoll(context.Context) bool { return true }
func (c *fakeCommitter) CommitNow(_ context.Context, parts map[string][]int32, tasks []*partition.Task, lost bool) bool {
	how := "revoked"
	if lost {
		how = "lost"
	}
	c.got = append(c.got, handed{how, parts, tps(tasks)})
	return true
}

func tps(tasks []*partition.Task) []partition.TP {
	out := make([]partition.TP, len(tasks))
	for i, t := range tasks {
		out[i] = partition.TP{Topic: t.Topic, Partition: t.Partition}
	}
	slices.SortFunc(out, func(a, b partition.TP) int { return int(a.Partition - b.Partition) })
	return out
}

// plainLedger tracks offsets and reads no done offsets back.
type plainLedger struct{}

func (plainLedger) Policy() partition.LedgerPolicy               { return partition.LedgerPolicy{Tracks: true} }
func (plainLedger) Done(tr *offsets.Tracker, r *kgo.Record) bool { return tr.Done(r.Offset) }
func (plainLedger) Abandon(*kgo.Record) bool                     { return false }

// newMember is a consumer group's source over a task map whose tasks run
// no worker (instances.min 0); opening answers the assignment's
// subscribers.
func newMember(t *testing.T, opening func(context.Context, map[string][]int32) bool) (*Group, *fakeCommitter, *partition.Set) {
	t.Helper()
	var stopped atomic.Bool
	set := partition.NewSet(&stopped)
	set.Start(&partition.Deps{
		Config: &config.Pipeline{Name: "m", Ordering: config.OrderPartition, MaxInFlight: 10, MaxInFlightBytes: 1 << 20, BatchRecords: 1},
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)), Budget: budget.New(10, 1<<30, 1000), Stats: &hooks.Stats{},
		PartStats: func(string, int32) *hooks.Stats { return &hooks.Stats{} }, Role: partition.Primary{}, Ledger: plainLedger{},
	})
	c := &fakeCommitter{}
	g := NewGroup(Deps{Tasks: set, Opening: opening, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, c)
	t.Cleanup(func() {
		for _, tk := range set.Attached() {
			tk.Stop()
			tk.Close()
		}
	})
	return g, c, set
}

func TestMembershipAssignedRevokedLost(t *testing.T) {
	t.Parallel()
	var opened []map[string][]int32
	g, c, set := newMember(t, func(_ context.Context, a map[string][]int32) bool {
		opened = append(opened, a)
		return true
	})
	g.Assigned(context.Background(), map[string][]int32{"in": {0, 1, 2}})
	if len(opened) != 1 || len(set.Attached()) != 3 {
		t.Fatalf("opened %d times, %d tasks attached: want the subscribers told once, then 3 tasks", len(opened), len(set.Attached()))
	}
	g.Revoked(context.Background(), map[string][]int32{"in": {0, 7}})
	g.Lost(map[string][]int32{"in": {2}})
	g.Revoked(context.Background(), map[string][]int32{"in": {0}}) // detached already
	g.Revoked(context.Background(), nil)                           // still a hand-over, never the periodic commit
	want := []handed{
		{"revoked", map[string][]int32{"in": {0, 7}}, []partition.TP{{Topic: "in", Partition: 0}}},
		{"lost", map[string][]int32{"in": {2}}, []partition.TP{{Topic: "in", Partition: 2}}},
		{"revoked", map[string][]int32{"in": {0}}, []partition.TP{}},
		{"revoked", map[string][]int32{}, []partition.TP{}},
	}
	if len(c.got) != len(want) {
		t.Fatalf("the committer was handed %+v, want %+v", c.got, want)
	}
	for i := range want {
		if c.got[i].parts == nil {
			t.Errorf("handed %d: parts nil, which asks the committer for the periodic commit, not a hand-over", i)
		}
		if c.got[i].how != want[i].how || !slices.Equal(c.got[i].parts["in"], want[i].parts["in"]) || !slices.Equal(c.got[i].tasks, want[i].tasks) {
			t.Errorf("handed %d: %+v, want %+v", i, c.got[i], want[i])
		}
	}
	if ts := tps(set.Attached()); !slices.Equal(ts, []partition.TP{{Topic: "in", Partition: 1}}) {
		t.Errorf("attached %v, want partition 1 alone", ts)
	}
}

// TestMembershipOpeningRefused: when an assignment's subscriber refuses
// (a state store that cannot open fails the pipeline), no task is made.
func TestMembershipOpeningRefused(t *testing.T) {
	t.Parallel()
	g, _, set := newMember(t, func(context.Context, map[string][]int32) bool { return false })
	g.Assigned(context.Background(), map[string][]int32{"in": {0}})
	if n := len(set.Attached()); n != 0 {
		t.Errorf("%d tasks made after the assignment's subscriber refused", n)
	}
}
