package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// produceHash produces n records for the hash example: key from keyOf(i),
// rounds from rounds(i).
func produceHash(t testing.TB, brokers []string, topic string, n int, keyOf func(int) string, rounds func(int) int) {
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(keyOf(i)), Value: []byte(strconv.Itoa(i)),
			Headers: []kgo.RecordHeader{{Key: "rounds", Value: []byte(strconv.Itoa(rounds(i)))}}})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

type hashOut struct {
	Partition int32
	Offset    int64
}

func decodeHash(t testing.TB, r *kgo.Record) hashOut {
	var h hashOut
	if err := json.Unmarshal(r.Value, &h); err != nil {
		t.Fatalf("output %q: %v", r.Value, err)
	}
	return h
}

// TestKeyOrderUnderConcurrency: with ordering key and a pool of instances,
// records of one key never overlap and come out in offset order, while
// different keys run concurrently — with many keys and with one hot key.
func TestKeyOrderUnderConcurrency(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 1500
	rng := rand.New(rand.NewSource(7))
	latency := make([]int, n)
	for i := range latency {
		latency[i] = 1 + rng.Intn(3000)
	}
	produceHash(t, brokers, "in", n, func(i int) string {
		if i%2 == 0 {
			return "hot"
		}
		return fmt.Sprintf("k%d", i%37)
	}, func(i int) int { return latency[i] })
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "hash"), "in", "out", "dlq",
		"    ordering: key\n    instances: {min: 1, max: 4, idle_timeout: 200ms}", "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	maxBusy := 0
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool {
		if b := r.Snapshots()[0].Busy; b > maxBusy {
			maxBusy = b
		}
		return len(rs) >= n
	})
	last := map[string]int64{}
	for _, rec := range rd.Recs {
		h := decodeHash(t, rec)
		if prev, ok := last[string(rec.Key)]; ok && h.Offset <= prev {
			t.Fatalf("key %s: offset %d after %d", rec.Key, h.Offset, prev)
		}
		last[string(rec.Key)] = h.Offset
	}
	if len(rd.Recs) != n {
		t.Fatalf("%d outputs for %d inputs", len(rd.Recs), n)
	}
	if maxBusy < 2 {
		t.Fatalf("at most %d instance busy at once: keys did not run concurrently", maxBusy)
	}
	t.Logf("up to %d instances busy at once on one partition", maxBusy)
	// Borrowed instances go back after the idle timeout.
	kafkatest.Eventually(t, 10*time.Second, "pool shrinks back to its minimum", func() bool { return r.Snapshots()[0].Instances == 1 })
	if used, _ := r.Budget().Instances(); used != 1 {
		t.Fatalf("budget holds %d instances, want 1", used)
	}
}

// TestBudgetCapsBorrowing: no task exceeds its maximum, and borrowing stops
// at the host budget, while every task keeps its minimum.
func TestBudgetCapsBorrowing(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 3, "in", "out", "dlq")
	const n = 600
	produceHash(t, brokers, "in", n, func(i int) string { return fmt.Sprint(i) }, func(int) int { return 3000 })
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "hash"), "in", "out", "dlq",
		"    ordering: none\n    instances: {min: 1, max: 4}", "host:\n  max_instances: 5")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	maxInst := 0
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool {
		if used, _ := r.Budget().Instances(); used > maxInst {
			maxInst = used
		}
		return len(rs) >= n
	})
	if maxInst > 5 {
		t.Fatalf("%d instances with host.max_instances 5", maxInst)
	}
	if maxInst < 4 {
		t.Fatalf("only %d instances: backlogged tasks did not borrow", maxInst)
	}
	t.Logf("peak %d instances (3 minimums + borrowed, budget 5)", maxInst)
}

