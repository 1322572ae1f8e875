package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/windowmodel"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// windowInput is a seeded random input of a tumbling count per key: each
// record's key, partition (the key's, of parts) and timestamp, on a clock
// that moves forward with records up to 500 ms out of order (some within
// the 300 ms grace, some late beyond it).
type windowInput struct {
	keys  []string
	parts []int32
	ts    []int64
}

func newWindowInput(seed uint64, n, parts int) windowInput {
	rng := rand.New(rand.NewPCG(seed, 58))
	var in windowInput
	// An hour ago, not in 1970: the broker's retention (7 days) would
	// delete a segment of 1970's records between their produce and their
	// consume, whenever its check ran in between.
	clock := time.Now().Add(-time.Hour).Truncate(time.Minute).UnixMilli()
	for range n {
		clock += rng.Int64N(30)
		key := fmt.Sprintf("k%d", rng.IntN(12))
		in.keys = append(in.keys, key)
		in.parts = append(in.parts, state.KeyPartition([]byte(key), parts))
		in.ts = append(in.ts, clock-rng.Int64N(500))
	}
	return in
}

// model is internal/windowmodel's final results of the first n records, one
// partition at a time (stream time is a partition's): "key start end count".
func (in windowInput) model(n, parts int) []string {
	var out []string
	for p := range int32(parts) {
		var recs []windowmodel.Record
		for i := range n {
			if in.parts[i] == p {
				recs = append(recs, windowmodel.Record{Key: in.keys[i], TS: in.ts[i]})
			}
		}
		for _, w := range windowmodel.Tumbling(recs, 1000, 300).Final {
			out = append(out, fmt.Sprintf("%s %d %d %d", w.Key, w.Start, w.End, w.Count))
		}
	}
	slices.Sort(out)
	return out
}

// produce produces records [from, to) of in to topic, each to its key's
// partition, in order.
func (in windowInput) produce(t *testing.T, brokers []string, topic string, from, to int) {
	t.Helper()
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var rs []*kgo.Record
	for i := from; i < to; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: in.parts[i], Key: []byte(in.keys[i]), Value: []byte("click"), Timestamp: time.UnixMilli(in.ts[i])})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// testWindowCount runs plugins/examples/window-count (the Go SDK's
// tumbling windows, 1 s with 300 ms of grace, emitted on close by the
// host's timers) on brokers under guarantee: its read-committed output
// equals internal/windowmodel's final results for a random input with
// records out of order within the grace and late beyond it — every
// (key, window) once, with the model's count — across a clean stop and a
// restart on an empty state directory (the windows still open, their
// state and timers, restored from the changelog, close after it).
func testWindowCount(t *testing.T, brokers []string, guarantee, prefix string) {
	const n, parts = 1200, 2
	in, out, dlq := prefix+"in", prefix+"out", prefix+"dlq"
	kafkatest.CreateTopic(t, brokers, parts, in, out, dlq)
	dir := t.TempDir()
	cfg := testConfigWith(t, brokers, prefix+"g", guestPath(t, "window-count"), in, out, dlq,
		stateConfig(t, brokers, dir, "\n    guarantee: "+guarantee+"\n    env: {WINDOW_SIZE: 1s, WINDOW_GRACE: 300ms}"), "")
	input := newWindowInput(uint64(len(guarantee)), n, parts)
	rd := kafkatest.NewReader(t, brokers, out)
	run := func(upTo int) *Runner {
		t.Helper()
		want := input.model(upTo, parts)
		r := startRunner(t, cfg)
		rd.ReadUntil(t, 2*time.Minute, fmt.Sprintf("the model's %d final windows", len(want)), func(rs []*kgo.Record) bool { return len(rs) >= len(want) })
		rd.ReadFor(time.Second) // anything more would be a duplicate
		var got []string
		for _, r := range rd.Recs {
			got = append(got, fmt.Sprintf("%s %s", r.Key, r.Value))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("after %d records: %d results, the model's %d\n got %v\nwant %v", upTo, len(got), len(want), got, want)
		}
		return r
	}
	input.produce(t, brokers, in, 0, n/2)
	r := run(n / 2)
	fired := r.Pipelines()[0].counters.stats.TimersFired.Load()
	r.Stop(context.Background())
	if fired == 0 {
		t.Fatal("no timer fired")
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	input.produce(t, brokers, in, n/2, n)
	r = run(n)
	defer r.Stop(context.Background())
	if got := r.Pipelines()[0].counters.stats.StateRestored.Load(); got == 0 {
		t.Error("nothing was restored from the changelog")
	}
}

func TestWindowCountMatchesTheModel(t *testing.T) {
	t.Parallel() // owns its in-process brokers; asserts no timing
	for _, g := range []string{"at_least_once", "exactly_once"} {
		t.Run(g, func(t *testing.T) {
			t.Parallel()
			testWindowCount(t, kafkatest.Fake(t), g, "")
		})
	}
}
