package scheduler

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/lookupsrv"
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
// committed to the end, in transactions cut by max_records. The interval is
// long, so the cuts are max_records': a cut starts at 200 records and the
// records released while it starts join it (RATIONALE.md, "Exactly once"),
// so a transaction holds somewhat more than 200 records on a loaded
// machine; with cuts by the interval alone there would be one or two.
func TestExactlyOncePool(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq")
	const n = 3000
	produceHash(t, brokers, "in", n, func(i int) string { return fmt.Sprint(i % 97) }, func(i int) int { return 1 + i%300 })
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "hash"), "in", "out", "dlq",
		"    ordering: none\n    instances: {min: 1, max: 3}\n    guarantee: exactly_once\n    transactions: {max_records: 200, interval: 2s}", "")
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
	if s.TxnCommitted < n/200/2 {
		t.Fatalf("%d transactions for %d records with max_records 200: not cut by max_records", s.TxnCommitted, n)
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
		p.injectTxnFailure(errors.New("injected produce failure"))
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

// TestExactlyOnceAbortCountsOnce: a record released into a transaction
// that aborts is processed again, and counted once: after aborts, the
// done, output, dead-letter and dropped counters equal what the input's
// committed outcomes are. Records flow in while transactions are aborted,
// so the aborted ones carried records (their outputs are in the log, seen
// read_uncommitted). Before, a record was counted as it entered a
// transaction, and again after the abort: done above the input.
func TestExactlyOnceAbortCountsOnce(t *testing.T) {
	for _, tc := range []struct {
		name, guest string
		n           int
		// record is input i; outcome is where it ends: "out", "dlq" or
		// "dropped".
		record  func(i int) *kgo.Record
		outcome func(i int) string
	}{
		{"hash, dead letters", "hash", 3000, func(i int) *kgo.Record {
			rounds := "200"
			if i%20 == 7 {
				rounds = "bad" // a terminal failure: dead-lettered
			}
			return &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint(i % 97)), Value: []byte(strconv.Itoa(i)),
				Headers: []kgo.RecordHeader{{Key: "rounds", Value: []byte(rounds)}}}
		}, func(i int) string {
			if i%20 == 7 {
				return "dlq"
			}
			return "out"
		}},
		{"filter, dropped", "filter", 6000, func(i int) *kgo.Record {
			v := fmt.Sprint("drop-", i)
			if i%3 == 0 {
				v = fmt.Sprint("keep-", i)
			}
			return &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint(i % 97)), Value: []byte(v)}
		}, func(i int) string {
			if i%3 == 0 {
				return "out"
			}
			return "dropped"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			brokers := kafkatest.Fake(t)
			kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq")
			want := map[string]int64{}
			for i := range tc.n {
				want[tc.outcome(i)]++
			}
			cfg := testConfigWith(t, brokers, "g", guestPath(t, tc.guest), "in", "out", "dlq",
				"    guarantee: exactly_once\n    transactions: {max_records: 300, interval: 100ms}", "")
			r := startRunner(t, cfg)
			defer r.Stop(context.Background())
			p := r.Pipelines()[0]
			// The input arrives in batches while transactions abort.
			cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(5*time.Millisecond))
			const batches = 20
			for b := range batches {
				var recs []*kgo.Record
				for i := b * tc.n / batches; i < (b+1)*tc.n/batches; i++ {
					recs = append(recs, tc.record(i))
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err := cl.ProduceSync(ctx, recs...).FirstErr()
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				if b%4 == 2 {
					before := p.Snapshot().TxnAborted
					p.injectTxnFailure(errors.New("injected produce failure"))
					kafkatest.Eventually(t, time.Minute, "the transaction aborted", func() bool { return p.Snapshot().TxnAborted > before })
				}
			}
			kafkatest.Eventually(t, 2*time.Minute, "offsets committed to the end", func() bool {
				sum := int64(0)
				for _, o := range kafkatest.Committed(t, brokers, "g.p", "in") {
					sum += o
				}
				return sum == int64(tc.n)
			})
			kafkatest.Eventually(t, 30*time.Second, "every record counted done", func() bool { return p.Snapshot().Done >= int64(tc.n) })
			// Outputs of aborted transactions are in the log: the aborts
			// carried records, each of which was processed twice.
			raw := kafkatest.Client(t, brokers, kgo.ConsumeTopics("out", "dlq"), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
			logged := 0
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			for ctx.Err() == nil {
				logged += raw.PollFetches(ctx).NumRecords()
			}
			s := p.Snapshot()
			if logged <= int(want["out"]+want["dlq"]) {
				t.Fatalf("%d outputs and dead letters in the log for %d committed: no aborted transaction carried a record (%d aborted); the test did not test", logged, want["out"]+want["dlq"], s.TxnAborted)
			}
			if s.Done != int64(tc.n) || s.Outputs != want["out"] || s.DeadLetter != want["dlq"] || s.Dropped != want["dropped"] {
				t.Fatalf("after %d aborted transactions: done %d, outputs %d, dead letters %d, dropped %d; want %d, %d, %d, %d (each record counted once)",
					s.TxnAborted, s.Done, s.Outputs, s.DeadLetter, s.Dropped, tc.n, want["out"], want["dlq"], want["dropped"])
			}
			t.Logf("%d records, %d transactions aborted (%d outputs and dead letters in the log, read_uncommitted): done %d, outputs %d, dead letters %d, dropped %d",
				tc.n, s.TxnAborted, logged, s.Done, s.Outputs, s.DeadLetter, s.Dropped)
		})
	}
}

