package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

func retryInput(i int) string {
	switch i {
	case 0:
		return `{"fault":"retry"}` // fails every attempt
	case 1:
		return `{"fault":"transient","until":3}` // succeeds on attempt 3
	}
	return fmt.Sprintf(`{"i":%d}`, i)
}

// TestRetryTopics: a poison record goes through every backoff tier to the
// dead-letter topic after exactly max_attempts, with every attempt's error;
// a transient failure succeeds at a later attempt; the healthy records behind
// them in the same partition never wait for either.
func TestRetryTopics(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq", "g.p.retry.300ms", "g.p.retry.600ms")
	const n = 200
	kafkatest.Produce(t, brokers, "in", n, retryInput)
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "enrich"), "in", "out", "dlq",
		"    retry: {max_attempts: 3, backoff: [300ms, 600ms]}", "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	out := kafkatest.NewReader(t, brokers, "out")
	out.ReadUntil(t, time.Minute, "healthy and transient outputs", func(rs []*kgo.Record) bool { return len(rs) >= n-1 })
	dl := kafkatest.NewReader(t, brokers, "dlq")
	dl.ReadUntil(t, time.Minute, "the poison record dead-lettered", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	p := dl.Recs[0]
	if got := kafkatest.Header(p, HeaderAttempt); got != "3" {
		t.Fatalf("dead letter after %s attempts, want 3", got)
	}
	for a := 1; a <= 3; a++ {
		if h := kafkatest.Header(p, HeaderHistoryPrefix+strconv.Itoa(a)); h != "guest.retry: asked to retry" {
			t.Fatalf("history of attempt %d: %q", a, h)
		}
	}
	if kafkatest.Header(p, HeaderOriginalTopic) != "in" || kafkatest.Header(p, HeaderOriginalOffset) != "0" || kafkatest.Header(p, HeaderFirstFailure) == "" {
		t.Fatalf("origin headers: %v", p.Headers)
	}
	var transient *kgo.Record
	lastHealthy := time.Time{}
	for _, rec := range out.Recs {
		var doc struct {
			Attempt int
			Fault   string
			Source  struct{ Offset int64 }
		}
		json.Unmarshal(rec.Value, &doc)
		if doc.Fault == "transient" {
			transient = rec
			if doc.Attempt != 3 || doc.Source.Offset != 1 {
				t.Fatalf("transient record succeeded on attempt %d (offset %d), want 3 (1)", doc.Attempt, doc.Source.Offset)
			}
		} else if rec.Timestamp.After(lastHealthy) {
			lastHealthy = rec.Timestamp
		}
	}
	if transient == nil {
		t.Fatal("the transient record never succeeded")
	}
	// Nothing waited: every healthy record was out before the transient
	// record's second attempt was even due.
	if !lastHealthy.Before(transient.Timestamp) || !lastHealthy.Before(p.Timestamp) {
		t.Fatalf("healthy records waited: last healthy output %v, transient %v, dead letter %v", lastHealthy, transient.Timestamp, p.Timestamp)
	}
	kafkatest.Eventually(t, 10*time.Second, "every offset committed", func() bool {
		return kafkatest.Committed(t, brokers, cfg.GroupID(&cfg.Pipelines[0]), "in")[0] == n &&
			kafkatest.Committed(t, brokers, cfg.GroupID(&cfg.Pipelines[0])+".retry", cfg.Pipelines[0].TierTopic(0))[0] == 2 &&
			kafkatest.Committed(t, brokers, cfg.GroupID(&cfg.Pipelines[0])+".retry", cfg.Pipelines[0].TierTopic(1))[0] == 2
	})
	if s := r.Snapshots()[1]; s.Name != "p.retry" || s.Retried != 2 || s.DeadLetter != 1 {
		t.Fatalf("retry pipeline: %+v", s)
	}
	// Secondary workers are given back once the backlog is gone.
	kafkatest.Eventually(t, 20*time.Second, "retry workers released", func() bool { return r.Snapshots()[1].Instances == 0 })
}

// TestRetryInline: inline mode retries in place, so the partition's later
// records wait behind the failing one — strict order, at the cost of latency.
func TestRetryInline(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 50
	kafkatest.Produce(t, brokers, "in", n, retryInput)
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "enrich"), "in", "out", "dlq",
		"    retry: {mode: inline, max_attempts: 3, backoff: [200ms, 400ms]}", "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	out := kafkatest.NewReader(t, brokers, "out")
	out.ReadUntil(t, time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n-1 })
	dl := kafkatest.NewReader(t, brokers, "dlq")
	dl.ReadUntil(t, time.Minute, "the poison record dead-lettered", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	if got := kafkatest.Header(dl.Recs[0], HeaderAttempt); got != "3" || kafkatest.Header(dl.Recs[0], HeaderHistoryPrefix+"2") == "" {
		t.Fatalf("inline dead letter: attempt %s, headers %v", got, dl.Recs[0].Headers)
	}
	// Offset order held: outputs come out in input order, after the poison's
	// 600ms of backoff.
	for i, rec := range out.Recs {
		var doc struct{ Source struct{ Offset int64 } }
		json.Unmarshal(rec.Value, &doc)
		if doc.Source.Offset != int64(i+1) {
			t.Fatalf("output %d is offset %d", i, doc.Source.Offset)
		}
		if rec.Timestamp.Before(dl.Recs[0].Timestamp) {
			t.Fatal("a record behind the failing one got out before it was dead-lettered: inline retries must block the partition")
		}
	}
}

// TestRetryTopicsAreCreated: retry-tier topics are the host's own. On the
// real broker, with kafka.create_topics off and only the input, output and
// dead-letter topics created by the user, the host creates each tier's
// topic with as many partitions as the input, and records go through them.
func TestRetryTopicsAreCreated(t *testing.T) {
	brokers, n := realBroker(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 3, in, out, dlq)
	const records = 60
	kafkatest.Produce(t, brokers, in, records, retryInput)
	cfg := testConfigWith(t, brokers, n, guestPath(t, "enrich"), in, out, dlq,
		fmt.Sprintf("    retry: {max_attempts: 3, backoff: [300ms, 600ms], topic_prefix: %s.retry}", n), "")
	if cfg.Kafka.CreateTopics {
		t.Fatal("kafka.create_topics is on by default: the test proves nothing")
	}
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	details, err := adm.ListTopics(context.Background(), cfg.Pipelines[0].RetryTopics()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{n + ".retry.300ms", n + ".retry.600ms"} {
		d, ok := details[topic]
		if !ok || d.Err != nil || len(d.Partitions) != 3 {
			t.Fatalf("retry topic %s: present %v, error %v, %d partitions; want 3 like the input", topic, ok, d.Err, len(d.Partitions))
		}
	}
	kafkatest.NewReader(t, brokers, out).ReadUntil(t, time.Minute, "healthy and transient outputs", func(rs []*kgo.Record) bool { return len(rs) >= records-1 })
	kafkatest.NewReader(t, brokers, dlq).ReadUntil(t, time.Minute, "the poison record dead-lettered after its retries", func(rs []*kgo.Record) bool {
		return len(rs) == 1 && kafkatest.Header(rs[0], HeaderAttempt) == "3"
	})
}
