//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// The tests of this file back the promises of RELIABILITY.md: repeated
// SIGKILLs lose nothing, a broker restart is survived, and memory stays flat
// over a soak with hostile records in the mix.

// TestRepeatedKills: five SIGKILLs of the wasmstream process during one run,
// each followed by a restart; every input reaches the output, and a final
// SIGTERM commits everything.
func TestRepeatedKills(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, out, dlq)
	const count, kills = 150000, 5
	kafkatest.Produce(t, brokers, in, count, func(i int) string { return fmt.Sprintf("v-%06d", i) })
	cfg := writeConfig(t, brokers, n, modules["uppercase"], in, out, dlq, "")

	rd := kafkatest.NewReader(t, brokers, out)
	seen := map[string]int{}
	counted := 0
	tally := func(rs []*kgo.Record) {
		for _, r := range rs[counted:] {
			seen[string(r.Value)]++
		}
		counted = len(rs)
	}
	killed := 0
	for k := 1; k <= kills; k++ {
		remaining := count - len(seen)
		if remaining == 0 {
			break // the last incarnation finished before its kill landed
		}
		p := startProc(t, "run", "--config", cfg)
		// Each incarnation makes some progress before it is killed, so every
		// kill lands mid-stream with records in flight and uncommitted. The
		// progress asked is a share of the distinct inputs still missing:
		// an incarnation redoes what the one before left uncommitted, and a
		// fixed step could ask for more than the input holds.
		target := len(seen) + max(1, remaining/(kills-k+2))
		rd.ReadUntil(t, 3*time.Minute, fmt.Sprintf("progress before kill %d (%d of %d inputs seen, want %d)", k, len(seen), count, target), func(rs []*kgo.Record) bool {
			tally(rs)
			return len(seen) >= target
		})
		p.kill(t)
		killed++
	}
	p := startProc(t, "run", "--config", cfg)
	rd.ReadUntil(t, 4*time.Minute, "every input in the output after the last restart", func(rs []*kgo.Record) bool {
		tally(rs)
		return len(seen) >= count
	})
	for i := 0; i < count; i++ {
		if seen[fmt.Sprintf("V-%06d", i)] == 0 {
			t.Fatalf("input %d lost", i)
		}
	}
	// Partitions an earlier incarnation committed to their end fetch no
	// record in this one; the status still reports no lag for them.
	kafkatest.Eventually(t, 30*time.Second, "a status line with lag=0", func() bool {
		lines := strings.Split(strings.TrimSpace(p.logText()), "\n")
		return strings.Contains(lines[len(lines)-1], " lag=0 ")
	})
	if code := p.stop(t, 60*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	sum := committedSum(t, brokers, n+".p", in)
	if sum != count {
		t.Fatalf("committed %d offsets after the graceful stop, want %d", sum, count)
	}
	if killed < 3 {
		t.Fatalf("only %d SIGKILLs landed mid-stream", killed)
	}
	t.Logf("%d SIGKILLs over %d records: 0 lost, %d duplicates (%.2f%%)", killed, count, len(rd.Recs)-count, 100*float64(len(rd.Recs)-count)/count)
}