// TestExactlyOnceFatalEndRebuilds: a transaction's end fails with an
// error franz-go keeps as its producer ID's state and does not recover
// from (INVALID_PRODUCER_ID_MAPPING, as from a transaction coordinator
// failing over while the EndTxn was in flight: Kafka 4's transactions,
// KIP-890 part 2). The pipeline's client is rebuilt in the process at
// once: its tasks dropped, a new client with the same transactional id
// (fencing the old epoch; the open transaction aborted), the group
// rejoined, every partition from its committed offset. The host does not
// fail and every input comes out once, long before the broker would time
// the transaction out. Before, the pipeline tried to settle the end with
// the failed client, whose abort did nothing, and waited for the
// committed offsets to be stable: for transactions.timeout (5 min here)
// or until the host stopped.
func TestExactlyOnceFatalEndRebuilds(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq")
	const n = 3000
	produceHash(t, brokers, "in", n, func(i int) string { return fmt.Sprint(i % 97) }, func(int) int { return 200 })
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "hash"), "in", "out", "dlq",
		"    guarantee: exactly_once\n    transactions: {max_records: 300, interval: 100ms, timeout: 5m}", "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	kafkatest.Eventually(t, time.Minute, "a transaction committed", func() bool { return r.Pipelines()[0].Snapshot().TxnCommitted > 0 })
	// The next commit's EndTxn is answered INVALID_PRODUCER_ID_MAPPING
	// (one request: a control function handles one).
	var refused atomic.Int64
	c.ControlKey(int16(kmsg.EndTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.EndTxnRequest)
		if !req.Commit {
			c.DropControl()
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.InvalidProducerIDMapping.Code
		refused.Add(1)
		return resp, nil, true
	})
	kafkatest.Eventually(t, time.Minute, "a commit's EndTxn refused", func() bool { return refused.Load() > 0 })
	refusedAt := time.Now()
	kafkatest.Eventually(t, 45*time.Second, "the pipeline rebuilt after its end failed with a fatal producer error", func() bool {
		select {
		case err := <-r.Failed():
			t.Fatalf("the host failed: %v", err)
		default:
		}
		return r.Pipelines()[0].Snapshot().Rebuilds > 0
	})
	rebuilt := time.Since(refusedAt)
	kafkatest.Eventually(t, 45*time.Second, "offsets committed to the end", func() bool {
		sum := int64(0)
		for _, o := range kafkatest.Committed(t, brokers, "g.p", "in") {
			sum += o
		}
		return sum == n
	})
	checkOnce(t, eosCounts(t, brokers, "out", n), n)
	select {
	case err := <-r.Failed():
		t.Fatalf("the host failed: %v", err)
	default:
	}
	s := r.Pipelines()[0].Snapshot()
	if s.Done != n {
		t.Fatalf("done %d for %d records", s.Done, n)
	}
	t.Logf("rebuilt %v after the refused end; %d transactions committed, %d aborted, %d rebuilds", rebuilt.Round(time.Millisecond), s.TxnCommitted, s.TxnAborted, s.Rebuilds)
}

