// Package kafkatest holds helpers shared by wasmstream's tests: an
// in-process broker, topic creation, producing inputs, reading outputs, and
// polling for conditions with a deadline.
package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fake starts an in-process broker for fast tests and returns its address.
func Fake(t testing.TB) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// RealBrokers returns the address of the real Kafka broker the test command
// started (KAFKA_BROKERS). Integration tests fail without it: there is no
// silent fallback to the in-process broker.
func RealBrokers(t testing.TB) []string {
	t.Helper()
	b := os.Getenv("KAFKA_BROKERS")
	if b == "" {
		t.Fatal("KAFKA_BROKERS is not set: integration tests need the real broker that `make test` starts (bash tests/kafka/kafka.sh start)")
	}
	return strings.Split(b, ",")
}

// Client returns a plain client on brokers, closed with the test.
func Client(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// CreateTopic creates topic with partitions partitions, and returns once
// the broker's metadata has them: a real broker answers CreateTopics when
// its controller committed the topics, and its metadata may name them a
// moment later, so a host started at once (which checks that its topics
// exist) could be told they do not. The topics are deleted when the test
// ends (DeleteAtEnd).
func CreateTopic(t testing.TB, brokers []string, partitions int32, topics ...string) {
	t.Helper()
	adm := kadm.NewClient(Client(t, brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopics(ctx, partitions, 1, nil, topics...)
	if err != nil {
		t.Fatal(err)
	}
	DeleteAtEnd(t, brokers, func(topic string) bool { return slices.Contains(topics, topic) })
	for _, r := range resp {
		if r.Err != nil {
			t.Fatalf("create %s: %v", r.Topic, r.Err)
		}
	}
	for {
		details, err := adm.ListTopics(ctx, topics...)
		missing := ""
		for _, topic := range topics {
			if d, ok := details[topic]; err == nil && (!ok || d.Err != nil || len(d.Partitions) != int(partitions) || !led(d)) {
				missing = topic
			}
		}
		if err == nil && missing == "" {
			missing, err = unready(ctx, adm, topics)
		}
		if err == nil && missing == "" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("created topics %v: not in the broker's metadata after 30s (last missing: %q, err %v)", topics, missing, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// DeleteAtEnd deletes, when t ends, every topic on brokers that match
// names: those a test created, and those the host made for it (retry,
// state changelog and registry topics, whose names hold the test's unique
// prefix). A run of the suite left some 1,100 partitions behind before,
// and a broker stalled once at that size. It runs as a cleanup of t:
// after t's subtests, and after every cleanup registered later (the
// processes, runners and readers a test starts after its topics are made),
// so nothing the test still reads is deleted under it. Best effort: a
// topic that cannot be deleted is logged, not failed.
func DeleteAtEnd(t testing.TB, brokers []string, names func(topic string) bool) {
	t.Cleanup(func() {
		// A client of its own: those of Client close in cleanups that may
		// have run already.
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
		if err != nil {
			t.Logf("deleting the test's topics: %v", err)
			return
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		listed, err := adm.ListTopics(ctx)
		if err != nil {
			t.Logf("deleting the test's topics: listing: %v", err)
			return
		}
		var del []string
		for _, topic := range listed.Names() {
			if names(topic) {
				del = append(del, topic)
			}
		}
		if len(del) == 0 {
			return
		}
		resp, err := adm.DeleteTopics(ctx, del...)
		if err != nil {
			t.Logf("deleting the test's topics %v: %v", del, err)
			return
		}
		for _, r := range resp {
			if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
				t.Logf("deleting topic %s: %v", r.Topic, r.Err)
			}
		}
	})
}

// DeleteNamedAtEnd deletes, when t ends, every topic on brokers whose name
// holds part (a test's unique prefix): DeleteAtEnd.
func DeleteNamedAtEnd(t testing.TB, brokers []string, part string) {
	DeleteAtEnd(t, brokers, func(topic string) bool { return strings.Contains(topic, part) })
}

// unready names a topic of topics with a partition whose leader does not
// yet answer for it (ListOffsets: the leader has its log). A producer's
// first batch to such a partition is refused and waits for the client's
// next metadata refresh, seconds later (a reference that stalled 5 s on 16
// new partitions).
func unready(ctx context.Context, adm *kadm.Client, topics []string) (string, error) {
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return "", err
	}
	missing := ""
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			missing = o.Topic
		}
	})
	return missing, nil
}

// led reports whether every partition of d has a leader: a client that
// sees one without waits for its next metadata refresh (franz-go: at least
// 5 s) before producing to it.
func led(d kadm.TopicDetail) bool {
	for _, p := range d.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}

// Produce produces n records to topic: key "k<i%keys>", value from value(i).
func Produce(t testing.TB, brokers []string, topic string, n int, value func(i int) string) {
	t.Helper()
	cl := Client(t, brokers, kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, 0, 1000)
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", i%97)), Value: []byte(value(i))})
		if len(recs) == cap(recs) || i == n-1 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}
			recs = recs[:0]
		}
	}
}

// Reader consumes topics from the start, accumulating records.
type Reader struct {
	cl   *kgo.Client
	Recs []*kgo.Record
}

// NewReader reads topics from the beginning (read_committed).
func NewReader(t testing.TB, brokers []string, topics ...string) *Reader {
	return &Reader{cl: Client(t, brokers, kgo.ConsumeTopics(topics...), kgo.FetchIsolationLevel(kgo.ReadCommitted()))}
}

// ReadUntil polls until cond holds over the records read so far, failing the
// test at the deadline.
func (r *Reader) ReadUntil(t testing.TB, timeout time.Duration, what string, cond func([]*kgo.Record) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond(r.Recs) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s (have %d records)", timeout, what, len(r.Recs))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := r.cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(rec *kgo.Record) { r.Recs = append(r.Recs, rec) })
	}
}

// ReadFor keeps reading for d.
func (r *Reader) ReadFor(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for ctx.Err() == nil {
		r.cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) { r.Recs = append(r.Recs, rec) })
	}
}

// Eventually polls cond every 20ms until it holds or the deadline passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Committed returns the group's committed offsets for topic, by partition.
func Committed(t testing.TB, brokers []string, group, topic string) map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(Client(t, brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// Header returns the value of r's header key.
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// FenceProducer fences the transactional producer txnID: it initializes a
// producer with the same transactional id (InitProducerID), as a second
// instance of a host would, retrying while the broker still aborts the
// open transaction (CONCURRENT_TRANSACTIONS). The fenced producer's next
// transactional request is refused.
func FenceProducer(t testing.TB, brokers []string, txnID string) {
	t.Helper()
	cl := Client(t, brokers)
	Eventually(t, time.Minute, "a producer with transactional id "+txnID+" initialized", func() bool {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &txnID
		req.TransactionTimeoutMillis = 60000
		req.ProducerID, req.ProducerEpoch = -1, -1
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			t.Logf("fencing %s: %v", txnID, err)
		}
		return err == nil
	})
}
