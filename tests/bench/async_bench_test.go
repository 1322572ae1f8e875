//go:build integration

package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/lookupsrv"
)

// ioLatency is the lookup service's fixed latency per request.
const ioLatency = 10 * time.Millisecond

// BenchmarkAsyncIO: an I/O-bound pipeline where each record needs one HTTP
// lookup taking 10 ms (the lookup example against a local service). Beside
// each other in one run:
//   - the blocking reference: a franz-go consumer that looks each record up
//     with a blocking request, one at a time (what a consumer loop without
//     async support does; its bound is 1/latency = 100 rec/s);
//   - wasmstream with async.max_in_flight L per instance, ordering
//     partition, 4 partitions (4 instances, 4·L lookups in flight at most),
//     reported as rec/s, the Little's-law bound 4·L/latency, the fraction of
//     the bound reached ("of_bound") and the ratio to the blocking reference
//     ("x_blocking"); and with async.max_in_flight: auto (its bound and
//     of_bound those of L = 256, on the same number of records).
func BenchmarkAsyncIO(b *testing.B) {
	brokers := kafkatest.RealBrokers(b)
	// The service runs in a process of its own: cpu_us/rec is the host's,
	// service_cpu_us/rec the service's (its clock is coarse: 10 ms ticks).
	srv := lookupsrv.StartProcess(b, wt.RepoRoot(b), ioLatency)
	servicePids = []int{srv.Pid}
	b.Cleanup(func() { servicePids = nil })
	lookup := filepath.Join(b.TempDir(), "lookup.wasm")
	os.WriteFile(lookup, wt.BuildGoGuest(b, "plugins/examples/lookup"), 0o644)
	const parts = 4
	var blocking float64
	b.Run("reference-blocking-one-at-a-time", func(b *testing.B) {
		n := 300
		in := inputEven(b, brokers, n, parts)
		kafkatest.CreateTopic(b, brokers, parts, in+"-ref")
		for i := 0; i < b.N; i++ {
			el := blockingLookup(b, brokers, in, in+"-ref", n, srv.URL+"/users/")
			blocking = float64(n) / el.Seconds()
			b.ReportMetric(blocking, "rec/s")
			b.ReportMetric(float64(time.Second/ioLatency), "bound_rec/s")
		}
	})
	// The Go lookup example at each L, then the Rust SDK's at two: the
	// host's own cost per lookup record, with a guest that costs ~20 µs less
	// than the Go one (BENCHMARKS.md, "I/O-bound").
	rustLookup := filepath.Join(b.TempDir(), "rust-lookup.wasm")
	os.WriteFile(rustLookup, wt.BuildRustGuest(b, "plugins/examples/rust-lookup"), 0o644)
	rows := []struct {
		name, module string
		limit        int // 0: auto
	}{
		{"wasmstream-async", lookup, 1}, {"wasmstream-async", lookup, 4}, {"wasmstream-async", lookup, 16},
		{"wasmstream-async", lookup, 64}, {"wasmstream-async", lookup, 256}, {"wasmstream-async", lookup, 0},
		{"wasmstream-async-rust-guest", rustLookup, 64}, {"wasmstream-async-rust-guest", rustLookup, 256},
	}
	concs := []int{16, 64}
	if smoke() {
		rows = []struct {
			name, module string
			limit        int
		}{rows[2], rows[5], rows[6]}
		concs = concs[:1]
	}
	for _, row := range rows {
		limit := row.limit
		name, setting := fmt.Sprint(limit), fmt.Sprint(limit)
		if limit == 0 {
			// auto: bounded at 1024; its input is the largest fixed row's.
			name, setting, limit = "auto", "auto", 256
		}
		bound := float64(parts*limit) / ioLatency.Seconds()
		// Enough records for ~3 s at the bound, within BENCH_RECORDS;
		// past saturation 60000 unless BENCH_RECORDS asks for more (a
		// longer run shows auto's settled rate, not its start).
		n := min(max(int(bound*3), 400), records(), max(60000, asyncRecords()))
		in := inputEven(b, brokers, n, parts)
		b.Run(fmt.Sprintf("%s/in_flight_per_instance=%s", row.name, name), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				el := host(b, brokers, row.module, in, n,
					fmt.Sprintf(`env: {LOOKUP_URL: "%s/users/"}`, srv.URL),
					fmt.Sprintf(`async: {max_in_flight: %s, http: {allow_hosts: [%q]}}`, setting, srv.Host()),
					"limits: {record_timeout: 30s}")
				rate := float64(n) / el.Seconds()
				b.ReportMetric(rate, "rec/s")
				b.ReportMetric(bound, "bound_rec/s")
				b.ReportMetric(rate/bound, "of_bound")
				if blocking > 0 {
					b.ReportMetric(rate/blocking, "x_blocking")
				}
			}
		})
	}
	// The peer: Confluent Parallel Consumer with as many threads as
	// wasmstream has lookups in flight at L = 4 and 16.
	for _, conc := range concs {
		bound := float64(conc) / ioLatency.Seconds()
		n := min(max(int(bound*3), 400), records(), 60000)
		in := inputEven(b, brokers, n, parts)
		b.Run(fmt.Sprintf("parallel-consumer/concurrency=%d", conc), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				rate, cpu, rss := parallelConsumer(b, brokers, in, n, conc, srv.URL+"/users/")
				b.ReportMetric(rate, "rec/s")
				b.ReportMetric(bound, "bound_rec/s")
				b.ReportMetric(rate/bound, "of_bound")
				if blocking > 0 {
					b.ReportMetric(rate/blocking, "x_blocking")
				}
				b.ReportMetric(cpu.Seconds(), "cpu_s")
				b.ReportMetric(float64(rss)/(1<<20), "peak_rss_MiB")
			}
		})
	}
}

