//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/lookupsrv"
)

// TestAsyncRealKafka runs the lookup example on the real broker against a
// real HTTP service with injected latency, errors and hangs, and guests that
// panic in a continuation (discarding the lookups in flight on their
// instance):
//   - every input is accounted for exactly once, in the output or the
//     dead-letter topic;
//   - each output carries its own record's lookup result;
//   - per input partition, first-attempt outputs keep offset order
//     (ordering partition, completions out of order);
//   - failures take the right path: 503 once → retried → output; hang →
//     deadline → dead letter; panic → dead letter; lookups lost with a
//     discarded instance → restarted on the replacement → output.
func TestAsyncRealKafka(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	srv := lookupsrv.New(t, func(string) time.Duration { return time.Duration(rand.IntN(20)) * time.Millisecond })
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, dlq, n+".r.500ms")
	kafkatest.CreateTopic(t, brokers, 1, out)
	cfg := writeConfig(t, brokers, n, modules["lookup"], in, out, dlq, "")
	replace(t, cfg, "    retry: {max_attempts: 1}", fmt.Sprintf(`    retry: {max_attempts: 2, backoff: [500ms], topic_prefix: %s.r}
    env: {LOOKUP_URL: "%s/users/"}
    async:
      max_in_flight: 32
      http: {allow_hosts: [%q], timeout: 2s}`, n, srv.URL, srv.Host()))
	replace(t, cfg, "      record_timeout: 10s", "      record_timeout: 3s")

	const count = 20000
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(5*time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	wantDLQ := map[int]string{}
	for i := 0; i < count; i++ {
		r := &kgo.Record{Topic: in, Partition: int32(i % 4), Key: []byte(fmt.Sprint("u", i)), Value: []byte(fmt.Sprintf(`{"i":%d}`, i))}
		switch {
		case i%1000 == 7:
			r.Key = []byte(fmt.Sprint("hang-", i))
			wantDLQ[i] = "guest.retry" // the request timeout (2s) ends it; the guest fails it retryably
		case i%1000 == 500:
			r.Headers = []kgo.RecordHeader{{Key: "lookup.mode", Value: []byte("panic")}}
			wantDLQ[i] = "fault.panic"
		case i%250 == 3:
			r.Key = []byte(fmt.Sprint("fail-", i))
		}
		recs = append(recs, r)
	}
	ctx, cancel := ctxTimeout(time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, "run", "--config", cfg)
	outR := kafkatest.NewReader(t, brokers, out)
	dlqR := kafkatest.NewReader(t, brokers, dlq)
	type outV struct {
		Key     string
		Attempt int
		Record  struct{ I int }
		Lookup  *struct{ ID string }
	}
	idOut := func(r *kgo.Record) int64 {
		var v outV
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("output %q: %v", r.Value, err)
		}
		return int64(v.Record.I)
	}
	idDLQ := func(r *kgo.Record) int64 {
		var v struct{ I int }
		json.Unmarshal(r.Value, &v)
		return int64(v.I)
	}
	seen := readOutcomes(t, outR, dlqR, count, idOut, idDLQ)
	dups := 0
	for i := 0; i < count; i++ {
		switch c := seen[int64(i)]; {
		case c == 0:
			t.Fatalf("input %d lost", i)
		case c > 1:
			dups += c - 1
		}
	}
	if dups > 0 {
		t.Errorf("%d duplicates without any crash", dups)
	}
	if len(dlqR.Recs) != len(wantDLQ) {
		t.Errorf("%d dead letters, want %d", len(dlqR.Recs), len(wantDLQ))
	}
	for _, d := range dlqR.Recs {
		i := int(idDLQ(d))
		kind, msg := kafkatest.Header(d, scheduler.HeaderErrorKind), kafkatest.Header(d, scheduler.HeaderError)
		// A hanging lookup waits 2 s on an instance that the panicking
		// records beside it may discard more often than a record is
		// restarted for free (3 times): then it fails as lost instead.
		lostHang := kind == "fault.instance_lost" && strings.Contains(msg, "/users/hang-")
		if (kind != wantDLQ[i] && !lostHang) || (kind == "guest.retry" && !strings.Contains(msg, "timed out")) {
			t.Errorf("dead letter of input %d: kind %q (%s), want %q", i, kind, msg, wantDLQ[i])
		}
	}
	last := map[int]int{} // input partition -> last first-attempt input
	retried := 0
	for _, r := range outR.Recs {
		var v outV
		json.Unmarshal(r.Value, &v)
		if v.Lookup == nil || v.Lookup.ID != v.Key || string(r.Key) != v.Key || !strings.HasSuffix(v.Key, fmt.Sprint(v.Record.I)) {
			t.Fatalf("output %s carries another record's lookup", r.Value)
		}
		if v.Attempt > 1 {
			retried++
			continue
		}
		part := v.Record.I % 4
		if prev, ok := last[part]; ok && v.Record.I < prev {
			t.Fatalf("partition %d: input %d output after %d", part, v.Record.I, prev)
		}
		last[part] = v.Record.I
	}
	if retried < count/250 {
		t.Errorf("%d outputs on a retry, want at least the %d failed-once lookups", retried, count/250)
	}
	// 4 tasks of one instance, and the retry pipeline's 4 tasks of up to 2.
	if pk := srv.Peak.Load(); pk > (4+4*2)*32 {
		t.Errorf("peak concurrent lookups %d over 12 instances × async.max_in_flight 32", pk)
	}
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	lost := 0
	for _, m := range regexp.MustCompile(`msg=stopped pipeline=p\S* .*restarted=(\d+)`).FindAllStringSubmatch(p.logText(), -1) {
		k, _ := strconv.Atoi(m[1])
		lost += k
	}
	if lost == 0 {
		t.Errorf("no lookup was lost with a discarded instance and restarted; the test did not exercise it")
	}
	t.Logf("outputs %d (%d on a retry), lookups lost with a discarded instance and restarted %d, dead letters %d, peak concurrent lookups %d",
		len(outR.Recs), retried, lost, len(dlqR.Recs), srv.Peak.Load())
}

// replace rewrites old to new in the file at path, which must contain it.
func replace(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}
