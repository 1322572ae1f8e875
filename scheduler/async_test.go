package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/lookupsrv"
)

func asyncKeys(srv *lookupsrv.Server, extra string) string {
	return fmt.Sprintf(`    env: {LOOKUP_URL: "%s/users/"}
    async:
      http: {allow_hosts: [%q]}
%s`, srv.URL, srv.Host(), extra)
}

type lookupOut struct {
	Key    string
	Record json.RawMessage
	Lookup *struct{ ID string }
}

func decodeLookup(t testing.TB, r *kgo.Record) lookupOut {
	var o lookupOut
	if err := json.Unmarshal(r.Value, &o); err != nil {
		t.Fatalf("output %q: %v", r.Value, err)
	}
	if o.Lookup == nil || o.Lookup.ID != o.Key || string(r.Key) != o.Key {
		t.Fatalf("output %q: the lookup result belongs to another record", r.Value)
	}
	return o
}

// Ordering partition with async pipelining: one instance keeps many lookups
// in flight, completions arrive in random order, and outputs come out in
// offset order; the instance's bound on operations holds.
func TestAsyncPartitionOrderAndLimit(t *testing.T) {
	srv := lookupsrv.New(t, func(string) time.Duration { return time.Duration(rand.IntN(25)) * time.Millisecond })
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 1500
	kafkatest.Produce(t, brokers, "in", n, func(i int) string { return fmt.Sprintf(`"v%05d"`, i) })
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "lookup"), "in", "out", "dlq",
		asyncKeys(srv, "      max_in_flight: 20"), "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n })
	for i, rec := range rd.Recs {
		o := decodeLookup(t, rec)
		if want := fmt.Sprintf(`"v%05d"`, i); string(o.Record) != want {
			t.Fatalf("output %d is of record %s, want %s: partition order broken", i, o.Record, want)
		}
	}
	if p := srv.Peak.Load(); p > 20 || p < 10 {
		t.Fatalf("peak concurrent lookups %d, want 10..20 (async.max_in_flight 20)", p)
	}
	kafkatest.Eventually(t, 10*time.Second, "committed to the end", func() bool {
		return kafkatest.Committed(t, brokers, "g.p", "in")[0] == n
	})
	t.Logf("peak concurrent lookups %d", srv.Peak.Load())
}

// Ordering key: a key's records run one at a time and in order, keys
// overlap; the bound per instance times the instances holds.
func TestAsyncKeyOrder(t *testing.T) {
	srv := lookupsrv.New(t, func(string) time.Duration { return time.Duration(rand.IntN(20)) * time.Millisecond })
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 1200
	cl := kafkatest.Client(t, brokers)
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprintf("key%02d", i%40)), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "lookup"), "in", "out", "dlq",
		"    ordering: key\n    instances: {min: 1, max: 2}\n"+asyncKeys(srv, "      max_in_flight: 8"), "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n })
	last := map[string]int{}
	for _, rec := range rd.Recs {
		o := decodeLookup(t, rec)
		var i int
		json.Unmarshal(o.Record, &i)
		if prev, ok := last[o.Key]; ok && i <= prev {
			t.Fatalf("key %s: record %d after %d", o.Key, i, prev)
		}
		last[o.Key] = i
	}
	if p := srv.Peak.Load(); p > 16 || p < 4 {
		t.Fatalf("peak concurrent lookups %d, want 4..16 (8 per instance, 2 instances)", p)
	}
	t.Logf("peak concurrent lookups %d", srv.Peak.Load())
}

// A record the guest never decides fails at its deadline and goes to the
// dead-letter topic; it does not hold the partition: the records after it
// are output and committed.
func TestAsyncLeakDoesNotBlock(t *testing.T) {
	srv := lookupsrv.New(t, nil)
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	cl := kafkatest.Client(t, brokers)
	recs := []*kgo.Record{{Topic: "in", Key: []byte("leaky"), Headers: []kgo.RecordHeader{{Key: "lookup.mode", Value: []byte("leak")}}}}
	for i := 0; i < 300; i++ {
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint("k", i))})
	}
	recs = append(recs, &kgo.Record{Topic: "in", Key: []byte("hang-1")})
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "lookup"), "in", "out", "dlq", "    ordering: none\n"+asyncKeys(srv, ""), "")
	cfg.Pipelines[0].Limits.RecordTimeout = time.Second
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	out := kafkatest.NewReader(t, brokers, "out")
	out.ReadUntil(t, time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= 300 })
	dlq := kafkatest.NewReader(t, brokers, "dlq")
	dlq.ReadUntil(t, time.Minute, "the leak and the hang dead-lettered", func(rs []*kgo.Record) bool { return len(rs) >= 2 })
	for _, d := range dlq.Recs {
		kind := kafkatest.Header(d, HeaderErrorKind)
		msg := kafkatest.Header(d, HeaderError)
		if kind != "fault.deadline" || !strings.Contains(msg, "while waiting on 1 asynchronous operation") {
			t.Fatalf("dead letter %s: %s %s", d.Key, kind, msg)
		}
	}
	kafkatest.Eventually(t, 10*time.Second, "committed to the end", func() bool {
		return kafkatest.Committed(t, brokers, "g.p", "in")[0] == int64(len(recs))
	})
}

// The host's bound on asynchronous operations holds across tasks: four
// partitions whose instances could each keep 50 lookups in flight share a
// host bound of 30.
func TestAsyncHostBound(t *testing.T) {
	srv := lookupsrv.New(t, func(string) time.Duration { return 20 * time.Millisecond })
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 4, "in", "out", "dlq")
	const n = 2000
	kafkatest.Produce(t, brokers, "in", n, func(i int) string { return fmt.Sprint(i) })
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "lookup"), "in", "out", "dlq",
		asyncKeys(srv, "      max_in_flight: 50"), "host: {max_async_in_flight: 30}")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n })
	if p := srv.Peak.Load(); p > 30 || p < 15 {
		t.Fatalf("peak concurrent lookups %d, want 15..30 (host.max_async_in_flight 30)", p)
	}
	t.Logf("peak concurrent lookups %d", srv.Peak.Load())
}
