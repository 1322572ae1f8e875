//go:build integration

package integration

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// Exactly-once on the real broker: crashes, a rebalance and a zombie host,
// each checked by a read_committed reader that counts every input's output.

const eosKeys = `    guarantee: exactly_once
    transactions: {max_records: 5000, interval: 100ms}
`

// eosCheck reads out read_committed until every one of count inputs
// ("v-%06d" upper-cased) is there, then a little longer, and fails on any
// loss or duplicate. It returns the number of records read.
func eosCheck(t *testing.T, rd *kafkatest.Reader, count int) {
	t.Helper()
	seen := map[string]int{}
	counted := 0
	read := func(rs []*kgo.Record) {
		for _, r := range rs[counted:] {
			seen[string(r.Value)]++
		}
		counted = len(rs)
	}
	rd.ReadUntil(t, 4*time.Minute, "every input in the read_committed output", func(rs []*kgo.Record) bool {
		read(rs)
		return len(seen) >= count
	})
	rd.ReadFor(3 * time.Second) // late duplicates, if any
	read(rd.Recs)
	dups := 0
	for i := 0; i < count; i++ {
		v := fmt.Sprintf("V-%06d", i)
		switch c := seen[v]; {
		case c == 0:
			t.Errorf("input %d lost", i)
		case c > 1:
			dups += c - 1
			if dups < 5 {
				t.Errorf("input %d appears %d times", i, c)
			}
		}
	}
	if dups > 0 { // which transactions carried the duplicates
		for _, r := range rd.Recs {
			if seen[string(r.Value)] > 1 {
				t.Logf("duplicate %s: output partition %d offset %d, producer id %d epoch %d, at %s", r.Value, r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch, r.Timestamp.Format("15:04:05.000"))
			}
		}
	}
	if len(seen) != count || dups > 0 || t.Failed() {
		t.Fatalf("not exactly once: %d distinct outputs for %d inputs, %d duplicates, %d records read", len(seen), count, dups, len(rd.Recs))
	}
}

// uncommittedCount reads topic read_uncommitted to its end and counts.
func uncommittedCount(t *testing.T, brokers []string, topic string) int {
	cl := kafkatest.Client(t, brokers, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	n := 0
	idle := time.Now()
	for time.Since(idle) < 3*time.Second {
		ctx, cancel := ctxTimeout(time.Second)
		got := cl.PollFetches(ctx).NumRecords()
		cancel()
		if got > 0 {
			n += got
			idle = time.Now()
		}
	}
	return n
}

// eosRun creates the topics of an exactly-once test (parts partitions),
// produces count records "v-%06d" and writes a config running the uppercase
// example with pipelineKeys (YAML lines at pipeline indentation) added.
func eosRun(t *testing.T, parts int32, count int, pipelineKeys string) (brokers []string, n, in, out, cfg string) {
	brokers = kafkatest.RealBrokers(t)
	n = names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, parts, in, out, dlq)
	kafkatest.Produce(t, brokers, in, count, func(i int) string { return fmt.Sprintf("v-%06d", i) })
	cfg = writeConfig(t, brokers, n, modules["uppercase"], in, out, dlq, "")
	replace(t, cfg, "    retry: {max_attempts: 1}\n", "    retry: {max_attempts: 1}\n"+pipelineKeys)
	return
}

// pausedEOSHost starts host a (host.id "a") on an exactly_once run of count
// records in small transactions that take a while, and pauses it
// (SIGSTOP) once a twentieth of the outputs are out: the pause lands in an
// open transaction. rd reads the outputs.
func pausedEOSHost(t *testing.T, count int) (brokers []string, n string, rd *kafkatest.Reader, cfg string, a *proc) {
	brokers, n, _, out, cfg := eosRun(t, 2, count, "    guarantee: exactly_once\n    transactions: {max_records: 2000, interval: 500ms}\n")
	rd = kafkatest.NewReader(t, brokers, out)
	a = startProcEnv(t, []string{"WASMSTREAM_HOST_ID=a"}, "run", "--config", cfg)
	rd.ReadUntil(t, 2*time.Minute, "some outputs", func(rs []*kgo.Record) bool { return len(rs) >= count/20 })
	a.cmd.Process.Signal(syscall.SIGSTOP)
	t.Logf("host a paused after %d outputs", len(rd.Recs))
	return brokers, n, rd, cfg, a
}

// TestExactlyOnceKills: SIGKILL wasmstream three times during a run of
// 300,000 records, restarting it each time. The read_committed output holds
// every input exactly once, while a read_uncommitted reader shows that the
// killed processes' open transactions did write records that were aborted.
// A kill can land between a commit and the next transaction's first
// records on the broker; a run whose three kills all did is not a proof
// either way, so the test runs again (fresh topics), up to three runs. Every
// run must be exactly once.
func TestExactlyOnceKills(t *testing.T) {
	for run := 1; run <= 3; run++ {
		if aborted := exactlyOnceKillsRun(t); aborted > 0 {
			return
		}
		t.Logf("run %d: the kills interrupted no open transaction; running again", run)
	}
	t.Fatal("in three runs the kills interrupted no open transaction, so the test proved nothing")
}