// TestExactlyOnceAsyncPipelined: ordering partition with asynchronous
// lookups pipelined on one instance, under exactly_once, with transactions
// aborted mid-run: outputs come out once each and in offset order, and many
// lookups were in flight at once.
func TestExactlyOnceAsyncPipelined(t *testing.T) {
	srv := lookupsrv.New(t, func(string) time.Duration { return time.Duration(rand.IntN(20)) * time.Millisecond })
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 1500
	kafkatest.Produce(t, brokers, "in", n, func(i int) string { return fmt.Sprintf(`"v%05d"`, i) })
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "lookup"), "in", "out", "dlq",
		asyncKeys(srv, "      max_in_flight: 20\n    guarantee: exactly_once\n    transactions: {max_records: 100, interval: 50ms}"), "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	p := r.Pipelines()[0]
	kafkatest.Eventually(t, time.Minute, "a transaction committed", func() bool { return p.Snapshot().TxnCommitted > 0 })
	p.injectTxnFailure(errors.New("injected produce failure"))
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n })
	rd.ReadFor(500 * time.Millisecond)
	if len(rd.Recs) != n {
		t.Fatalf("%d outputs for %d inputs", len(rd.Recs), n)
	}
	for i, rec := range rd.Recs {
		if o := decodeLookup(t, rec); string(o.Record) != fmt.Sprintf(`"v%05d"`, i) {
			t.Fatalf("output %d is of record %s: partition order or exactly-once broken", i, o.Record)
		}
	}
	if pk := srv.Peak.Load(); pk < 5 {
		t.Fatalf("peak concurrent lookups %d: not pipelined", pk)
	}
	if s := p.Snapshot(); s.TxnAborted == 0 {
		t.Fatal("no transaction aborted")
	}
	t.Logf("peak concurrent lookups %d, %d transactions, %d aborted", srv.Peak.Load(), p.Snapshot().TxnCommitted, p.Snapshot().TxnAborted)
}

