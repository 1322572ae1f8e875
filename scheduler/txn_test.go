package scheduler

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// Fast checks of the exactly_once path on the in-process broker; the
// crash, rebalance and zombie tests run on real Kafka
// (tests/integration/eos_test.go).

// eosOutputs reads topic read_committed until want records arrived and
// returns how often each input offset (from the hash guest's output) came.
func eosCounts(t *testing.T, brokers []string, topic string, want int) map[hashOut]int {
	t.Helper()
	rd := kafkatest.NewReader(t, brokers, topic)
	rd.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= want })
	rd.ReadFor(500 * time.Millisecond) // duplicates, if any
	seen := map[hashOut]int{}
	for _, r := range rd.Recs {
		seen[decodeHash(t, r)]++
	}
	return seen
}

func checkOnce(t *testing.T, seen map[hashOut]int, n int) {
	t.Helper()
	dups := 0
	for h, c := range seen {
		if c > 1 {
			dups += c - 1
			if dups < 5 {
				t.Errorf("input %d@%d appears %d times", h.Partition, h.Offset, c)
			}
		}
	}
	if len(seen) != n || dups > 0 {
		t.Fatalf("%d distinct inputs in the output (want %d), %d duplicates", len(seen), n, dups)
	}
}

// TestExactlyOncePool: a pool of instances (ordering none) under
// exactly_once: every input once in the read_committed output, offsets
// committed to the end, in transactions of at most max_records records.
func TestExactlyOncePool(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq")
	const n = 3000
	produceHash(t, brokers, "in", n, func(i int) string { return fmt.Sprint(i % 97) }, func(i int) int { return 1 + i%300 })
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "hash"), "in", "out", "dlq",
		"    ordering: none\n    instances: {min: 1, max: 3}\n    guarantee: exactly_once\n    transactions: {max_records: 200, interval: 50ms}", "")
	r := startRunner(t, cfg)
	checkOnce(t, eosCounts(t, brokers, "out", n), n)
	kafkatest.Eventually(t, 30*time.Second, "offsets committed to the end", func() bool {
		sum := int64(0)
		for _, o := range kafkatest.Committed(t, brokers, "g.p", "in") {
			sum += o
		}
		return sum == n
	})
	s := r.Snapshots()[0]
	r.Stop(context.Background())
	if s.TxnCommitted < n/200 {
		t.Fatalf("%d transactions for %d records with max_records 200", s.TxnCommitted, n)
	}
	t.Logf("%d transactions committed, %d aborted", s.TxnCommitted, s.TxnAborted)
}

// TestExactlyOnceAbortStartsOver: a transaction that fails (as a failed
// produce makes it) aborts; every partition starts over from its committed
// offset, the aborted outputs stay invisible to read_committed readers, and
// every input still comes out once.
func TestExactlyOnceAbortStartsOver(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq")
	const n = 4000
	produceHash(t, brokers, "in", n, func(i int) string { return fmt.Sprint(i) }, func(int) int { return 200 })
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "hash"), "in", "out", "dlq",
		"    guarantee: exactly_once\n    transactions: {max_records: 500, interval: 200ms}", "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	p := r.Pipelines()[0]
	kafkatest.Eventually(t, time.Minute, "a transaction committed", func() bool { return p.Snapshot().TxnCommitted > 0 })
	for i := 0; i < 3; i++ {
		before := p.Snapshot().TxnAborted
		p.txnFailed(errors.New("injected produce failure"))
		kafkatest.Eventually(t, time.Minute, "the transaction aborted", func() bool { return p.Snapshot().TxnAborted > before })
	}
	checkOnce(t, eosCounts(t, brokers, "out", n), n)
	// The aborted attempts exist in the log: a read_uncommitted reader sees
	// more records than inputs.
	raw := kafkatest.Client(t, brokers, kgo.ConsumeTopics("out"), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	got := 0
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		got += raw.PollFetches(ctx).NumRecords()
	}
	if got <= n {
		t.Fatalf("read_uncommitted saw %d records for %d inputs: no aborted output reached the log", got, n)
	}
	t.Logf("read_uncommitted: %d records for %d inputs (aborted attempts); read_committed: exactly %d", got, n, n)
}
