package scheduler

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// statefillPath builds host/testdata/statefill, a processor that writes
// as many values as its records ask for.
func statefillPath(t *testing.T) string {
	return moduleFile(t, "statefill", func() []byte { return wt.BuildGoGuest(t, "host/testdata/statefill") })
}

// fillRecord asks statefill to write n values of size bytes under key/<i>
// (or to delete those keys: del).
func fillRecord(key string, n, size int, del bool) *kgo.Record {
	r := &kgo.Record{Topic: "in", Key: []byte(key), Headers: []kgo.RecordHeader{
		{Key: "fill.n", Value: []byte(strconv.Itoa(n))}, {Key: "fill.bytes", Value: []byte(strconv.Itoa(size))}}}
	if del {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "fill.delete"})
	}
	return r
}

func produce(t *testing.T, brokers []string, rs ...*kgo.Record) {
	t.Helper()
	if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// One record writing 1,000 values of 64 KiB (64 MiB) under the default
// limits: its state writes are refused past limits.max_output_bytes
// (16 MiB), so it is dead-lettered with the limit errno's message and
// nothing of it reaches the changelog; the next record's writes do (before,
// the record succeeded and put 64 MiB on the changelog and in the store).
func TestStateWriteFloodDeadLettered(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	cfg := testConfigWith(t, brokers, "g", statefillPath(t), "in", "out", "dlq", stateConfig(t, brokers, t.TempDir(), ""), "")
	produce(t, brokers, fillRecord("flood", 1000, 64<<10, false), fillRecord("ok", 2, 10, false))
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	dlq := kafkatest.NewReader(t, brokers, "dlq")
	dlq.ReadUntil(t, time.Minute, "the flood dead-lettered", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	if got := kafkatest.Header(dlq.Recs[0], "wasmstream.error"); string(dlq.Recs[0].Key) != "flood" || !strings.Contains(got, "output limit reached") {
		t.Fatalf("dead letter %q: error %q", dlq.Recs[0].Key, got)
	}
	cl := kafkatest.NewReader(t, brokers, cfg.Pipelines[0].State.Changelog)
	cl.ReadUntil(t, time.Minute, "the next record's writes", func(rs []*kgo.Record) bool { return len(rs) >= 2 })
	cl.ReadFor(300 * time.Millisecond)
	bytes := 0
	for _, rec := range cl.Recs {
		bytes += len(rec.Key) + len(rec.Value)
		if !strings.HasPrefix(string(rec.Key), "ok/") {
			t.Errorf("changelog record %q", rec.Key)
		}
	}
	t.Logf("changelog: %d records, %d bytes", len(cl.Recs), bytes)
}

// state.max_bytes bounds a partition's state: a put past it is refused
// (errno 5; the dead letter names the key and the partition), counted,
// and a delete makes room again once it is applied. The bound holds
// across a restart (the store keeps its count) and a full restore (the
// count is rebuilt from the changelog).
func TestStatePartitionBound(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	dir := t.TempDir()
	const bound = 262144 // three values of 64 KiB and their keys fit, not four
	cfg := testConfigWith(t, brokers, "g", statefillPath(t), "in", "out", "dlq",
		"    state: {enabled: true, dir: "+strconv.Quote(dir)+", max_bytes: "+strconv.Itoa(bound)+"}", "")
	dlq := kafkatest.NewReader(t, brokers, "dlq")
	deadLetters := func(n int, key string) {
		t.Helper()
		dlq.ReadUntil(t, time.Minute, "dead letter "+key, func(rs []*kgo.Record) bool { return len(rs) >= n })
		d := dlq.Recs[n-1]
		if got := kafkatest.Header(d, "wasmstream.error"); string(d.Key) != key || !strings.Contains(got, "state.max_bytes") || !strings.Contains(got, "partition 0") {
			t.Fatalf("dead letter %d: %q, error %q", n, d.Key, got)
		}
	}
	stored := func(r *Runner, what string, want int64) {
		t.Helper()
		kafkatest.Eventually(t, time.Minute, what, func() bool { return r.Pipelines()[0].stateSizes()[0].Data == want })
	}
	const entry = 3 + 64<<10 // "a/0" and its value

	r := startRunner(t, cfg)
	produce(t, brokers, fillRecord("a", 3, 64<<10, false), fillRecord("b", 1, 64<<10, false))
	deadLetters(1, "b")
	stored(r, "a's values in the store", 3*entry)
	reader := metricsOf(t, r)
	m := collect(t, reader)
	if refused, held := sumInt(m["wasmstream.state.refused"], all), sumInt(m["wasmstream.state.bytes"], all); refused != 1 || held != 3*entry {
		t.Fatalf("wasmstream.state.refused %d, wasmstream.state.bytes %d; want 1, %d", refused, held, 3*entry)
	}
	produce(t, brokers, fillRecord("a", 1, 0, true)) // deletes a/0
	stored(r, "a/0's delete applied", 2*entry)
	produce(t, brokers, fillRecord("b", 1, 64<<10, false)) // fits now
	stored(r, "b's value in the store", 3*entry)
	r.Stop(context.Background())

	// A restart on the same stores: the count is the store's.
	r = startRunner(t, cfg)
	produce(t, brokers, fillRecord("c", 1, 64<<10, false))
	deadLetters(2, "c")
	r.Stop(context.Background())

	// A full restore: the count is rebuilt from the changelog.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	r = startRunner(t, cfg)
	defer r.Stop(context.Background())
	stored(r, "the restored store", 3*entry)
	produce(t, brokers, fillRecord("d", 1, 64<<10, false))
	deadLetters(3, "d")
}
