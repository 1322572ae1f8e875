package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/lookupsrv"
)

// shareKeys are the pipeline keys of a consume: share pipeline.
const shareKeys = `
    consume: share
    ordering: none
    instances: {min: 2, max: 2}
    share: {max_records: 100}`

// TestShareTwoHostsSplitAndAccept: two hosts in one share group on one
// partition of the in-process broker. Every record comes out exactly once
// (nobody was lost or killed, so no record is processed twice), no host
// holds more locks than share.max_records, every acquired record is
// accepted, and after the run no
// record is left to deliver: a third member finds nothing.
func TestShareTwoHostsSplitAndAccept(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 2000
	kafkatest.Produce(t, brokers, "in", n, func(i int) string { return fmt.Sprintf("rec-%05d", i) })
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq", shareKeys, "")
	r1, err := NewRunner(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	if err := r1.RegisterMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")); err != nil {
		t.Fatal(err)
	}
	r2, err := NewRunner(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	// The locks a host holds never exceed share.max_records (100).
	maxHeld := make(chan int, 1)
	stop := make(chan struct{})
	go func() {
		most := 0
		for {
			select {
			case <-stop:
				maxHeld <- most
				return
			case <-time.After(time.Millisecond):
			}
			for _, r := range []*Runner{r1, r2} {
				most = max(most, r.pipelines[0].shareHeld())
			}
		}
	}()
	r1.Start()
	r2.Start()
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, 60*time.Second, "all outputs", func(rs []*kgo.Record) bool { return len(rs) >= n })
	seen := map[string]int{}
	for _, rec := range rd.Recs {
		if !strings.HasPrefix(string(rec.Value), "REC-") {
			t.Fatalf("output %q not uppercased", rec.Value)
		}
		seen[string(rec.Value)]++
	}
	close(stop)
	if m := <-maxHeld; m > 100 || m == 0 {
		t.Fatalf("a host held %d locks at most, want 1..100 (share.max_records)", m)
	}
	if len(seen) != n || len(rd.Recs) != n {
		t.Fatalf("%d distinct outputs of %d, want %d each once", len(seen), len(rd.Recs), n)
	}
	var acquired, accepted int64
	for _, r := range []*Runner{r1, r2} {
		s := r.pipelines[0].ShareStats()
		kafkatest.Eventually(t, 10*time.Second, "every acquired record accepted", func() bool {
			return s.Accepted.Load() == s.Acquired.Load()
		})
		acquired += s.Acquired.Load()
		accepted += s.Accepted.Load()
		if s.Lapsed.Load() != 0 || s.Released.Load() != 0 {
			t.Fatalf("lapsed %d released %d, want none", s.Lapsed.Load(), s.Released.Load())
		}
	}
	if acquired != n || accepted != n {
		t.Fatalf("acquired %d accepted %d, want %d", acquired, accepted, n)
	}
	// The metrics report r1's counters.
	s1 := r1.pipelines[0].ShareStats()
	m := collect(t, reader)
	for name, want := range map[string]int64{"wasmstream.share.acquired": s1.Acquired.Load(), "wasmstream.share.accepted": s1.Accepted.Load(), "wasmstream.share.lock_lapses": 0} {
		if got := sumInt(m[name], all); got != want {
			t.Fatalf("%s = %d, want %d", name, got, want)
		}
	}
	if got := sumInt(m["wasmstream.share.deliveries"], func(s attribute.Set) bool { v, _ := s.Value("delivery"); return v.AsString() == "1" }); got != s1.Acquired.Load() {
		t.Fatalf("deliveries{delivery=1} = %d, want %d (no redelivery)", got, s1.Acquired.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r1.Stop(ctx)
	r2.Stop(ctx)
}

// shareLookupConfig is a consume: share pipeline of the lookup guest whose
// records may wait on the service longer than the group's lock.
func shareLookupConfig(t *testing.T, brokers []string, srv *lookupsrv.Server) *config.Config {
	y := fmt.Sprintf(`
kafka:
  brokers: [%q]
  group: g
pipelines:
  - name: p
    module: %s
    inputs: [in]
    output: out
    dead_letter_topic: dlq
    consume: share
    ordering: none
    share: {max_records: 50}
    instances: {min: 1, max: 1}
    retry: {max_attempts: 1}
    limits: {record_timeout: 30s, memory_pages: 256}
    env: {LOOKUP_URL: "%s/users/"}
    async:
      max_in_flight: 64
      http: {allow_hosts: [%q], timeout: 30s}
shutdown:
  drain_timeout: 5s
`, strings.Join(brokers, ","), guestPath(t, "lookup"), srv.URL, srv.Host())
	return configFromYAML(t, y)
}

// TestShareLockRenewedThroughLongCall: the broker's lock is 2 s and some
// lookups take 5 s. The host renews their locks while they wait, so no lock
// lapses and no record is delivered twice: a second, idle host in the group
// would take any record whose lock lapsed, and its output would come out
// twice.
func TestShareLockRenewedThroughLongCall(t *testing.T) {
	srv := lookupsrv.New(t, func(key string) time.Duration {
		if strings.HasSuffix(key, "7") {
			return 5 * time.Second
		}
		return 10 * time.Millisecond
	})
	brokers := kafkatest.FakeShare(t, 2*time.Second)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 40
	kafkatest.Produce(t, brokers, "in", n, func(i int) string { return fmt.Sprintf(`"v%05d"`, i) })
	cfg := shareLookupConfig(t, brokers, srv)
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	// The idle host joins once the first holds every record.
	s := r.pipelines[0].ShareStats()
	kafkatest.Eventually(t, 30*time.Second, "the first host holds every record", func() bool { return s.Acquired.Load() == n })
	idle := startRunner(t, cfg)
	defer idle.Stop(context.Background())
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n })
	rd.ReadFor(3 * time.Second) // a lapsed lock's second delivery would come out within a lock
	seen := map[string]bool{}
	for _, rec := range rd.Recs {
		o := decodeLookup(t, rec)
		if seen[string(o.Record)] {
			t.Fatalf("record %s came out twice", o.Record)
		}
		seen[string(o.Record)] = true
	}
	if a := idle.pipelines[0].ShareStats().Acquired.Load(); a != 0 {
		t.Fatalf("the idle host acquired %d records: locks lapsed", a)
	}
	kafkatest.Eventually(t, 10*time.Second, "every record accepted", func() bool { return s.Accepted.Load() == n })
	if s.Renewed.Load() == 0 || s.Lapsed.Load() != 0 || s.Redelivered.Load() != 0 || s.Acquired.Load() != n {
		t.Fatalf("renewed %d lapsed %d redelivered %d acquired %d: want renewals, no lapse, no redelivery, %d acquired",
			s.Renewed.Load(), s.Lapsed.Load(), s.Redelivered.Load(), s.Acquired.Load(), n)
	}
	t.Logf("renewals %d", s.Renewed.Load())
}

