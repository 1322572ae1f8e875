package commit

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/budget"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/offsets"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// The at_least_once committer's lifecycle on tasks the source detached,
// on the in-process broker: what a revoke commits, in which order it
// drains, commits, closes and tells the subscribers, and that a lost
// partition commits nothing.

// trackerLedger tracks offsets, as ledger.Offsets does (that package sits
// beside this one: neither imports the other).
type trackerLedger struct{}

func (trackerLedger) Policy() partition.LedgerPolicy               { return partition.LedgerPolicy{Tracks: true} }
func (trackerLedger) Done(tr *offsets.Tracker, r *kgo.Record) bool { return tr.Done(r.Offset) }
func (trackerLedger) Abandon(*kgo.Record) bool                     { return false }

// lifecycle records what a committer did through its Deps, in order.
type lifecycle struct {
	mu     sync.Mutex
	events []string
}

func (l *lifecycle) add(e string) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *lifecycle) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// newOffsets is an Offsets committer of group g on cluster c, over a task
// map whose tasks run no worker; its Deps record the lifecycle.
func newOffsets(t *testing.T, c *kfake.Cluster, g string, with ...func(*Deps)) (*Offsets, *partition.Set, *lifecycle, *kgo.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup(g), kgo.ConsumeTopics("in"), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	done := false
	cfg := &config.Config{Kafka: config.Kafka{RecordDoneOffsets: &done, CommitInterval: time.Hour}}
	pc := &config.Pipeline{Name: "c", Ordering: config.OrderPartition, MaxInFlight: 10, MaxInFlightBytes: 1 << 20, BatchRecords: 1}
	var stopped atomic.Bool
	set := partition.NewSet(&stopped)
	set.Start(&partition.Deps{Config: pc, Log: log, Budget: budget.New(10, 1<<30, 1000), Stats: &hooks.Stats{},
		PartStats: func(string, int32) *hooks.Stats { return &hooks.Stats{} }, Role: partition.Primary{}, Ledger: trackerLedger{}})
	lc := &lifecycle{}
	var failed atomic.Bool
	d := Deps{Config: cfg, Pipeline: pc, Group: g, Client: cl, Log: log, Stats: &hooks.Stats{}, Failed: &failed,
		Tasks: set,
		Drain: func(ts []*partition.Task) { lc.add("drain " + names(ts)) },
		Gone: func(ts []*partition.Task) func() {
			lc.add("gone " + names(ts))
			return func() { lc.add("after " + names(ts)) }
		},
		OnCommitted: func(t *partition.Task, upTo int64) { lc.add("committed " + names([]*partition.Task{t})) },
	}
	for _, f := range with {
		f(&d)
	}
	return NewOffsets(d), set, lc, cl
}

func names(ts []*partition.Task) string {
	s := ""
	for _, t := range ts {
		s += string(rune('0' + t.Partition))
	}
	return s
}

// TestOffsetsRevokedCommitsBeforeTheMove: a revoke drains the tasks,
// commits their watermarks, closes them and tells the subscribers, in that
// order, under commitMu; a lost partition's task is never committed.
func TestOffsetsRevokedCommitsBeforeTheMove(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	o, set, lc, cl := newOffsets(t, c, "g")
	set.Assign(map[string][]int32{"in": {0, 1}}, nil)
	t0, t1 := set.Get(partition.TP{Topic: "in", Partition: 0}), set.Get(partition.TP{Topic: "in", Partition: 1})
	for _, tk := range []*partition.Task{t0, t1} {
		for off := int64(0); off < 5; off++ {
			tk.Tracker.Add(off, 0)
		}
		for _, off := range []int64{0, 1, 2, 4} {
			tk.Tracker.Done(off) // watermark 3: offset 3 is not done
		}
	}
	o.CommitNow(context.Background(), map[string][]int32{"in": {1}}, set.Detach(map[string][]int32{"in": {1}}), true)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	o.CommitNow(ctx, map[string][]int32{"in": {0}}, set.Detach(map[string][]int32{"in": {0}}), false)
	want := []string{"gone 1", "after 1", "drain 0", "committed 0", "gone 0", "after 0"}
	if got := lc.got(); !slices.Equal(got, want) {
		t.Errorf("lifecycle %q, want %q", got, want)
	}
	if !o.commitMu.TryLock() {
		t.Fatal("commitMu still held after the revoke")
	}
	o.commitMu.Unlock()
	if got := t0.Committed.Load(); got != 3 {
		t.Errorf("task 0 committed %d, want 3 (the watermark)", got)
	}
	resp, err := kadm.NewClient(cl).FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := resp.Lookup("in", 0); !ok || o.At != 3 {
		t.Errorf("the group's offset of in/0 is %+v (found %v), want 3", o, ok)
	}
	if o, ok := resp.Lookup("in", 1); ok && o.At >= 0 {
		t.Errorf("the lost partition in/1 was committed at %d", o.At)
	}
	o.CommitNow(ctx, map[string][]int32{"in": {0}}, nil, false) // nothing attached: nothing to do
	if n := len(lc.got()); n != len(want) {
		t.Errorf("a revoke with no task did %q", lc.got()[len(want):])
	}
}