// TestDoneOffsetsSkippedAfterRestart: with ordering none, a record that never
// finishes holds the watermark while later records complete; the commit
// records them as done, and the next owner skips them instead of processing
// them again.
func TestDoneOffsetsSkippedAfterRestart(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 400
	kafkatest.Produce(t, brokers, "in", n, func(i int) string {
		if i == 0 {
			return `{"fault":"loop"}`
		}
		return fmt.Sprintf(`{"i":%d}`, i)
	})
	slow := testConfigWith(t, brokers, "g", guestPath(t, "enrich"), "in", "out", "dlq",
		"    ordering: none\n    instances: {min: 2, max: 2}", "")
	slow.Pipelines[0].Limits.RecordTimeout = time.Minute
	slow.Shutdown.DrainTimeout = 500 * time.Millisecond
	r := startRunner(t, slow)
	out := kafkatest.NewReader(t, brokers, "out")
	out.ReadUntil(t, time.Minute, "every healthy record", func(rs []*kgo.Record) bool { return len(rs) >= n-1 })
	group := slow.GroupID(&slow.Pipelines[0])
	r.Stop(context.Background()) // interrupts record 0 at the drain deadline
	if got := kafkatest.Committed(t, brokers, group, "in")[0]; got != 0 {
		t.Fatalf("committed %d: record 0 never finished, the watermark must stay at 0", got)
	}

	fast := testConfigWith(t, brokers, "g", guestPath(t, "enrich"), "in", "out", "dlq", "    ordering: none\n    instances: {min: 2, max: 2}", "")
	r2 := startRunner(t, fast)
	defer r2.Stop(context.Background())
	dl := kafkatest.NewReader(t, brokers, "dlq")
	dl.ReadUntil(t, time.Minute, "record 0 dead-lettered after its deadline", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	kafkatest.Eventually(t, 10*time.Second, "everything committed", func() bool {
		return kafkatest.Committed(t, brokers, group, "in")[0] == n
	})
	s := r2.Snapshots()[0]
	if s.Skipped != n-1 || s.Done != 1 {
		t.Fatalf("second owner: skipped %d, processed %d; want %d skipped, 1 processed", s.Skipped, s.Done, n-1)
	}
	out.ReadFor(500 * time.Millisecond)
	if len(out.Recs) != n-1 {
		t.Fatalf("%d outputs: done records were processed again", len(out.Recs))
	}
}

// TestBackpressureBoundsInFlight: a slow processor with fast input holds
// polling back; records in flight stay within max_in_flight plus one poll.
func TestBackpressureBoundsInFlight(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 30000
	produceHash(t, brokers, "in", n, func(i int) string { return "k" }, func(int) int { return 20 })
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "hash"), "in", "out", "dlq", "    max_in_flight: 100", "")
	cfg.Kafka.FetchMaxPartitionBytes = 128 << 10
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	maxIn, held := int64(0), int64(0)
	kafkatest.Eventually(t, 2*time.Minute, "all done", func() bool {
		s := r.Snapshots()[0]
		maxIn = max(maxIn, s.InFlight)
		held = s.HeldBack
		return s.Done == n
	})
	if held == 0 {
		t.Fatal("polling was never held back")
	}
	if maxIn > 100+10000 {
		t.Fatalf("%d records in flight with max_in_flight 100", maxIn)
	}
	t.Logf("peak in flight %d (max_in_flight 100, one poll returns at most 10000)", maxIn)
}

// TestBackpressurePausesOnlyTheFullPartition: one partition's records are
// slow, the other's fast. Polling goes on for the fast one, so the slow one's
// task must pause its partition (at pauseFactor times max_in_flight, plus
// what the client had fetched for it: at most one fetch's share of a
// partition, kafka.fetch_max_partition_bytes), not grow with every poll; every record is done, and a
// pause costs no fetch (nothing is read twice).
func TestBackpressurePausesOnlyTheFullPartition(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq")
	const slow, fast = 20000, 60000
	const size = 400 // bytes of a value
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(32<<10), kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recs []*kgo.Record
	for i := 0; i < slow+fast; i++ {
		part, rounds := int32(1), "0"
		if i < slow {
			part, rounds = 0, "20"
		}
		v := append([]byte(strconv.Itoa(i)+" "), bytes.Repeat([]byte{'x'}, size)...)
		recs = append(recs, &kgo.Record{Topic: "in", Partition: part, Key: []byte("k"), Value: v,
			Headers: []kgo.RecordHeader{{Key: "rounds", Value: []byte(rounds)}}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "hash"), "in", "out", "dlq", "    max_in_flight: 100", "")
	cfg.Kafka.FetchMaxPartitionBytes = 128 << 10
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	p := r.Pipelines()[0]
	maxSlow, paused := 0, false
	kafkatest.Eventually(t, 3*time.Minute, "all done", func() bool {
		if tk := p.taskFor("in", 0); tk != nil {
			g := tk.Gauges(false)
			maxSlow = max(maxSlow, g.InFlight)
			paused = paused || g.Paused
		}
		return r.Snapshots()[0].Done == slow+fast
	})
	if !paused {
		t.Fatal("the slow partition was never paused while the fast one was polled")
	}
	// Paused at pauseFactor*100, plus the partition's share of the fetch the
	// client held and of the one it had in flight (fetch_max_partition_bytes
	// each), plus a batch.
	oneFetch := int(cfg.Kafka.FetchMaxPartitionBytes) / size
	if limit := partition.PauseFactor*100 + 3*oneFetch; maxSlow > limit {
		t.Fatalf("the slow partition's task held %d records with max_in_flight 100 (limit %d)", maxSlow, limit)
	}
	// A pause leaves the client one record, which may be the paused
	// partition's: its batch is read again. Dropping what the client held
	// would read a fetch's share (~oneFetch) again per pause.
	batch := (32 << 10) / size
	pauses := int(p.counters.stats.Pauses.Load())
	if again := int(p.counters.stats.Read.Load()) - (slow + fast); again > pauses*batch {
		t.Fatalf("the client read %d records again over %d pauses: more than a batch (%d) per pause", again, pauses, batch)
	}
	t.Logf("slow partition: peak in flight %d (max_in_flight 100, paused at %d, a fetch's share %d records); pauses %d", maxSlow, partition.PauseFactor*100, oneFetch, p.counters.stats.Pauses.Load())
}