// TestShareStopReleasesHeldRecords: a host stopped while its records wait
// on 30 s lookups gives them back at once (RELEASE) instead of letting their
// 30 s locks run out: a second host takes them right away, on their second
// delivery (the guest's attempt 2), and every record comes out once.
func TestShareStopReleasesHeldRecords(t *testing.T) {
	srvSlow := lookupsrv.New(t, func(string) time.Duration { return 30 * time.Second })
	srvFast := lookupsrv.New(t, nil)
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 30
	kafkatest.Produce(t, brokers, "in", n, func(i int) string { return fmt.Sprintf(`"v%05d"`, i) })
	slow := shareLookupConfig(t, brokers, srvSlow)
	slow.Shutdown.DrainTimeout = 500 * time.Millisecond
	r1 := startRunner(t, slow)
	kafkatest.Eventually(t, 30*time.Second, "the first host waits on every lookup", func() bool { return srvSlow.Cur.Load() == n })
	stopped := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r1.Stop(ctx)
	if got := r1.pipelines[0].ShareStats().Released.Load(); got != n {
		t.Fatalf("released %d records at shutdown, want %d", got, n)
	}
	r2 := startRunner(t, shareLookupConfig(t, brokers, srvFast))
	defer r2.Stop(context.Background())
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, 20*time.Second, "every output from the second host", func(rs []*kgo.Record) bool { return len(rs) >= n })
	if d := time.Since(stopped); d > 15*time.Second {
		t.Fatalf("outputs %s after the stop: the records waited for their locks to lapse", d)
	}
	var out []struct{ Attempt int }
	for _, rec := range rd.Recs {
		var o struct{ Attempt int }
		json.Unmarshal(rec.Value, &o)
		out = append(out, o)
		if o.Attempt != 2 {
			t.Fatalf("output %s on attempt %d, want 2 (its second delivery)", rec.Value, o.Attempt)
		}
	}
	if len(out) != n {
		t.Fatalf("%d outputs, want %d", len(out), n)
	}
}

