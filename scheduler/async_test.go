package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
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
	t.Parallel() // owns its in-process broker; asserts no timing
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

// asyncRunInput is record i of TestAsyncRuns: its key and headers. Most
// records look their key up (they end pending inside their run's call and
// complete later, in any order); every third is decided in its call
// ("local"); some keys answer 503 once (retried in place, then output at
// attempt 2) or 404 (output with a null lookup); a record without a key
// fails for good (dead letter).
func asyncRunInput(i int, retries bool) *kgo.Record {
	r := &kgo.Record{Topic: "in", Value: []byte(fmt.Sprint(i))}
	switch {
	case i%61 == 30:
		return r // no key: a dead letter
	case retries && i%37 == 11:
		r.Key = []byte(fmt.Sprintf("fail%05d", i))
	case i%23 == 7:
		r.Key = []byte(fmt.Sprintf("gone%02d", i%5))
	default:
		r.Key = []byte(fmt.Sprintf("key%02d", i%40))
	}
	if i%3 == 1 {
		r.Headers = []kgo.RecordHeader{{Key: "lookup.mode", Value: []byte("local")}}
	}
	return r
}

// TestAsyncRuns: an asynchronous module's records are taken in runs
// (batch_records): records end pending in the middle of a run's call while
// others of the run are decided in it, and every record keeps what it gets
// alone — its output (its own lookup, or none), its retry in place, its
// dead letter — with outputs in offset order under ordering partition and
// in order per key under ordering key; the instance's bound on operations
// holds, retries in place included (a due retry waits for room under
// async.max_in_flight as a new record does), and calls ran several
// records.
func TestAsyncRuns(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	for _, tc := range []struct {
		name, ordering string
		instances      int
		retries        bool
	}{{"partition", "partition", 1, false}, {"key", "key", 2, false},
		{"partition_retries", "partition", 1, true}, {"key_retries", "key", 2, true}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := lookupsrv.New(t, func(string) time.Duration { return time.Duration(rand.IntN(15)) * time.Millisecond })
			brokers := kafkatest.Fake(t)
			kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
			const n = 1200
			var recs []*kgo.Record
			var dead, fails int
			for i := 0; i < n; i++ {
				r := asyncRunInput(i, tc.retries)
				switch {
				case r.Key == nil:
					dead++
				case strings.HasPrefix(string(r.Key), "fail") && r.Headers == nil:
					fails++
				}
				recs = append(recs, r)
			}
			if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			const maxInFlight = 12
			cfg := testConfigWith(t, brokers, "g", guestPath(t, "lookup"), "in", "out", "dlq",
				fmt.Sprintf("    ordering: %s\n    batch_records: 32\n    instances: {min: 1, max: %d}\n    retry: {mode: inline, max_attempts: 3, backoff: [5ms]}\n", tc.ordering, tc.instances)+
					asyncKeys(srv, fmt.Sprintf("      max_in_flight: %d", maxInFlight)), "")
			r := startRunner(t, cfg)
			defer r.Stop(context.Background())
			out := kafkatest.NewReader(t, brokers, "out")
			out.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n-dead })
			dl := kafkatest.NewReader(t, brokers, "dlq")
			dl.ReadUntil(t, time.Minute, "every dead letter", func(rs []*kgo.Record) bool { return len(rs) >= dead })
			kafkatest.Eventually(t, 10*time.Second, "committed to the end", func() bool {
				return kafkatest.Committed(t, brokers, cfg.GroupID(&cfg.Pipelines[0]), "in")[0] == n
			})

			ended := map[int]string{}
			last, lastOf := -1, map[string]int{}
			for _, rec := range out.Recs {
				var o struct {
					Key     string
					Record  int
					Lookup  *struct{ ID string }
					Attempt int
				}
				if err := json.Unmarshal(rec.Value, &o); err != nil {
					t.Fatalf("output %q: %v", rec.Value, err)
				}
				i := o.Record
				if i < 0 || i >= n {
					t.Fatalf("output %q of no input", rec.Value)
				}
				if prev, dup := ended[i]; dup {
					t.Fatalf("input %d ended twice (%s, then output)", i, prev)
				}
				ended[i] = "output"
				in := recs[i]
				local := in.Headers != nil
				key := string(in.Key)
				switch {
				case o.Key != key || string(rec.Key) != key:
					t.Fatalf("output of input %d has key %q (record key %q), want %q", i, o.Key, rec.Key, key)
				case local || strings.HasPrefix(key, "gone"):
					if o.Lookup != nil {
						t.Fatalf("output of input %d (local %v) has a lookup: %s", i, local, rec.Value)
					}
				case o.Lookup == nil || o.Lookup.ID != key:
					t.Fatalf("output of input %d: the lookup result belongs to another record: %s", i, rec.Value)
				}
				wantAttempt := 1
				if strings.HasPrefix(key, "fail") && !local {
					wantAttempt = 2
				}
				if o.Attempt != wantAttempt {
					t.Fatalf("output of input %d (key %s) at attempt %d, want %d", i, key, o.Attempt, wantAttempt)
				}
				switch tc.ordering {
				case "partition":
					if i <= last {
						t.Fatalf("output of input %d after input %d: partition order broken", i, last)
					}
					last = i
				case "key":
					if prev, ok := lastOf[key]; ok && i <= prev {
						t.Fatalf("key %s: output of input %d after input %d", key, i, prev)
					}
					lastOf[key] = i
				}
			}
			for _, rec := range dl.Recs {
				i, err := strconv.Atoi(string(rec.Value))
				if err != nil || i < 0 || i >= n || recs[i].Key != nil {
					t.Fatalf("dead letter %q (key %q) is not of a record without a key", rec.Value, rec.Key)
				}
				if prev, dup := ended[i]; dup {
					t.Fatalf("input %d ended twice (%s, then dead letter)", i, prev)
				}
				ended[i] = "dead letter"
			}
			if len(ended) != n {
				t.Fatalf("%d of %d inputs ended", len(ended), n)
			}
			if p := srv.Peak.Load(); p > int64(maxInFlight*tc.instances) {
				t.Fatalf("peak concurrent lookups %d, past async.max_in_flight %d × %d instances", p, maxInFlight, tc.instances)
			}
			s := r.Snapshots()[0]
			if s.Runs == 0 || s.RunRecords < 2*s.Runs {
				t.Fatalf("%d runs of %d records: the records were not run in runs", s.Runs, s.RunRecords)
			}
			if s.Retried != int64(fails) {
				t.Fatalf("retried %d, want %d (one per fail key)", s.Retried, fails)
			}
			t.Logf("%d calls ran %d records (of %d); peak concurrent lookups %d", s.Runs, s.RunRecords, n, srv.Peak.Load())
		})
	}
}