// asyncRecords is BENCH_RECORDS when set, else 0.
func asyncRecords() int {
	if os.Getenv("BENCH_RECORDS") == "" {
		return 0
	}
	return records()
}

// parallelConsumer runs the Parallel Consumer peer (tests/peers/pc) over
// n records of in with concurrency threads, each doing one blocking lookup,
// and returns its rate from its first output to its last, with its CPU time
// and peak RSS.
func parallelConsumer(b *testing.B, brokers []string, in string, n, concurrency int, base string) (rate float64, cpu time.Duration, rss int64) {
	out, err := exec.Command("bash", filepath.Join(wt.RepoRoot(b), "tests/peers/peers.sh"), "build", "pc").Output()
	if err != nil {
		b.Fatalf("building the Parallel Consumer peer: %v", err)
	}
	outTopic := fmt.Sprintf("%s-pc-%d", in, time.Now().UnixNano())
	kafkatest.CreateTopic(b, brokers, 4, outTopic)
	cmd := exec.Command("java", "-Xmx1g", "-cp", strings.TrimSpace(string(out)), "wasmstream.peers.ParallelLookup",
		strings.Join(brokers, ","), in, outTopic, fmt.Sprintf("bench-pc-%d", time.Now().UnixNano()), fmt.Sprint(concurrency), base)
	logf, _ := os.Create(filepath.Join(b.TempDir(), "pc.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	first, last := consumeCount(b, brokers, outTopic, n, 5*time.Minute)
	cpu, rss = procStats(cmd.Process.Pid)
	return float64(n) / last.Sub(first).Seconds(), cpu, rss
}

// blockingLookup consumes in, looks each record's key up with a blocking GET
// and produces the answer, one record at a time; it returns the time from
// the first record to the last acknowledgement.
func blockingLookup(b *testing.B, brokers []string, in, out string, n int, base string) time.Duration {
	return passthroughMap(b, brokers, in, out, n, func(r *kgo.Record) []byte {
		resp, err := http.Get(base + string(r.Key))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return body
	})
}

// inputEven creates a topic of parts partitions holding n records spread
// round-robin, each with its own key, so that every partition task has the
// same share of the work.
func inputEven(b *testing.B, brokers []string, n int, parts int32) string {
	topic := fmt.Sprintf("bench-in-%d", time.Now().UnixNano())
	kafkatest.CreateTopic(b, brokers, parts, topic)
	cl := kafkatest.Client(b, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	recs := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i) % parts, Key: []byte(fmt.Sprint("u", i)), Value: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	return topic
}
