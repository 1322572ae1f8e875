package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestRetryTopicsOfTwoApplications: two applications on one cluster
// (kafka.group a and b) each with a pipeline named p. Their default retry
// topics are named after each pipeline's group, so a record failing in a is
// retried by a's retry workers only: b's never read it, and b's output never
// holds it. (Named after the pipeline, as before, both would use p.retry.*:
// b's retry workers, in their own group, would read a's failed records too
// and run them through b's module into b's output.)
func TestRetryTopicsOfTwoApplications(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "a-in", "a-out", "a-dlq", "b-in", "b-out", "b-dlq")
	retry := "    retry: {max_attempts: 3, backoff: [200ms, 400ms]}"
	a := testConfigWith(t, brokers, "a", guestPath(t, "enrich"), "a-in", "a-out", "a-dlq", retry, "")
	b := testConfigWith(t, brokers, "b", guestPath(t, "enrich"), "b-in", "b-out", "b-dlq", retry, "")
	if ta, tb := a.Pipelines[0].RetryTopics(), b.Pipelines[0].RetryTopics(); ta[0] != "a.p.retry.200ms" || tb[0] != "b.p.retry.200ms" {
		t.Fatalf("retry topics %v and %v", ta, tb)
	}
	ra := startRunner(t, a)
	defer ra.Stop(context.Background())
	rb := startRunner(t, b)
	defer rb.Stop(context.Background())
	kafkatest.Produce(t, brokers, "a-in", 10, func(i int) string {
		if i < 3 {
			return `{"fault":"transient","until":2}` // succeeds on its second attempt, after a retry topic
		}
		return fmt.Sprintf(`{"i":%d}`, i)
	})
	kafkatest.Produce(t, brokers, "b-in", 5, func(i int) string { return fmt.Sprintf(`{"i":%d}`, i) })
	source := func(rec *kgo.Record) (topic string, attempt int) {
		var doc struct {
			Attempt int
			Source  struct{ Topic string }
		}
		json.Unmarshal(rec.Value, &doc)
		return doc.Source.Topic, doc.Attempt
	}
	outA := kafkatest.NewReader(t, brokers, "a-out")
	outA.ReadUntil(t, time.Minute, "a's records, the retried ones included", func(rs []*kgo.Record) bool {
		retried := 0
		for _, rec := range rs {
			if _, attempt := source(rec); attempt == 2 {
				retried++
			}
		}
		return len(rs) >= 10 && retried == 3
	})
	kafkatest.Eventually(t, 10*time.Second, "a's retry workers committed a's retries", func() bool {
		return kafkatest.Committed(t, brokers, "a.p.retry", a.Pipelines[0].TierTopic(0))[0] == 3
	})
	outB := kafkatest.NewReader(t, brokers, "b-out")
	outB.ReadUntil(t, time.Minute, "b's own records", func(rs []*kgo.Record) bool { return len(rs) >= 5 })
	outB.ReadFor(time.Second) // b's retry workers had their chance
	for _, rec := range outB.Recs {
		if topic, attempt := source(rec); topic != "b-in" || attempt != 1 {
			t.Fatalf("b's output holds a record of %s (attempt %d): %s", topic, attempt, rec.Value)
		}
	}
	if len(outB.Recs) != 5 {
		t.Fatalf("b's output holds %d records, want its own 5", len(outB.Recs))
	}
	if s := rb.Snapshots()[1]; s.Name != "p.retry" || s.Done != 0 || s.Retried != 0 {
		t.Fatalf("b's retry workers ran records: %+v", s)
	}
}

// TestOldRetryTopicsCheckedOnUpgrade: a host upgraded from the default
// retry.topic_prefix that named the pipeline (p.retry) starts only when its
// retry workers' group (g.p.retry) has committed every record in the topics
// of the old names; otherwise NewRunner fails naming the key and the way
// out. A topic holding only a transaction's marker above the commit (as
// exactly_once leaves it) holds nothing to retry; with topic_prefix set
// nothing is checked. On the in-process broker, and on the real one when
// KAFKA_BROKERS is set.
func TestOldRetryTopicsCheckedOnUpgrade(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	t.Run("in-process", func(t *testing.T) { checkOldRetryTopicsOnUpgrade(t, kafkatest.Fake(t), "g", "p") })
	t.Run("real broker", func(t *testing.T) {
		brokers, n := realBroker(t)
		checkOldRetryTopicsOnUpgrade(t, brokers, strings.ReplaceAll(n, "/", "-"), fmt.Sprint("p-", time.Now().UnixNano()))
	})
}

