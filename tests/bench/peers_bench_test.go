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
// Kafka Streams is a separate JVM: its rate is taken from its first output
// to its last as seen by a consumer, and its CPU time and peak RSS are read
// from /proc.
func BenchmarkUppercasePeers(b *testing.B) {
	brokers, n, in, goMod := uppercaseInput(b)
	cMod := filepath.Join(b.TempDir(), "c.wasm")
	os.WriteFile(cMod, wt.BuildCGuest(b, "plugins/examples/c-uppercase/uppercase.c"), 0o644)
	var ref float64
	runReference(b, brokers, in, n, &ref)
	for _, g := range []struct{ name, path string }{{"go", goMod}, {"c", cMod}} {
		b.Run("wasmstream-"+g.name+"-guest", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				rate := float64(n) / host(b, brokers, g.path, in, n).Seconds()
				b.ReportMetric(rate, "rec/s")
				if ref > 0 {
					b.ReportMetric(rate/ref, "x_ref")
				}
			}
		})
	}
	b.Run("kafka-streams-2-threads", func(b *testing.B) {
		out, err := exec.Command("bash", filepath.Join(wt.RepoRoot(b), "tests/peers/peers.sh"), "build", "streams").Output()
		if err != nil {
			b.Fatalf("building the Java peers: %v", err)
		}
		cp := strings.TrimSpace(string(out))
		for i := 0; i < b.N; i++ {
			outTopic := fmt.Sprintf("%s-streams-%d", in, time.Now().UnixNano())
			kafkatest.CreateTopic(b, brokers, partitions, outTopic)
			app := fmt.Sprintf("bench-streams-%d", time.Now().UnixNano())
			cmd := exec.Command("java", "-Xmx1g", "-cp", cp, "wasmstream.peers.StreamsUppercase", strings.Join(brokers, ","), in, outTopic, app, "2")
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

// consumeCount reads topic until n records arrived and returns when the
// first and the n-th were seen.
func consumeCount(b *testing.B, brokers []string, topic string, n int, timeout time.Duration) (first, last time.Time) {
	cl := kafkatest.Client(b, brokers, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
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