// TestExactlyOnceFailurePaths: under exactly_once with key ordering on a
// pool, retry-topic and dead-letter produces ride the same transactions as
// outputs: every input ends exactly once in the output (healthy, or
// succeeded on a retry) or the dead-letter topic (terminal failures),
// read_committed, and both groups' offsets are committed to the end.
func TestExactlyOnceFailurePaths(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq", "g.p.retry.200ms")
	const n = 1000
	cl := kafkatest.Client(t, brokers)
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		v := fmt.Sprintf(`{"i":%d}`, i)
		switch i % 50 {
		case 7:
			v = fmt.Sprintf(`{"i":%d,"fault":"fail"}`, i)
		case 13:
			v = fmt.Sprintf(`{"i":%d,"fault":"transient","until":2}`, i)
		}
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint(i % 11)), Value: []byte(v)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "enrich"), "in", "out", "dlq",
		"    ordering: key\n    instances: {min: 1, max: 2}\n    retry: {max_attempts: 2, backoff: [200ms]}\n    guarantee: exactly_once\n    transactions: {max_records: 100, interval: 50ms}", "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	out := kafkatest.NewReader(t, brokers, "out")
	dlq := kafkatest.NewReader(t, brokers, "dlq")
	seen := map[int]int{}
	outN, dlN := 0, 0
	kafkatest.Eventually(t, 2*time.Minute, "every input in the output or the dead-letter topic", func() bool {
		out.ReadFor(100 * time.Millisecond)
		dlq.ReadFor(100 * time.Millisecond)
		for _, rec := range out.Recs[outN:] {
			var doc struct{ I int }
			json.Unmarshal(rec.Value, &doc)
			seen[doc.I]++
		}
		for _, rec := range dlq.Recs[dlN:] {
			var doc struct{ I int }
			json.Unmarshal(rec.Value, &doc)
			seen[doc.I]++
			if kafkatest.Header(rec, HeaderErrorKind) != KindGuestFail {
				t.Errorf("dead letter %s: kind %q", rec.Value, kafkatest.Header(rec, HeaderErrorKind))
			}
		}
		outN, dlN = len(out.Recs), len(dlq.Recs)
		return len(seen) >= n
	})
	out.ReadFor(500 * time.Millisecond)
	dlq.ReadFor(100 * time.Millisecond)
	if len(out.Recs)+len(dlq.Recs) != n || len(dlq.Recs) != n/50 {
		t.Fatalf("%d outputs + %d dead letters for %d inputs (want %d dead letters)", len(out.Recs), len(dlq.Recs), n, n/50)
	}
	// Committed to the end: past the last record of each partition (a
	// transactionally written topic also holds commit markers, which take
	// offsets of their own).
	for group, topic := range map[string]string{"g.p": "in", "g.p.retry": cfg.Pipelines[0].TierTopic(0)} {
		rd := kafkatest.NewReader(t, brokers, topic)
		rd.ReadFor(time.Second)
		end := map[int32]int64{}
		for _, rec := range rd.Recs {
			end[rec.Partition] = max(end[rec.Partition], rec.Offset+1)
		}
		kafkatest.Eventually(t, 30*time.Second, group+" committed to the end", func() bool {
			got := kafkatest.Committed(t, brokers, group, topic)
			for part, e := range end {
				if got[part] < e {
					return false
				}
			}
			return len(end) > 0
		})
	}
}

// TestExactlyOnceOutOfOrderPicks: with ordering key on a pool, records are
// picked out of offset order (a key's lane holds its next record behind a
// slow one while later records of other keys run) and workers reach the
// release order in any order after their picks. Every abort starts over
// from the committed offsets, so an output committed past its transaction's
// offset would come out twice: with aborts every few transactions, each
// input still comes out exactly once.
func TestExactlyOnceOutOfOrderPicks(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 6000
	// Key 0 costs 100 times the others: its lane holds records back.
	produceHash(t, brokers, "in", n, func(i int) string { return fmt.Sprint(i % 7) }, func(i int) int {
		if i%7 == 0 {
			return 300
		}
		return 3
	})
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "hash"), "in", "out", "dlq",
		"    ordering: key\n    instances: {min: 4, max: 4}\n    guarantee: exactly_once\n    transactions: {max_records: 40, interval: 5ms}", "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	p := r.Pipelines()[0]
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		committed := int64(0)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				// An abort every few transactions: once three committed
				// since the last one, so that a starved machine, where a
				// tick sees one commit, still makes progress.
				if s := p.Snapshot(); s.Done < n*3/4 && s.TxnCommitted >= committed+3 {
					committed = s.TxnCommitted
					p.injectTxnFailure(errors.New("injected produce failure"))
				}
			}
		}
	}()
	checkOnce(t, eosCounts(t, brokers, "out", n), n)
	s := p.Snapshot()
	if s.TxnAborted < 5 {
		t.Fatalf("%d transactions aborted: the test needs several", s.TxnAborted)
	}
	t.Logf("%d transactions committed, %d aborted", s.TxnCommitted, s.TxnAborted)
}

// endTxnCutter is a dialer whose connections, while it is armed, drop
// right after an EndTxn request: sent on to the broker (deliver) or not.
// Either way the client does not learn how its transaction ended.
type endTxnCutter struct {
	armed   atomic.Bool
	deliver bool
	cuts    atomic.Int64
}

func (c *endTxnCutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: conn, c: c}, nil
}

type cutConn struct {
	net.Conn
	c *endTxnCutter
}