func checkOldRetryTopicsOnUpgrade(t *testing.T, brokers []string, group, name string) {
	in, out, dlq := name+"-in", name+"-out", name+"-dlq"
	old300, old600, retryGroup := name+".retry.300ms", name+".retry.600ms", group+"."+name+".retry"
	kafkatest.CreateTopic(t, brokers, 1, in, out, dlq)
	kafkatest.CreateTopic(t, brokers, 2, old300)
	kafkatest.CreateTopic(t, brokers, 1, old600)
	load := func(retry string) *config.Config {
		y := fmt.Sprintf(`
kafka: {brokers: [%q], group: %s}
pipelines:
  - {name: %s, module: %s, inputs: [%s], output: %s, dead_letter_topic: %s, retry: %s}
`, strings.Join(brokers, ","), group, name, guestPath(t, "enrich"), in, out, dlq, retry)
		return configFromYAML(t, y)
	}
	cfg := load("{max_attempts: 3, backoff: [300ms, 600ms]}")
	if cfg.Pipelines[0].Retry.TopicPrefix != group+"."+name+".retry" {
		t.Fatalf("retry.topic_prefix %s", cfg.Pipelines[0].Retry.TopicPrefix)
	}
	newRunner := func() error {
		r, err := NewRunner(context.Background(), cfg, testLogger(t))
		if err == nil {
			r.Stop(context.Background())
		}
		return err
	}
	// Old topics, empty: the host starts on the new names.
	if err := newRunner(); err != nil {
		t.Fatalf("empty old retry topics: %v", err)
	}
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	for i, p := range []int32{0, 0, 1} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: old300, Partition: p, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: old600, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	commit := func(topic string, partition int32, at int64) {
		t.Helper()
		var o kadm.Offsets
		o.AddOffset(topic, partition, at, -1)
		if err := adm.CommitAllOffsets(ctx, retryGroup, o); err != nil {
			t.Fatal(err)
		}
	}
	wantErr := func(what, want string) {
		t.Helper()
		err := newRunner()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: error %v, want %q", what, err, want)
		}
	}
	wantErr("nothing committed", fmt.Sprintf(`pipelines[0].retry.topic_prefix: retry topics %q, %q (named by the default before it named the pipeline's group) hold 4 records the retry workers of group %q have not committed; set retry.topic_prefix: %q to keep draining them, or drain them first`,
		old300, old600, retryGroup, name+".retry"))
	commit(old300, 0, 1)
	commit(old600, 0, 1)
	wantErr("one record of partition 0 committed, none of 1", fmt.Sprintf(`retry topics %q (named by the default before it named the pipeline's group) hold 2 records`, old300))
	commit(old300, 0, 2)
	commit(old300, 1, 1)
	if err := newRunner(); err != nil {
		t.Fatalf("every record committed: %v", err)
	}

	// exactly_once: the transaction's marker follows the record committed.
	txn := kafkatest.Client(t, brokers, kgo.TransactionalID(name+"-old-retries"))
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: old600, Value: []byte("y")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	wantErr("a committed transaction's record", fmt.Sprintf(`retry topics %q (named by the default before it named the pipeline's group) hold 1 record the retry workers`, old600))
	commit(old600, 0, 2)
	if err := newRunner(); err != nil {
		t.Fatalf("only a transaction marker above the commit: %v", err)
	}

	// Set explicitly, the prefix is the user's: nothing is checked.
	commit(old600, 0, 0)
	explicit := load(fmt.Sprintf("{max_attempts: 3, backoff: [300ms, 600ms], topic_prefix: %s.%s.retry}", group, name))
	r, err := NewRunner(ctx, explicit, testLogger(t))
	if err != nil {
		t.Fatalf("retry.topic_prefix set: %v", err)
	}
	r.Stop(ctx)
}
