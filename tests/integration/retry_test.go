//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// retryConfig writes a config whose pipeline retries as retryYAML says, and
// creates its topics (the retry tiers of the default topic_prefix, the
// pipeline's group n + ".p.retry", included).
func retryConfig(t *testing.T, brokers []string, n, module, retryYAML string, parts int32, tiers ...string) (cfg, in, out, dlq string) {
	in, out, dlq = n+"-in", n+"-out", n+"-dlq"
	topics := []string{in, out, dlq}
	for _, tier := range tiers {
		topics = append(topics, n+".p.retry."+tier)
	}
	kafkatest.CreateTopic(t, brokers, parts, topics...)
	cfg = writeConfig(t, brokers, n, module, in, out, dlq, "")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(b), "    retry: {max_attempts: 1}", "    retry: "+retryYAML, 1)), 0o644)
	return
}

type enriched struct {
	Attempt int
	Fault   string
	I       int
	Source  struct {
		Partition int32
		Offset    int64
	}
}

// TestRetriesRealKafka: on the real broker, a poison record reaches the
// dead-letter topic after exactly max_attempts with its history; a transient
// failure succeeds at a later attempt; nothing else in its partition waited.
func TestRetriesRealKafka(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	// The topic prefix is p.retry: every test gets its own broker topics by
	// name, so each run uses fresh retry topics through a fresh prefix.
	n := names(t)
	cfg, in, out, dlq := retryConfig(t, brokers, n, modules["enrich"], fmt.Sprintf("{max_attempts: 3, backoff: [500ms, 1s], topic_prefix: %s.r}", n), 1)
	kafkatest.CreateTopic(t, brokers, 1, n+".r.500ms", n+".r.1s")
	const count = 500
	kafkatest.Produce(t, brokers, in, count, func(i int) string {
		switch i {
		case 0:
			return `{"fault":"retry"}`
		case 1:
			return `{"fault":"transient","until":3}`
		}
		return fmt.Sprintf(`{"i":%d}`, i)
	})
	p := startProc(t, "run", "--config", cfg)
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, time.Minute, "every healthy and the transient output", func(rs []*kgo.Record) bool { return len(rs) >= count-1 })
	dl := kafkatest.NewReader(t, brokers, dlq)
	dl.ReadUntil(t, time.Minute, "the poison record dead-lettered", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	d := dl.Recs[0]
	if kafkatest.Header(d, scheduler.HeaderAttempt) != "3" || kafkatest.Header(d, scheduler.HeaderHistoryPrefix+"1") == "" ||
		kafkatest.Header(d, scheduler.HeaderHistoryPrefix+"3") != "guest.retry: asked to retry" || kafkatest.Header(d, scheduler.HeaderOriginalOffset) != "0" {
		t.Fatalf("dead letter headers: %v", d.Headers)
	}
	var lastHealthy, transient time.Time
	for _, r := range rd.Recs {
		var e enriched
		json.Unmarshal(r.Value, &e)
		if e.Fault == "transient" {
			if e.Attempt != 3 {
				t.Fatalf("transient succeeded on attempt %d", e.Attempt)
			}
			transient = r.Timestamp
		} else if r.Timestamp.After(lastHealthy) {
			lastHealthy = r.Timestamp
		}
	}
	if transient.IsZero() || !lastHealthy.Before(transient) || !lastHealthy.Before(d.Timestamp) {
		t.Fatalf("healthy records waited: last healthy %v, transient %v, dead letter %v", lastHealthy, transient, d.Timestamp)
	}
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestKillWithRetryBacklog: SIGKILL while records sit in retry tiers, then a
// restart: every input ends in the output or the dead-letter topic.
func TestKillWithRetryBacklog(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	cfg, in, out, dlq := retryConfig(t, brokers, n, modules["enrich"], fmt.Sprintf("{max_attempts: 3, backoff: [2s, 3s], topic_prefix: %s.r}", n), 4)
	kafkatest.CreateTopic(t, brokers, 4, n+".r.2s", n+".r.3s")
	const count = 20000
	value := func(i int) string {
		switch {
		case i%50 == 0:
			return fmt.Sprintf(`{"i":%d,"fault":"retry"}`, i) // poison: dead letter after 3 attempts
		case i%10 == 0:
			return fmt.Sprintf(`{"i":%d,"fault":"transient","until":%d}`, i, 2+i%2)
		}
		return fmt.Sprintf(`{"i":%d}`, i)
	}
	kafkatest.Produce(t, brokers, in, count, value)
	p1 := startProc(t, "run", "--config", cfg)
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, time.Minute, "most first attempts done", func(rs []*kgo.Record) bool { return len(rs) >= count/2 })
	time.Sleep(500 * time.Millisecond) // records are in the retry tiers now
	p1.kill(t)
	p2 := startProc(t, "run", "--config", cfg)
	dl := kafkatest.NewReader(t, brokers, dlq)
	inputOf := func(r *kgo.Record) int64 {
		var e enriched
		json.Unmarshal(r.Value, &e)
		return int64(e.I)
	}
	readOutcomes(t, rd, dl, count, inputOf, inputOf)
	poison := 0
	for _, r := range dl.Recs {
		var e enriched
		json.Unmarshal(r.Value, &e)
		if e.I%50 != 0 {
			t.Fatalf("record %d dead-lettered but it was not poison: %s", e.I, kafkatest.Header(r, scheduler.HeaderError))
		}
		poison++
	}
	t.Logf("after SIGKILL with a retry backlog: %d outputs, %d dead letters for %d inputs (%d poison); none lost", len(rd.Recs), poison, count, count/50)
	p2.stop(t, time.Minute)
}

