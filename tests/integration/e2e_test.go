//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestEndToEnd: N records in → N out through a WASM module on the real
// broker, in order per key, offsets committed; a second run in the same
// group processes nothing again.
func TestEndToEnd(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, out, dlq)
	const count = 20000
	kafkatest.Produce(t, brokers, in, count, func(i int) string { return fmt.Sprintf("v-%06d", i) })
	cfgPath := writeConfig(t, brokers, n, modules["uppercase"], in, out, dlq, "")
	cfg, err := config.Load(cfgPath, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r, err := scheduler.NewRunner(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= count })
	seen := map[string]bool{}
	last := map[string]string{}
	for _, rec := range rd.Recs {
		v := string(rec.Value)
		if !strings.HasPrefix(v, "V-") || seen[v] {
			t.Fatalf("bad or duplicate output %q", v)
		}
		seen[v] = true
		if prev := last[string(rec.Key)]; prev >= v {
			t.Fatalf("key %s out of order: %s after %s", rec.Key, v, prev)
		}
		last[string(rec.Key)] = v
	}
	group := cfg.GroupID(&cfg.Pipelines[0])
	kafkatest.Eventually(t, 20*time.Second, "offsets committed to the end", func() bool {
		sum := committedSum(t, brokers, group, in)
		return sum == count
	})
	ctx, cancel := ctxTimeout(time.Minute)
	defer cancel()
	r.Stop(ctx)

	r2, err := scheduler.NewRunner(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	r2.Start()
	kafkatest.Eventually(t, 60*time.Second, "second run assigned all partitions", func() bool { return r2.Snapshots()[0].Tasks == 4 })
	time.Sleep(2 * time.Second) // room to (wrongly) reprocess
	r2.Stop(ctx)
	if s := r2.Snapshots()[0]; s.Fetched != 0 || s.Done != 0 {
		t.Fatalf("second run processed records again: %+v", s)
	}
}

// TestKillAndRestart: SIGKILL of a wasmstream process mid-run, then a
// restart: every input is in the output (duplicates allowed and counted),
// and a final SIGTERM exits 0 with everything committed.
func TestKillAndRestart(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, out, dlq)
	const count = 200000
	kafkatest.Produce(t, brokers, in, count, func(i int) string { return fmt.Sprintf("v-%06d", i) })
	cfg := writeConfig(t, brokers, n, modules["uppercase"], in, out, dlq, "")

	p1 := startProc(t, "run", "--config", cfg)
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, 2*time.Minute, "a third of the outputs before the kill", func(rs []*kgo.Record) bool { return len(rs) >= count/3 })
	p1.kill(t)
	beforeKill := len(rd.Recs)

	p2 := startProc(t, "run", "--config", cfg)
	seen := map[string]int{}
	counted := 0
	rd.ReadUntil(t, 3*time.Minute, "every input in the output after restart", func(rs []*kgo.Record) bool {
		for _, r := range rs[counted:] {
			seen[string(r.Value)]++
		}
		counted = len(rs)
		return len(seen) >= count
	})
	for i := 0; i < count; i++ {
		if seen[fmt.Sprintf("V-%06d", i)] == 0 {
			t.Fatalf("input %d lost", i)
		}
	}
	dups := len(rd.Recs) - count
	t.Logf("SIGKILL after ≥%d outputs: %d duplicates of %d records (%.2f%%), every input present", beforeKill, dups, count, 100*float64(dups)/count)
	if code := p2.stop(t, 60*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	group := n + ".p"
	sum := committedSum(t, brokers, group, in)
	if sum != count {
		t.Fatalf("committed %d offsets after a graceful stop, want %d", sum, count)
	}
}