// TestNoLagAfterCleanRestart: a partition its group committed to the end
// brings a restarted process no record, while the other partitions bring
// new ones; once those are done the status reports lag=0 (the empty
// partition's position is the end of its fetch), not that partition's
// whole length.
func TestNoLagAfterCleanRestart(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, out, dlq)
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(parts []int32, each int) {
		var recs []*kgo.Record
		for _, part := range parts {
			for i := range each {
				recs = append(recs, &kgo.Record{Topic: in, Partition: part, Value: []byte(fmt.Sprintf("v-%d-%d", part, i))})
			}
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	const each = 500
	produce([]int32{0, 1, 2, 3}, each)
	cfg := writeConfig(t, brokers, n, modules["uppercase"], in, out, dlq, "")
	rd := kafkatest.NewReader(t, brokers, out)
	p := startProc(t, "run", "--config", cfg)
	rd.ReadUntil(t, time.Minute, "the first run's outputs", func(rs []*kgo.Record) bool { return len(rs) >= 4*each })
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	// Partition 3 gets nothing new: the restarted process fetches no
	// record there.
	produce([]int32{0, 1, 2}, each)
	p = startProc(t, "run", "--config", cfg)
	rd.ReadUntil(t, time.Minute, "the second run's outputs", func(rs []*kgo.Record) bool { return len(rs) >= 7*each })
	kafkatest.Eventually(t, 30*time.Second, "a status line with every new record done", func() bool {
		done := statusInts(p.logText(), "done")
		return len(done) > 0 && done[len(done)-1] == 3*each
	})
	time.Sleep(2 * time.Second) // two more status lines
	if lag := statusInts(p.logText(), "lag"); lag[len(lag)-1] != 0 {
		t.Fatalf("lag per status line: %v; want 0 once every record is done", lag)
	}
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	sum := committedSum(t, brokers, n+".p", in)
	if sum != 7*each {
		t.Fatalf("committed %d, want %d", sum, 7*each)
	}
}

// TestBrokerRestart: the broker is stopped and started again (same data)
// while wasmstream runs; the host rides it out, takes the records produced
// after the restart, loses none and commits to the end.
func TestBrokerRestart(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	script := wt.RepoRoot(t) + "/tests/kafka/kafka.sh"
	if err := exec.Command("bash", script, "status").Run(); err != nil {
		t.Fatalf("this test restarts the broker that tests/kafka/kafka.sh started, and that broker is not running: %v", err)
	}
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, out, dlq)
	const half = 30000
	kafkatest.Produce(t, brokers, in, half, func(i int) string { return fmt.Sprintf("v-%06d", i) })
	cfg := writeConfig(t, brokers, n, modules["uppercase"], in, out, dlq, "")
	p := startProc(t, "run", "--config", cfg)

	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, 2*time.Minute, "a third of the outputs before the restart", func(rs []*kgo.Record) bool { return len(rs) >= half/3 })
	t0 := time.Now()
	cmd := exec.Command("bash", script, "restart")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("broker restart: %v\n%s", err, stderr.String())
	}
	down := time.Since(t0)
	if !p.alive() {
		t.Fatalf("wasmstream exited during the broker restart")
	}
	kafkatest.Produce(t, brokers, in, half, func(i int) string { return fmt.Sprintf("v-%06d", half+i) })
	seen := map[string]bool{}
	counted := 0
	rd.ReadUntil(t, 3*time.Minute, "every input in the output after the broker restart", func(rs []*kgo.Record) bool {
		for _, r := range rs[counted:] {
			seen[string(r.Value)] = true
		}
		counted = len(rs)
		return len(seen) >= 2*half
	})
	resumed := time.Since(t0)
	if code := p.stop(t, 60*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	sum := committedSum(t, brokers, n+".p", in)
	if sum != 2*half {
		t.Fatalf("committed %d offsets after the graceful stop, want %d", sum, 2*half)
	}
	t.Logf("broker restart took %v; every one of %d inputs in the output %v after it began; %d duplicates; offsets committed to the end",
		down.Round(100*time.Millisecond), 2*half, resumed.Round(100*time.Millisecond), len(rd.Recs)-2*half)
}

// TestSoakMemory runs the host under steady load with hostile records in
// the mix (panics, out-of-memory guests, terminal failures: every one
// replaces an instance) and samples its resident memory. After warm-up the
// RSS must not trend upwards. WASMSTREAM_SOAK sets the duration (default
// 90s; RELIABILITY.md quotes a longer run).
func TestSoakMemory(t *testing.T) {
	t.Parallel() // a steady-load test (elastic_test.go)
	brokers := kafkatest.RealBrokers(t)
	dur := soakDuration(t, 90*time.Second)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, out, dlq)
	cfg := writeConfig(t, brokers, n, modules["enrich"], in, out, dlq, "")
	p := startProc(t, "run", "--config", cfg)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(5*time.Millisecond))
	const rate = 800 // records/s
	produced, hostile := 0, 0
	prodDone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		end := time.Now().Add(dur)
		for time.Now().Before(end) {
			select {
			case <-ctx.Done():
				prodDone <- ctx.Err()
				return
			case <-tick.C:
			}
			recs := make([]*kgo.Record, 0, rate/20)
			for j := 0; j < rate/20; j++ {
				v := fmt.Sprintf(`{"i":%d}`, produced)
				switch {
				case produced%100 == 7:
					v = fmt.Sprintf(`{"i":%d,"fault":"panic"}`, produced)
				case produced%100 == 31:
					v = fmt.Sprintf(`{"i":%d,"fault":"fail"}`, produced)
				case produced%500 == 77:
					v = fmt.Sprintf(`{"i":%d,"fault":"oom"}`, produced)
				case produced%250 == 3:
					v = "not json"
				}
				if strings.Contains(v, "fault") || v == "not json" {
					hostile++
				}
				recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprintf("k%d", produced%97)), Value: []byte(v)})
				produced++
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				prodDone <- err
				return
			}
		}
		prodDone <- nil
	}()

	type sample struct {
		at  time.Duration
		rss int // KiB
	}
	var samples []sample
	start := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var perr error
