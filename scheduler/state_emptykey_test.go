package scheduler

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// produceWithEmptyKeys produces n records keyed "k<i%97>" to topic (of
// parts partitions), with a record of the empty key after every 50th and a
// record of a null key, sent to the empty key's partition, after every
// 150th. It returns the true counts it added to want ("" for the empty and
// null keys: the count example counts a null key under the empty key).
func produceWithEmptyKeys(t *testing.T, brokers []string, topic string, parts, n int, want map[string]int) {
	t.Helper()
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	emptyPart := state.KeyPartition(nil, parts)
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%d", i%stateKeys)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(strconv.Itoa(i)), Partition: state.KeyPartition([]byte(k), parts)})
		want[k]++
		if i%50 == 49 {
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte{}, Value: []byte("empty"), Partition: emptyPart})
			want[""]++
		}
		if i%150 == 149 {
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte("null"), Partition: emptyPart})
			want[""]++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestStateEmptyKey: records with an empty key, and with a null key on the
// partition the empty key belongs to, among ordinary keys: the count
// example counts them under the empty key, and every key's count is exact
// while the host runs, after a clean restart and after a full restore on a
// wiped state directory (the empty key is a state key like any other, in
// the store and on the changelog). Before, the store refused the empty key
// when a commit applied the writes, the whole flush was dropped from the
// overlay (the partition's other keys counted from an older value), and
// every later restore of the partition failed on the changelog's
// null-keyed record: the pipeline failed at each start.
func TestStateEmptyKey(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	const parts = 4
	kafkatest.CreateTopic(t, brokers, parts, "in", "out", "dlq")
	dir := t.TempDir()
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "count"), "in", "out", "dlq", stateConfig(t, brokers, dir, ""), "")
	rd := kafkatest.NewReader(t, brokers, "out")
	want := map[string]int{}
	const n = 1500
	run := func(what string) {
		t.Helper()
		r := startRunner(t, cfg)
		defer r.Stop(context.Background())
		// Two batches: the second counts on from what the commits after
		// the first applied to the store.
		for range 2 {
			produceWithEmptyKeys(t, brokers, "in", parts, n/2, want)
			top := countUntil(t, r, rd, want)
			checkCounts(t, top, want)
		}
		if s := r.Pipelines()[0].Snapshot(); s.DeadLetter > 0 {
			t.Errorf("%s: %d records dead-lettered", what, s.DeadLetter)
		}
		t.Logf("%s: the empty key counted to %d, %d keys exact", what, want[""], len(want))
	}
	run("first run")
	run("clean restart")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	run("restart on a wiped state directory")
}

// countUntil reads the count outputs until every key reached its count in
// want (failing at once when the runner fails: a restore that cannot go on
// fails the pipeline), and a little longer; it returns each key's highest
// count.
func countUntil(t *testing.T, r *Runner, rd *kafkatest.Reader, want map[string]int) map[string]int {
	t.Helper()
	top := func(rs []*kgo.Record) map[string]int {
		out := map[string]int{}
		for _, rec := range rs {
			c, err := strconv.Atoi(string(rec.Value))
			if err != nil {
				t.Fatalf("output %q: %v", rec.Value, err)
			}
			out[string(rec.Key)] = max(out[string(rec.Key)], c)
		}
		return out
	}
	rd.ReadUntil(t, time.Minute, "every key at its count", func(rs []*kgo.Record) bool {
		select {
		case err := <-r.Failed():
			t.Fatalf("the runner failed: %v", err)
		default:
		}
		got := top(rs)
		for k, c := range want {
			if got[k] < c {
				return false
			}
		}
		return true
	})
	rd.ReadFor(300 * time.Millisecond) // anything over the truth
	return top(rd.Recs)
}

// TestStateRestoreSkipsWhatStoreCannotHold: changelog records the store
// cannot hold — keys of 2 KiB and 40 KiB (over the 1 KiB a guest may use;
// bbolt's own bound is 32 KiB) — are skipped and counted by a restore,
// which goes on: the host starts and every count is exact. A null-keyed
// record (what a host before the empty key was stored wrote for it) is
// restored as the empty key. Before, the first such record failed the
// restore, and the pipeline with it, at every start.
func TestStateRestoreSkipsWhatStoreCannotHold(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	const parts = 2
	kafkatest.CreateTopic(t, brokers, parts, "in", "out", "dlq")
	dir := t.TempDir()
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "count"), "in", "out", "dlq", stateConfig(t, brokers, dir, ""), "")
	rd := kafkatest.NewReader(t, brokers, "out")
	want := map[string]int{}
	produce := func() {
		for i := 0; i < 400; i++ {
			want[fmt.Sprintf("k%d", i%stateKeys)]++
		}
		kafkatest.Produce(t, brokers, "in", 400, strconv.Itoa)
	}
	produce()
	r := startRunner(t, cfg)
	checkCounts(t, countUntil(t, r, rd, want), want)
	r.Stop(context.Background())

	// Written to the changelog by hand, on the empty key's partition: the
	// empty key's count as a host before this one wrote it (null), and
	// two keys no store can hold.
	emptyPart := state.KeyPartition(nil, parts)
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	changelog := cfg.Pipelines[0].State.Changelog
	if err := cl.ProduceSync(context.Background(),
		&kgo.Record{Topic: changelog, Partition: emptyPart, Value: []byte("7")},
		&kgo.Record{Topic: changelog, Partition: emptyPart, Key: make([]byte, 2<<10), Value: []byte("1")},
		&kgo.Record{Topic: changelog, Partition: emptyPart, Key: make([]byte, 40<<10), Value: []byte("1")},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}
	want[""] = 7
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	produce()
	produceWithEmptyKeys(t, brokers, "in", parts, 150, want)
	r = startRunner(t, cfg)
	defer r.Stop(context.Background())
	checkCounts(t, countUntil(t, r, rd, want), want)
	if got := r.Pipelines()[0].counters.stats.StateRestoreSkipped.Load(); got != 2 {
		t.Errorf("%d changelog records skipped, want 2", got)
	}
	t.Logf("restore skipped %d records; the empty key went on from 7 to %d", r.Pipelines()[0].counters.stats.StateRestoreSkipped.Load(), want[""])
}