// TestGuestFaults: every guest fault kind sends its record to the
// dead-letter topic with the reason; later records keep flowing; the host
// process keeps running.
func TestGuestFaults(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 1, in, out, dlq)
	faults := []string{"fail", "retry", "panic", "loop", "oom", "badptr", "exit", "poison"}
	wantKind := map[string]string{"fail": "guest.fail", "retry": "guest.retry", "panic": "fault.panic", "loop": "fault.deadline",
		"oom": "fault.oom", "badptr": "fault.bad_pointer", "exit": "fault.exit", "poison": "guest.fail"}
	wantMsg := map[string]string{"fail": "asked to fail", "retry": "asked to retry", "panic": "guest panic: asked to panic",
		"loop": "record deadline of 10s exceeded", "oom": "out of memory", "badptr": "outside guest memory",
		"exit": "exited with code 3", "poison": "not a JSON object"}
	// Each fault, then a healthy record right behind it.
	var values []string
	for _, f := range faults {
		if f == "poison" {
			values = append(values, "\x00\x01 not json")
		} else {
			values = append(values, fmt.Sprintf(`{"fault":%q}`, f))
		}
		values = append(values, fmt.Sprintf(`{"after":%q}`, f))
	}
	kafkatest.Produce(t, brokers, in, len(values), func(i int) string { return values[i] })
	cfg := writeConfig(t, brokers, n, modules["enrich"], in, out, dlq, "")
	p := startProc(t, "run", "--config", cfg)
	dl := kafkatest.NewReader(t, brokers, dlq)
	dl.ReadUntil(t, 2*time.Minute, "a dead letter per fault", func(rs []*kgo.Record) bool { return len(rs) >= len(faults) })
	ok := kafkatest.NewReader(t, brokers, out)
	ok.ReadUntil(t, time.Minute, "every healthy record", func(rs []*kgo.Record) bool { return len(rs) >= len(faults) })
	for _, rec := range dl.Recs {
		var off int
		fmt.Sscan(kafkatest.Header(rec, scheduler.HeaderOriginalOffset), &off)
		f := faults[off/2]
		kind, msg := kafkatest.Header(rec, scheduler.HeaderErrorKind), kafkatest.Header(rec, scheduler.HeaderError)
		if kind != wantKind[f] || !strings.Contains(msg, wantMsg[f]) {
			t.Errorf("%s (offset %d): kind %q error %q; want %q containing %q", f, off, kind, msg, wantKind[f], wantMsg[f])
		}
		if string(rec.Value) != values[off] {
			t.Errorf("%s: dead letter value %q, want the original %q", f, rec.Value, values[off])
		}
	}
	if len(dl.Recs) != len(faults) || len(ok.Recs) != len(faults) {
		t.Fatalf("%d dead letters and %d outputs, want %d each", len(dl.Recs), len(ok.Recs), len(faults))
	}
	if !p.alive() {
		t.Fatal("the host process died")
	}
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if got := kafkatest.Committed(t, brokers, n+".p", in)[0]; got != int64(len(values)) {
		t.Fatalf("committed %d, want %d", got, len(values))
	}
}

// TestRebalance: a second host joins the group mid-run and the first leaves
// mid-run (SIGTERM). Revoked partitions are drained and committed before they
// move, so every input is in the output exactly once, and the two hosts'
// done counts add up to the input.
func TestRebalance(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 6, in, out, dlq)
	count := 400000
	kafkatest.Produce(t, brokers, in, count, func(i int) string { return fmt.Sprintf("v-%07d", i) })
	cfg := writeConfig(t, brokers, n, modules["uppercase"], in, out, dlq, "")
	a := startProc(t, "run", "--config", cfg)
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, 2*time.Minute, "some outputs", func(rs []*kgo.Record) bool { return len(rs) >= count/10 })
	b := startProc(t, "run", "--config", cfg)
	// The first host can drain the whole input before the group gives the
	// second one its partitions: keep input coming until the second works.
	kafkatest.Eventually(t, 2*time.Minute, "the second host processing records", keepProducing(func() bool { return doneCount(b.logText(), "status") > 0 }, func() {
		from := count
		kafkatest.Produce(t, brokers, in, 20000, func(i int) string { return fmt.Sprintf("v-%07d", from+i) })
		count += 20000
	}))
	if code := a.stop(t, time.Minute); code != 0 {
		t.Fatalf("first host exit code %d", code)
	}
	doneA := doneCount(a.logText(), "stopped")
	seen := map[string]int{}
	counted := 0
	rd.ReadUntil(t, 3*time.Minute, "every input in the output", func(rs []*kgo.Record) bool {
		for _, r := range rs[counted:] {
			seen[string(r.Value)]++
		}
		counted = len(rs)
		return len(seen) >= count
	})
	if code := b.stop(t, time.Minute); code != 0 {
		t.Fatalf("second host exit code %d", code)
	}
	doneB := doneCount(b.logText(), "stopped")
	rd.ReadFor(2 * time.Second) // late duplicates, if any
	dups := len(rd.Recs) - len(seen)
	t.Logf("host A did %d records, host B %d; %d outputs for %d inputs", doneA, doneB, len(rd.Recs), count)
	if dups != 0 || doneA+doneB != count || doneA == 0 || doneB == 0 {
		t.Fatalf("not exactly once across the rebalance: %d duplicates, done %d+%d", dups, doneA, doneB)
	}
}

// keepProducing is a condition for kafkatest.Eventually that calls more
// (which produces another batch of input) at most once a second while cond
// is false.
func keepProducing(cond func() bool, more func()) func() bool {
	var last time.Time
	return func() bool {
		if cond() {
			return true
		}
		if time.Since(last) >= time.Second {
			more()
			last = time.Now()
		}
		return false
	}
}

// doneCount returns the last "done=N" on a log line with msg=<msg>.
func doneCount(log, msg string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "msg="+msg+" ") {
			continue
		}
		if i := strings.Index(line, " done="); i >= 0 {
			fmt.Sscan(line[i+len(" done="):], &n)
		}
	}
	return n
}