// TestShareTraceAcrossRetries: under a share group, a record that fails
// twice and then succeeds is one trace, as under a consumer group: attempt
// 1 (its first delivery) → retry produce → attempts 2 and 3 in the retry
// tier → output, and it is accepted once its retry copy is acknowledged.
func TestShareTraceAcrossRetries(t *testing.T) {
	checkTraceAcrossRetries(t, "    consume: share\n    ordering: none")
}

// TestShareProducerNoLinger: a share member's outputs go out without the
// client's default 10 ms linger. Its next poll waits for the last record
// of the previous one to be accepted, after its outputs are acknowledged,
// so a linger would stand in every poll's barrier (BenchmarkShare: the
// share rate 0.59× the consumer group's with it, 0.73× without).
func TestShareProducerNoLinger(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	r, err := NewRunner(context.Background(), testConfigWith(t, brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq", shareKeys, ""), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())
	p := r.pipes()[0]
	if p.ShareStats() == nil {
		t.Fatal("the pipeline is not a share-group member")
	}
	if got := p.member.cl.OptValue(kgo.ProducerLinger); got != time.Duration(0) {
		t.Fatalf("a share member's producer linger is %v, want 0", got)
	}
}

// TestShareSecondMemberPollsPastASlowRecord: one host, one partition, a
// poll of 10 records (share.max_records 20, split between the host's two
// members), and the first record's lookup takes 30 s. A member polls again
// only once its previous poll is acknowledged, so with one member the
// host would stop at that poll for the 30 s; the second member keeps
// polling, and every other record comes out while the slow one still
// waits. Nothing is lost at the stop: the slow record is released.
func TestShareSecondMemberPollsPastASlowRecord(t *testing.T) {
	srv := lookupsrv.New(t, func(key string) time.Duration {
		if key == "k0" { // record 0's key: the keys are k<i mod 97>
			return 30 * time.Second
		}
		return 5 * time.Millisecond
	})
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 96
	kafkatest.Produce(t, brokers, "in", n, func(i int) string { return fmt.Sprintf(`"v%05d"`, i) })
	cfg := shareLookupConfig(t, brokers, srv)
	cfg.Pipelines[0].Share.MaxRecords = 20
	cfg.Shutdown.DrainTimeout = 500 * time.Millisecond
	r := startRunner(t, cfg)
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, 20*time.Second, "every record but the slow one, before its lookup returns", func(rs []*kgo.Record) bool { return len(rs) >= n-1 })
	for _, rec := range rd.Recs {
		if o := decodeLookup(t, rec); string(o.Record) == `"v00000"` {
			t.Fatalf("the slow record came out before its 30 s lookup returned")
		}
	}
	// The last output can be read before its record's outcome is
	// counted: the host settles to holding the slow record alone.
	held := r.pipelines[0].shareHeld()
	for deadline := time.Now().Add(10 * time.Second); held != 1 && time.Now().Before(deadline); held = r.pipelines[0].shareHeld() {
		time.Sleep(10 * time.Millisecond)
	}
	if held != 1 {
		t.Fatalf("the host holds %d records, want 1 (the slow one)", held)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r.Stop(ctx)
	s := r.pipelines[0].ShareStats()
	if s.Accepted.Load() != n-1 || s.Released.Load() != 1 {
		t.Fatalf("accepted %d released %d, want %d and 1 (the slow record, given back at the stop)", s.Accepted.Load(), s.Released.Load(), n-1)
	}
}