// exactlyOnceKillsRun is one run of TestExactlyOnceKills; it returns how
// many records of aborted transactions read_uncommitted saw.
func exactlyOnceKillsRun(t *testing.T) int {
	const count = 300000
	brokers, n, in, out, cfg := eosRun(t, 4, count, eosKeys)

	rd := kafkatest.NewReader(t, brokers, out)
	p := startProc(t, "run", "--config", cfg)
	for i, frac := range []int{15, 40, 65} {
		// Kill while a transaction is open: after more committed outputs,
		// at a random point of the next transaction.
		rd.ReadUntil(t, 3*time.Minute, fmt.Sprintf("%d%% of the outputs before kill %d", frac, i+1), func(rs []*kgo.Record) bool { return len(rs) >= count*frac/100 })
		time.Sleep(time.Duration(37*(i+1)) * time.Millisecond)
		p.kill(t)
		t.Logf("kill %d after %d committed outputs", i+1, len(rd.Recs))
		p = startProc(t, "run", "--config", cfg)
	}
	eosCheck(t, rd, count)
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	sum := committedSum(t, brokers, n+".p", in)
	if sum != count {
		t.Fatalf("committed %d offsets after a graceful stop, want %d", sum, count)
	}
	raw := uncommittedCount(t, brokers, out)
	t.Logf("read_committed: each of %d inputs once; read_uncommitted: %d records (%d from aborted transactions)", count, raw, raw-count)
	return raw - count
}

// TestExactlyOnceRebalance: a second host joins mid-run, then the first
// leaves mid-run; the output is still exactly once and both hosts did work.
// The pipeline runs a pool of instances per partition (ordering none), so
// records finish out of order and each transaction carries only the
// contiguous prefix of done records.
func TestExactlyOnceRebalance(t *testing.T) {
	count := 300000
	brokers, _, in, out, cfg := eosRun(t, 6, count, "    ordering: none\n    instances: {min: 1, max: 3}\n"+eosKeys)
	rd := kafkatest.NewReader(t, brokers, out)
	a := startProcEnv(t, []string{"WASMSTREAM_HOST_ID=a"}, "run", "--config", cfg)
	rd.ReadUntil(t, 2*time.Minute, "some outputs", func(rs []*kgo.Record) bool { return len(rs) >= count/10 })
	b := startProcEnv(t, []string{"WASMSTREAM_HOST_ID=b"}, "run", "--config", cfg)
	// The first host can drain the whole input before the group gives the
	// second one its partitions: keep input coming until the second works.
	kafkatest.Eventually(t, 2*time.Minute, "the second host processing records", keepProducing(func() bool { return doneCount(b.logText(), "status") > 0 }, func() {
		from := count
		kafkatest.Produce(t, brokers, in, 20000, func(i int) string { return fmt.Sprintf("v-%06d", from+i) })
		count += 20000
	}))
	if code := a.stop(t, time.Minute); code != 0 {
		t.Fatalf("first host exit code %d", code)
	}
	eosCheck(t, rd, count)
	if code := b.stop(t, time.Minute); code != 0 {
		t.Fatalf("second host exit code %d", code)
	}
	t.Logf("host a did %d records, host b %d (a count includes work of aborted transactions)", doneCount(a.logText(), "stopped"), doneCount(b.logText(), "stopped"))
}

// TestExactlyOnceZombieFenced: a host is paused (SIGSTOP) with a transaction
// open until the group gives its partitions to a second host, then resumed.
// The zombie's commit is refused and its transaction aborted; the output is
// exactly once.
func TestExactlyOnceZombieFenced(t *testing.T) {
	const count = 200000
	_, _, rd, cfg, a := pausedEOSHost(t, count)
	paused := time.Now()
	abortsBefore := strings.Count(a.logText(), "transaction aborted")
	b := startProcEnv(t, []string{"WASMSTREAM_HOST_ID=b"}, "run", "--config", cfg)
	// b owns every partition once a's session (10s) expired and b joined.
	kafkatest.Eventually(t, 2*time.Minute, "host b processing records", func() bool { return doneCount(b.logText(), "status") > 0 })
	a.cmd.Process.Signal(syscall.SIGCONT)
	t.Logf("host a resumed after %v", time.Since(paused).Round(time.Second))
	kafkatest.Eventually(t, time.Minute, "host a's open transaction aborted after it resumed", func() bool {
		return strings.Count(a.logText(), "transaction aborted") > abortsBefore
	})
	eosCheck(t, rd, count)
	for _, p := range []*proc{a, b} {
		if !p.alive() {
			t.Fatal("a host died")
		}
		if code := p.stop(t, time.Minute); code != 0 {
			t.Fatalf("exit code %d", code)
		}
	}
	for _, l := range strings.Split(a.logText(), "\n") {
		if strings.Contains(l, "transaction aborted") {
			t.Logf("zombie: %s", l)
			break
		}
	}
}

// TestExactlyOnceFencedHostGoesOn: a host is paused (SIGSTOP) with a
// transaction open, and meanwhile a producer with its transactional id
// starts (as a second process with the same host.id would), bumping the
// epoch and aborting the open transaction. Resumed, the host's producer is
// fenced for good — franz-go cannot go on with it —, so its pipeline is
// rebuilt with a new client and rejoins the group: the host does not exit,
// and the output is exactly once (RATIONALE.md, "A fenced pipeline is
// rebuilt, not the host stopped"). Before, the host exited with status 1.
func TestExactlyOnceFencedHostGoesOn(t *testing.T) {
	const count = 100000
	brokers, n, rd, _, a := pausedEOSHost(t, count)
	txnID := n + ".p.a" // <group>.<host.id>
	kafkatest.FenceProducer(t, brokers, txnID)
	a.cmd.Process.Signal(syscall.SIGCONT)
	kafkatest.Eventually(t, time.Minute, "host a's pipeline rebuilt", func() bool {
		if !a.alive() {
			t.Fatalf("host a exited:\n%s", tail(a.logText(), 20))
		}
		return strings.Contains(a.logText(), "pipeline rebuilt")
	})
	eosCheck(t, rd, count)
	if !a.alive() {
		t.Fatal("host a died")
	}
	for _, l := range strings.Split(a.logText(), "\n") {
		if strings.Contains(l, "rebuilding the pipeline") {
			t.Logf("fenced host: %s", l)
		}
	}
	if code := a.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}
