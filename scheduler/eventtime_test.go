package scheduler

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// produceAt produces records of key with the values and timestamps given,
// in order, to partition 0 of topic.
func produceAt(t *testing.T, brokers []string, topic, key string, at map[string]int64, order ...string) {
	t.Helper()
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, v := range order {
		r := &kgo.Record{Topic: topic, Partition: 0, Key: []byte(key), Value: []byte(v), Timestamp: time.UnixMilli(at[v])}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEventTimeAcrossRestarts runs host/testdata/eventtime (two-part state
// keys and stream time, ABI.md §4.2, through the Go SDK's window.Bind) on
// the in-process broker: each output names the stream time the record saw
// and the subs of its key. Stream time and the two-part keys survive a
// clean restart (read from the store) and the loss of the state directory
// (restored from the changelog), at least once and exactly once: the
// first record after each restart sees the last record before it. A
// dead-lettered record moves it too.
func TestEventTimeAcrossRestarts(t *testing.T) {
	t.Parallel() // owns its in-process brokers; asserts no timing
	module := moduleFile(t, "eventtime", func() []byte { return wt.BuildGoGuest(t, "host/testdata/eventtime") })
	for _, guarantee := range []string{"at_least_once", "exactly_once"} {
		t.Run(guarantee, func(t *testing.T) {
			t.Parallel()
			brokers := kafkatest.Fake(t)
			kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
			dir := t.TempDir()
			cfg := testConfigWith(t, brokers, "g", module, "in", "out", "dlq",
				stateConfig(t, brokers, dir, "\n    guarantee: "+guarantee), "")
			rd := kafkatest.NewReader(t, brokers, "out")
			at := map[string]int64{"a": 1000, "b": 1001, "c": 1003, "d": 1002, "e": 2000, "f": 3000, "fail": 4000, "g": 3500, "h": 5000}
			// last runs the pipeline until it emitted n outputs in all, and
			// returns the last one's value.
			last := func(n int) string {
				t.Helper()
				r := startRunner(t, cfg)
				defer r.Stop(context.Background())
				rd.ReadUntil(t, time.Minute, fmt.Sprintf("%d outputs", n), func(rs []*kgo.Record) bool { return len(rs) >= n })
				return string(rd.Recs[n-1].Value)
			}
			first := []string{"a", "b", "c", "d"}
			produceAt(t, brokers, "in", "k", at, first...)
			if got, want := last(4), " 1000=a,1001=b,1002=d,1003=c"; !strings.HasSuffix(got, want) {
				t.Fatalf("first run's last output %q, want the subs%s", got, want)
			}
			// Record i sees the largest timestamp of some of the records
			// before it (those decided when it ran: a run of records is
			// decided after its call), never its own, never going back.
			seen := int64(-1)
			for i, r := range rd.Recs[:4] {
				var st int64
				fmt.Sscan(string(r.Value), &st)
				allowed := st == -1
				top := int64(-1)
				for _, v := range first[:i] {
					top = max(top, at[v])
					allowed = allowed || st == top
				}
				if !allowed || st < seen {
					t.Errorf("record %s (at %d) saw stream time %d (before it: %v; the one before saw %d)", first[i], at[first[i]], st, first[:i], seen)
				}
				seen = st
			}
			produceAt(t, brokers, "in", "k", at, "e")
			if got, want := last(5), "1003 1000=a,1001=b,1002=d,1003=c,2000=e"; got != want {
				t.Fatalf("after a restart: %q, want %q", got, want)
			}
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			produceAt(t, brokers, "in", "k", at, "f")
			if got, want := last(6), "2000 1000=a,1001=b,1002=d,1003=c,2000=e,3000=f"; got != want {
				t.Fatalf("after a restore from the changelog: %q, want %q", got, want)
			}
			// A dead-lettered record is decided: it moves stream time, and
			// the next committed record writes it.
			dlq := kafkatest.NewReader(t, brokers, "dlq")
			r := startRunner(t, cfg)
			produceAt(t, brokers, "in", "k", at, "fail")
			dlq.ReadUntil(t, time.Minute, "the record dead-lettered", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
			produceAt(t, brokers, "in", "k", at, "g")
			rd.ReadUntil(t, time.Minute, "7 outputs", func(rs []*kgo.Record) bool { return len(rs) >= 7 })
			r.Stop(context.Background())
			if got := string(rd.Recs[6].Value); !strings.HasPrefix(got, "4000 ") {
				t.Fatalf("after a dead-lettered record at 4000: %q", got)
			}
			produceAt(t, brokers, "in", "k", at, "h")
			if got := last(8); !strings.HasPrefix(got, "4000 ") || !strings.HasSuffix(got, ",3000=f,3500=g,5000=h") {
				t.Fatalf("after a restart: %q", got)
			}
			if t.Failed() {
				for _, r := range rd.Recs {
					t.Logf("output %q", r.Value)
				}
			}
		})
	}
}

// TestEventTimeRebalance: the partition moves from host a to host b (b
// joins, a leaves), and b, with a state directory of its own, restores
// the stream time from the changelog with the state: its first record
// sees a's last.
func TestEventTimeRebalance(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	module := moduleFile(t, "eventtime", func() []byte { return wt.BuildGoGuest(t, "host/testdata/eventtime") })
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	host := func(id string) *Runner {
		return startRunner(t, testConfigWith(t, brokers, "g", module, "in", "out", "dlq",
			stateConfig(t, brokers, t.TempDir(), ""), "host:\n  id: "+id))
	}
	rd := kafkatest.NewReader(t, brokers, "out")
	at := map[string]int64{"a": 1000, "b": 1500, "c": 1200}
	a := host("a")
	produceAt(t, brokers, "in", "k", at, "a", "b")
	rd.ReadUntil(t, time.Minute, "2 outputs", func(rs []*kgo.Record) bool { return len(rs) >= 2 })
	b := host("b")
	defer b.Stop(context.Background())
	a.Stop(context.Background())
	kafkatest.Eventually(t, time.Minute, "b owns the partition", func() bool { return b.Snapshots()[0].Tasks == 1 })
	produceAt(t, brokers, "in", "k", at, "c")
	rd.ReadUntil(t, time.Minute, "3 outputs", func(rs []*kgo.Record) bool { return len(rs) >= 3 })
	if got, want := string(rd.Recs[2].Value), "1500 1000=a,1200=c,1500=b"; got != want {
		t.Fatalf("b's first record: %q, want %q", got, want)
	}
	if got := b.Pipelines()[0].counters.stats.StateRestored.Load(); got == 0 {
		t.Error("b restored nothing from the changelog")
	}
}