sampling:
	for {
		select {
		case perr = <-prodDone:
			break sampling
		case <-tick.C:
			if !p.alive() {
				t.Fatalf("wasmstream exited during the soak")
			}
			rss := rssKiB(p.cmd.Process.Pid)
			if rss == 0 {
				t.Fatalf("could not read the resident memory of pid %d", p.cmd.Process.Pid)
			}
			samples = append(samples, sample{time.Since(start), rss})
		}
	}
	if perr != nil {
		t.Fatalf("producing: %v", perr)
	}
	// Every input ends in the output or the dead-letter topic.
	outR, dlqR := kafkatest.NewReader(t, brokers, out), kafkatest.NewReader(t, brokers, dlq)
	outR.ReadUntil(t, 3*time.Minute, "the healthy records in the output", func(rs []*kgo.Record) bool { return len(rs) >= produced-hostile })
	dlqR.ReadUntil(t, 3*time.Minute, "the hostile records in the dead-letter topic", func(rs []*kgo.Record) bool { return len(rs) >= hostile })
	if code := p.stop(t, 60*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}

	// Compare the middle third with the last third (the first third is
	// warm-up: instances, buffers and caches reach their working size).
	third := len(samples) / 3
	if third < 5 {
		t.Fatalf("only %d RSS samples", len(samples))
	}
	med := func(s []sample) int {
		v := make([]int, len(s))
		for i := range s {
			v[i] = s[i].rss
		}
		sort.Slice(v, func(i, j int) bool { return v[i] < v[j] })
		return v[len(v)/2]
	}
	peak := 0
	for _, s := range samples {
		peak = max(peak, s.rss)
	}
	mid, last := med(samples[third:2*third]), med(samples[2*third:])
	t.Logf("soak %v at %d rec/s, %d records (%d hostile, every one in the dead-letter topic): RSS median %d MiB in the middle third, %d MiB in the last third (%+.1f%%), peak %d MiB, first sample %d MiB",
		dur, rate, produced, hostile, mid/1024, last/1024, 100*float64(last-mid)/float64(mid), peak/1024, samples[0].rss/1024)
	// Flat means: the last third's median is within 15% (+8 MiB of noise)
	// of the middle third's.
	if float64(last) > float64(mid)*1.15+8*1024 {
		t.Fatalf("resident memory trends upwards: median %d KiB in the middle third, %d KiB in the last third", mid, last)
	}
}

// TestKillRestartResumesAtOnce: with the default config (45 s session
// timeout) a host killed and restarted takes its partitions back at once:
// its pipelines join as static members under the same host.id, so the
// group neither waits for the dead member's session to expire nor
// rebalances; and it reads its module's compiled code from the compile
// cache (host.compile_cache_dir: auto) instead of compiling it. Measured
// from the restart to the first new output (within 5 s), and from the
// module being loaded to it.
func TestKillRestartResumesAtOnce(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, out, dlq)
	const count = 400000
	kafkatest.Produce(t, brokers, in, count, func(i int) string { return fmt.Sprintf("v-%06d", i) })
	cfg := writeConfig(t, brokers, n, modules["uppercase"], in, out, dlq, "")
	rd := kafkatest.NewReader(t, brokers, out)
	p := startProc(t, "run", "--config", cfg)
	rd.ReadUntil(t, 3*time.Minute, "outputs flowing", func(rs []*kgo.Record) bool { return len(rs) >= 20000 })
	p.kill(t)
	rd.ReadFor(time.Second) // the outputs acknowledged before the kill
	before := len(rd.Recs)
	restart := time.Now()
	p = startProc(t, "run", "--config", cfg)
	var loaded time.Time
	kafkatest.Eventually(t, time.Minute, "the restarted host's module loaded", func() bool {
		if strings.Contains(p.logText(), "msg=\"module loaded\"") {
			loaded = time.Now()
			return true
		}
		return false
	})
	rd.ReadUntil(t, 2*time.Minute, "outputs after the restart", func(rs []*kgo.Record) bool { return len(rs) > before })
	resumed := time.Now()
	t.Logf("restart to first output %s; module loaded to first output %s", resumed.Sub(restart).Round(10*time.Millisecond), resumed.Sub(loaded).Round(10*time.Millisecond))
	if !strings.Contains(p.logText(), "from_compile_cache=true") {
		t.Fatalf("the restarted host compiled its module again instead of reading it from the compile cache:\n%s", p.logText())
	}
	if d := resumed.Sub(restart); d > 5*time.Second {
		t.Fatalf("processing resumed %s after the restart: want within 5 s", d.Round(10*time.Millisecond))
	}
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
}

// soakDuration is how long the soak tests run: def, or WASMSTREAM_SOAK
// (a Go duration, e.g. 10m) for a long run.
func soakDuration(t *testing.T, def time.Duration) time.Duration {
	t.Helper()
	s := os.Getenv("WASMSTREAM_SOAK")
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 30*time.Second {
		t.Fatalf("WASMSTREAM_SOAK=%q: want a duration of at least 30s (e.g. 10m)", s)
	}
	return d
}
