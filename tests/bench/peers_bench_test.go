//go:build integration

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// BenchmarkUppercasePeers: the same map (upper-case each value) over the
// same input on the same broker, side by side: the franz-go passthrough
// reference, wasmstream with the Go guest and with the C guest, and Kafka
// Streams (tests/peers, built with Maven and javac) with 2 stream threads.
// wasmstream (the CLI) and Kafka Streams (a JVM) run as separate processes
// and are measured the same way: the rate from the first output to the last
// as seen by a consumer, CPU time and peak RSS from /proc, latency from a
// paced phase.
func BenchmarkUppercasePeers(b *testing.B) {
	brokers, n, in, goMod := uppercaseInput(b)
	cMod := filepath.Join(b.TempDir(), "c.wasm")
	os.WriteFile(cMod, wt.BuildCGuest(b, "plugins/examples/c-uppercase/uppercase.c"), 0o644)
	var ref float64
	runReference(b, brokers, in, n, &ref)
	bin := filepath.Join(b.TempDir(), "wasmstream")
	build := exec.Command("go", "build", "-o", bin, "./cmd/wasmstream")
	build.Dir = wt.RepoRoot(b)
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the wasmstream CLI: %v\n%s", err, out)
	}
	for _, g := range []struct{ name, path string }{{"go", goMod}, {"c", cMod}} {
		if smoke() && g.name == "c" {
			continue // the smoke run checks the harness (BenchmarkThroughput runs the C guest)
		}
		b.Run("wasmstream-"+g.name+"-guest", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				wasmstreamProcess(b, brokers, bin, g.path, in, n, ref)
			}
		})
	}
	b.Run("kafka-streams-2-threads", func(b *testing.B) {
		cp := streamsClasspath(b)
		for i := 0; i < b.N; i++ {
			outTopic := fmt.Sprintf("%s-streams-%d", in, time.Now().UnixNano())
			kafkatest.CreateTopic(b, brokers, partitions, outTopic)
			app := fmt.Sprintf("bench-streams-%d", time.Now().UnixNano())
			cmd := exec.Command("java", "-Xmx1g", "-Djava.io.tmpdir="+b.TempDir(), "-cp", cp, "wasmstream.peers.StreamsUppercase", strings.Join(brokers, ","), in, outTopic, app, "2")
			logf, _ := os.Create(filepath.Join(b.TempDir(), "streams.log"))
			cmd.Stdout, cmd.Stderr = logf, logf
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			first, last := consumeCount(b, brokers, outTopic, n, 5*time.Minute)
			cpu, rss := procStats(cmd.Process.Pid)
			rate := float64(n) / last.Sub(first).Seconds()
			// The paced phase goes to the input every run here has consumed
			// already; nothing after this one reads it.
			p50, p99 := pacedLatency(b, brokers, in, outTopic, rate/2)
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
			b.ReportMetric(float64(p50.Microseconds())/1000, "p50_ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, "p99_ms")
			b.ReportMetric(rate, "rec/s")
			if ref > 0 {
				b.ReportMetric(rate/ref, "x_ref")
			}
			b.ReportMetric(cpu.Seconds(), "cpu_s")
			b.ReportMetric(float64(rss)/(1<<20), "peak_rss_MiB")
		}
	})
}

// wasmstreamProcess runs the wasmstream CLI over in as a separate process,
// measured like the Java peers: CPU time and peak RSS from /proc (the
// process's whole life: start, module compile, drain), the paced latency
// phase; the rate over the span of its outputs' timestamps.
func wasmstreamProcess(b *testing.B, brokers []string, bin, module, in string, n int, ref float64) {
	id := time.Now().UnixNano()
	out, latIn := fmt.Sprintf("%s-ws-%d", in, id), fmt.Sprintf("%s-wslat-%d", in, id)
	kafkatest.CreateTopic(b, brokers, partitions, out, out+"-dlq", latIn)
	cfg := filepath.Join(b.TempDir(), "wasmstream.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`kafka: {brokers: [%q], group: bench-proc-%d}
pipelines:
  - {name: p, module: %s, inputs: [%s, %s], output: %s, dead_letter_topic: %s-dlq, retry: {max_attempts: 1}}
metrics: {listen: ""}
admin: {enabled: false}
log: {level: warn}
`, strings.Join(brokers, ","), id, module, in, latIn, out, out)), 0o644)
	cmd := exec.Command(bin, "run", "--config", cfg)
	logf, _ := os.Create(filepath.Join(b.TempDir(), "wasmstream.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	// The span of the outputs' own timestamps (set when wasmstream produced
	// them): a consumer started beside the process may join after the
	// first outputs, which would overstate the rate.
	rd := kafkatest.NewReader(b, brokers, out)
	rd.ReadUntil(b, 5*time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n })
	cpu, rss := procStats(cmd.Process.Pid)
	first, last := rd.Recs[0].Timestamp, rd.Recs[0].Timestamp
	for _, r := range rd.Recs {
		if r.Timestamp.Before(first) {
			first = r.Timestamp
		}
		if r.Timestamp.After(last) {
			last = r.Timestamp
		}
	}
	rate := float64(n) / last.Sub(first).Seconds()
	p50, p99 := pacedLatency(b, brokers, latIn, out, rate/2)
	b.ReportMetric(rate, "rec/s")
	if ref > 0 {
		b.ReportMetric(rate/ref, "x_ref")
	}
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99_ms")
	b.ReportMetric(cpu.Seconds(), "cpu_s")
	b.ReportMetric(float64(rss)/(1<<20), "peak_rss_MiB")
}

// consumeCount reads topic until n records arrived and returns when the
// first and the n-th were seen (opts: e.g. read_committed).
func consumeCount(b *testing.B, brokers []string, topic string, n int, timeout time.Duration, opts ...kgo.Opt) (first, last time.Time) {
	opts = append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)}, opts...)
	cl := kafkatest.Client(b, brokers, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatalf("%s: %d of %d records within %s", topic, got, n, timeout)
		}
		c := fs.NumRecords()
		if c > 0 && got == 0 {
			first = time.Now()
		}
		got += c
	}
	return first, time.Now()
}

// procStats returns a process's CPU time and peak resident set.
func procStats(pid int) (cpu time.Duration, peakRSS int64) {
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			f := strings.Fields(s[i+2:])
			if len(f) > 13 {
				ut, _ := strconv.ParseInt(f[11], 10, 64)
				st, _ := strconv.ParseInt(f[12], 10, 64)
				cpu = time.Duration(ut+st) * time.Second / 100 // USER_HZ
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				peakRSS = kb << 10
			}
		}
	}
	return
}