// doneUpTo adds offsets 0-4 to each task's tracker and marks all but 3
// done: the watermark is 3.
func doneUpTo3(tasks ...*partition.Task) {
	for _, tk := range tasks {
		for off := int64(0); off < 5; off++ {
			tk.Tracker.Add(off, 0)
		}
		for _, off := range []int64{0, 1, 2, 4} {
			tk.Tracker.Done(off)
		}
	}
}

// TestOffsetsCommitNowAttached: the periodic commit (CommitNow with
// nothing leaving) commits the attached tasks' watermarks and nothing of a
// detached one, drains nothing and tells no subscriber of a partition
// gone; asked again with no watermark moved, it sends no commit.
func TestOffsetsCommitNowAttached(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	stats := &hooks.Stats{}
	o, set, lc, cl := newOffsets(t, c, "g", func(d *Deps) { d.Stats = stats })
	set.Assign(map[string][]int32{"in": {0, 1}}, nil)
	t0, t1 := set.Get(partition.TP{Topic: "in", Partition: 0}), set.Get(partition.TP{Topic: "in", Partition: 1})
	doneUpTo3(t0, t1)
	set.Detach(map[string][]int32{"in": {1}}) // left without a hand-over: not the committer's any more
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !o.CommitNow(ctx, nil, nil, false) {
		t.Fatal("the periodic commit says the pipeline cannot go on")
	}
	if got, want := lc.got(), []string{"committed 0"}; !slices.Equal(got, want) {
		t.Errorf("lifecycle %q, want %q", got, want)
	}
	if t0.Committed.Load() != 3 || t1.Committed.Load() == 3 {
		t.Errorf("committed %d and %d, want 3 for the attached task and nothing for the detached one", t0.Committed.Load(), t1.Committed.Load())
	}
	o.CommitNow(ctx, nil, nil, false)
	if n := stats.Commits.Load(); n != 1 {
		t.Errorf("%d commits sent, want 1: the second found no watermark moved", n)
	}
	resp, err := kadm.NewClient(cl).FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := resp.Lookup("in", 0); !ok || o.At != 3 {
		t.Errorf("the group's offset of in/0 is %+v (found %v), want 3", o, ok)
	}
	if o, ok := resp.Lookup("in", 1); ok && o.At >= 0 {
		t.Errorf("the detached partition in/1 was committed at %d", o.At)
	}
}

// TestOffsetsStartCommitsEveryInterval: Start runs the commit loop, owned
// by Deps.Loops: it commits every kafka.commit_interval and ends once
// Deps.Quit closes.
func TestOffsetsStartCommitsEveryInterval(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	var loops sync.WaitGroup
	quit := make(chan struct{})
	o, set, _, _ := newOffsets(t, c, "g", func(d *Deps) {
		d.Config.Kafka.CommitInterval = 10 * time.Millisecond
		d.Loops, d.Quit = &loops, quit
	})
	set.Assign(map[string][]int32{"in": {0}}, nil)
	t0 := set.Get(partition.TP{Topic: "in", Partition: 0})
	o.Start()
	doneUpTo3(t0)
	for deadline := time.Now().Add(30 * time.Second); t0.Committed.Load() != 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the commit loop did not commit the watermark within 30s (committed %d)", t0.Committed.Load())
		}
	}
	close(quit)
	ended := make(chan struct{})
	go func() { loops.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("the commit loop did not end within 30s of Quit")
	}
}