// latencies runs count healthy records, 1% poison, at a steady rate through
// a running host and returns the healthy records' p50 and p99 latency from
// input to output.
func latencies(t *testing.T, retryYAML string, poison bool) (p50, p99 time.Duration) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	cfg, in, out, _ := retryConfig(t, brokers, n, modules["enrich"], fmt.Sprintf(retryYAML, n), 2)
	kafkatest.CreateTopic(t, brokers, 2, n+".r.2s")
	p := startProc(t, "run", "--config", cfg)
	defer p.stop(t, time.Minute)
	kafkatest.Eventually(t, time.Minute, "the host consuming", func() bool { return strings.Contains(p.logText(), "msg=status") })
	const count = 3000
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(0))
	sent := map[int]time.Time{}
	for i := 0; i < count; i++ {
		v := fmt.Sprintf(`{"i":%d}`, i)
		if poison && i%100 == 50 {
			v = fmt.Sprintf(`{"i":%d,"fault":"retry"}`, i)
		}
		rec := &kgo.Record{Topic: in, Key: []byte(fmt.Sprint(i)), Value: []byte(v), Timestamp: time.Now()}
		cl.Produce(context.Background(), rec, nil)
		sent[i] = rec.Timestamp.Truncate(time.Millisecond) // Kafka timestamps are milliseconds
		time.Sleep(2 * time.Millisecond)                   // ~500 records/s
	}
	cl.Flush(context.Background())
	rd := kafkatest.NewReader(t, brokers, out)
	healthy := count
	if poison {
		healthy -= count / 100
	}
	rd.ReadUntil(t, 2*time.Minute, "every healthy output", func(rs []*kgo.Record) bool { return len(rs) >= healthy })
	var lat []time.Duration
	for _, r := range rd.Recs {
		var e enriched
		json.Unmarshal(r.Value, &e)
		if e.Fault == "" {
			lat = append(lat, r.Timestamp.Sub(sent[e.I]))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[len(lat)*99/100]
}

// TestHealthyLatencyWithPoison: with 1% poison records and a 2s backoff,
// healthy records' latency stays where it is without poison when retries go
// to retry topics, and rises when they retry inline (the trade-off).
func TestHealthyLatencyWithPoison(t *testing.T) {
	const topics = "{max_attempts: 2, backoff: [2s], topic_prefix: %s.r}"
	const inline = "{mode: inline, max_attempts: 2, backoff: [2s], topic_prefix: %s.r}"
	b50, b99 := latencies(t, topics, false)
	t50, t99 := latencies(t, topics, true)
	i50, i99 := latencies(t, inline, true)
	t.Logf("healthy latency p50/p99: no poison %v/%v; 1%% poison with retry topics %v/%v; 1%% poison inline %v/%v", b50, b99, t50, t99, i50, i99)
	if t99 > time.Second {
		t.Fatalf("healthy p99 %v with retry topics: retries held records up", t99)
	}
	if i99 < 2*time.Second {
		t.Fatalf("inline p99 %v: inline retries should block their partition for the 2s backoff", i99)
	}
}

// TestRedriveAfterFix: records dead-lettered by a failing processor reach the
// output after the processor is fixed (a module that succeeds deployed) and
// `wasmstream dlq redrive` sends them back; --dry-run sends nothing.
func TestRedriveAfterFix(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	cfg, in, out, dlq := retryConfig(t, brokers, n, modules["enrich"], "{max_attempts: 1}", 1)
	const count = 100
	kafkatest.Produce(t, brokers, in, count, func(i int) string {
		if i%10 == 0 {
			return fmt.Sprintf(`{"i":%d,"fault":"fail"}`, i)
		}
		return fmt.Sprintf(`{"i":%d}`, i)
	})
	p := startProc(t, "run", "--config", cfg)
	dl := kafkatest.NewReader(t, brokers, dlq)
	dl.ReadUntil(t, time.Minute, "ten dead letters", func(rs []*kgo.Record) bool { return len(rs) >= 10 })
	p.stop(t, time.Minute)

	cli := func(args ...string) string {
		t.Helper()
		b, err := exec.Command(binary, append(args, "--config", cfg)...).CombinedOutput()
		if err != nil {
			t.Fatalf("wasmstream %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	if s := cli("dlq", "list", "--kind", "guest.fail"); !strings.Contains(s, "10 of 10 dead-lettered records") || !strings.Contains(s, "asked to fail") {
		t.Fatalf("dlq list:\n%s", s)
	}
	if s := cli("dlq", "show", "0@0"); !strings.Contains(s, "attempt 1: guest.fail: asked to fail") {
		t.Fatalf("dlq show:\n%s", s)
	}
	if s := cli("dlq", "redrive", "--dry-run"); !strings.Contains(s, "10 records would be redriven") {
		t.Fatalf("dry run:\n%s", s)
	}
	// "Fix" the processor: the same pipeline now runs a module that succeeds.
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(b), modules["enrich"], modules["uppercase"], 1)), 0o644)
	p2 := startProc(t, "run", "--config", cfg)
	if s := cli("dlq", "redrive", "--error", "asked to fail"); !strings.Contains(s, "10 records redriven") {
		t.Fatalf("redrive:\n%s", s)
	}
	// The redrive is recorded (<dlq>.redriven, compacted): the records are
	// no longer pending, and a second redrive sends nothing.
	if s := cli("dlq", "list", "--pending"); !strings.Contains(s, "0 of 10 dead-lettered records in "+dlq+" match and are not redriven") {
		t.Fatalf("dlq list --pending after the redrive:\n%s", s)
	}
	if s := cli("dlq", "list"); strings.Count(s, "[redriven ") != 10 || !strings.Contains(s, `value="{\"i\":0,\"fault\":\"fail\"}"`) {
		t.Fatalf("dlq list after the redrive:\n%s", s)
	}
	// It refuses them, and says so in its exit status.
	if b, err := exec.Command(binary, "dlq", "redrive", "--config", cfg).CombinedOutput(); err == nil ||
		!strings.Contains(string(b), "0 records redriven, 0 could not be, 10 refused as redriven already") || !strings.Contains(string(b), "10 of 10 matching records refused") {
		t.Fatalf("second redrive: %v\n%s", err, b)
	}
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, time.Minute, "the redriven records in the output", func(rs []*kgo.Record) bool {
		c := 0
		for _, r := range rs {
			if strings.Contains(string(r.Value), `"FAULT":"FAIL"`) {
				c++
			}
		}
		return c >= 10
	})
	// The copies sent back to the input carry where they came from.
	inr := kafkatest.NewReader(t, brokers, in)
	inr.ReadUntil(t, 30*time.Second, "the redriven copies in the input", func(rs []*kgo.Record) bool { return len(rs) >= count+10 })
	marked := 0
	for _, r := range inr.Recs {
		if strings.HasPrefix(kafkatest.Header(r, scheduler.HeaderRedrivenFrom), dlq+"[0]@") && kafkatest.Header(r, scheduler.HeaderError) == "" {
			marked++
		}
	}
	if marked != 10 {
		t.Fatalf("%d of 10 redriven copies marked (and free of error headers)", marked)
	}
	p2.stop(t, time.Minute)
}