// Write sees each request whole (franz-go writes one per call): its size,
// then its API key (EndTxn is 26).
func (cc *cutConn) Write(b []byte) (int, error) {
	if len(b) >= 6 && binary.BigEndian.Uint16(b[4:6]) == 26 && cc.c.armed.Load() {
		cc.c.cuts.Add(1)
		if cc.c.deliver {
			cc.Conn.Write(b)
		}
		cc.Conn.Close()
		return len(b), nil
	}
	return cc.Conn.Write(b)
}

// TestExactlyOnceUnconfirmedEnd: a transaction's EndTxn reaches the broker
// (or not) and its answer never comes back, as when the transaction
// coordinator dies or moves; franz-go's retries run out and End fails with
// the outcome unknown. The pipeline settles the transaction, reads the
// committed offsets back from the broker and goes on: the host does not
// stop, and the read_committed output holds every input exactly once —
// also when the commit had landed, where restarting from the offsets the
// host last saw committed would have duplicated the transaction; with
// state, every count is right and appears once (the landed transaction's
// state writes are flushed to the store before the tasks restart).
func TestExactlyOnceUnconfirmedEnd(t *testing.T) {
	for _, tc := range []struct {
		name           string
		deliver, state bool
	}{{"commit landed", true, false}, {"commit lost", false, false}, {"commit landed with state", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			brokers := kafkatest.Fake(t)
			kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq")
			const half = 1000
			eos := "    guarantee: exactly_once\n    transactions: {max_records: 100, interval: 300ms}"
			cfg := testConfigWith(t, brokers, "g", guestPath(t, "hash"), "in", "out", "dlq", eos, "")
			produce := func() {
				produceHash(t, brokers, "in", half, func(i int) string { return fmt.Sprint(i) }, func(int) int { return 1 })
			}
			if tc.state {
				cfg = testConfigWith(t, brokers, "g", guestPath(t, "count"), "in", "out", "dlq", stateConfig(t, brokers, t.TempDir(), "\n"+eos), "")
				produce = func() { kafkatest.Produce(t, brokers, "in", half, strconv.Itoa) }
			}
			produce()
			cut := &endTxnCutter{deliver: tc.deliver}
			r, err := NewRunnerWith(context.Background(), cfg, testLogger(t), Options{clientOpts: []kgo.Opt{
				kgo.Dialer(cut.dial), kgo.RequestRetries(2), kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
			}})
			if err != nil {
				t.Fatal(err)
			}
			r.Start()
			defer r.Stop(context.Background())
			failed := func() {
				select {
				case err := <-r.Failed():
					t.Fatalf("the pipeline failed: %v", err)
				default:
				}
			}
			p := r.Pipelines()[0]
			kafkatest.Eventually(t, time.Minute, "a transaction committed", func() bool { return p.Snapshot().TxnCommitted > 0 })
			cut.armed.Store(true)
			produce()
			kafkatest.Eventually(t, time.Minute, "an unconfirmed end settled", func() bool {
				failed()
				return p.Snapshot().TxnSettled > 0
			})
			cut.armed.Store(false)
			if tc.state {
				want := trueCounts(half, 2)
				top, seen := countState(t, kafkatest.NewReader(t, brokers, "out"), want)
				checkCounts(t, top, want)
				for kc, c := range seen {
					if c != 1 {
						t.Errorf("%s appears %d times", kc, c)
					}
				}
			} else {
				checkOnce(t, eosCounts(t, brokers, "out", 2*half), 2*half)
			}
			kafkatest.Eventually(t, 30*time.Second, "offsets committed to the end", func() bool {
				sum := int64(0)
				for _, o := range kafkatest.Committed(t, brokers, "g.p", "in") {
					sum += o
				}
				return sum == 2*half
			})
			failed()
			s := p.Snapshot()
			t.Logf("%d EndTxn requests cut; %d transactions committed, %d aborted, %d settled", cut.cuts.Load(), s.TxnCommitted, s.TxnAborted, s.TxnSettled)
		})
	}
}
