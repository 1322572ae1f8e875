//go:build integration

// Package bench measures wasmstream on the real broker beside a reference
// measured in the same run: plain franz-go consume→produce passthrough with
// at-least-once commits, no WebAssembly. Figures are reported as records/s
// and as a ratio to the reference ("x_ref").
//
//	bash tests/run.sh bench                 # full run (BENCH_RECORDS, default 300000)
//	BENCH_RECORDS=5000 go test -tags integration -run '^$' -bench . -benchtime 1x ./tests/bench/   # smoke
package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

const partitions = 8

func records() int {
	if s := os.Getenv("BENCH_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err == nil && n > 0 {
			return n
		}
	}
	return 300000
}

// smoke reports whether this is the test command's smoke run (BENCH_RECORDS
// under 25,000): it checks that every benchmark builds and runs, each on
// fewer rows (one of each kind: the reference, wasmstream, the peer), not
// speed. `make bench` runs every row.
func smoke() bool { return records() < 25000 }

// input creates an input topic holding n 100-byte records.
func input(b *testing.B, brokers []string, n int) string {
	return inputOn(b, brokers, n, partitions)
}

func inputOn(b *testing.B, brokers []string, n int, parts int32) string {
	topic := fmt.Sprintf("bench-in-%d", time.Now().UnixNano())
	kafkatest.CreateTopic(b, brokers, parts, topic)
	val := strings.Repeat("abcdefghij", 10)
	kafkatest.Produce(b, brokers, topic, n, func(int) string { return val })
	return topic
}

// passthrough is the reference: consume, produce each record to out, mark it
// for commit when the produce is acknowledged. It returns the time from the
// first fetched record to the last acknowledgement.
func passthrough(b *testing.B, brokers []string, in, out string, n int) time.Duration {
	return passthroughMap(b, brokers, in, out, n, nil)
}

// passthroughMap is passthrough with fn making each output value from its
// input record, in the poll loop (one goroutine, one record at a time).
func passthroughMap(b *testing.B, brokers []string, in, out string, n int, fn func(*kgo.Record) []byte) time.Duration {
	var read batchRecords
	defer func() { b.ReportMetric(float64(read.Load()-int64(n))/float64(n), "refetch/rec") }()
	opts := []kgo.Opt{kgo.WithHooks(&read),
		kgo.ConsumerGroup(fmt.Sprintf("bench-ref-%d", time.Now().UnixNano())),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(time.Second),
	}
	// franz-go's defaults, unless BENCH_REF_FETCH_PARTITION_BYTES sets the
	// most one fetch asks of a partition (to compare with wasmstream's own
	// default, kafka.fetch_max_partition_bytes).
	if s := os.Getenv("BENCH_REF_FETCH_PARTITION_BYTES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1024 {
			b.Fatalf("BENCH_REF_FETCH_PARTITION_BYTES %q: want a number of bytes, at least 1024", s)
		}
		opts = append(opts, kgo.FetchMaxPartitionBytes(int32(v)))
	}
	cl := kafkatest.Client(b, brokers, opts...)
	var acked atomic.Int64
	done := make(chan struct{})
	var start time.Time
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	fetched := 0
	for fetched < n {
		fs := cl.PollRecords(ctx, 10000)
		if ctx.Err() != nil {
			b.Fatal("reference timed out")
		}
		fs.EachRecord(func(r *kgo.Record) {
			if start.IsZero() {
				start = time.Now()
			}
			fetched++
			v := r.Value
			if fn != nil {
				v = fn(r)
			}
			cl.Produce(ctx, &kgo.Record{Topic: out, Key: r.Key, Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
				cl.MarkCommitRecords(r)
				if acked.Add(1) == int64(n) {
					close(done)
				}
			})
		})
	}
	<-done
	return time.Since(start)
}

// host runs one wasmstream pipeline over in and returns the time from its
// first fetched record to every record being done. extra holds pipeline keys
// in YAML flow style ("ordering: none, instances: {min: 2, max: 2}").
//
// Beside the rate it reports, as metrics of b, the CPU time and peak RSS of
// the drain (cpu_s, peak_rss_MiB: see usage) and the latency of a paced
// phase after it (p50_ms, p99_ms: see pacedLatency).
func host(b *testing.B, brokers []string, module, in string, n int, extra ...string) time.Duration {
	parts := topicPartitions(b, brokers, in)
	latIn := fmt.Sprintf("%s-lat-%d", in, time.Now().UnixNano())
	kafkatest.CreateTopic(b, brokers, parts, latIn)
	r, el := drainHost(b, brokers, module, in, []string{latIn}, n, extra...)
	defer r.Stop(context.Background())
	rate := float64(n) / el.Seconds()
	p50, p99 := pacedLatency(b, brokers, latIn, in+"-out", rate/2)
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99_ms")
	return el
}

// drainHost starts a host on in (and the more input topics) and measures
// it until n records of in are done: the drain's time, CPU and allocations
// per record, the fetch stall. The host is left running for the caller to
// stop.
func drainHost(b *testing.B, brokers []string, module, in string, more []string, n int, extra ...string) (*scheduler.Runner, time.Duration) {
	r, d := drainHostMeasured(b, brokers, module, in, more, n, extra...)
	return r, d.el
}

// drained is what drainHostMeasured measured of a drain: its time, and per
// record the CPU, allocations and bytes allocated it reported as metrics.
type drained struct {
	el                time.Duration
	cpuUs, allocs, by float64
}

// drainHostMeasured is drainHost returning the drain's figures, for a
// benchmark that compares its rows (BenchmarkSchemaPipeline).
func drainHostMeasured(b *testing.B, brokers []string, module, in string, more []string, n int, extra ...string) (*scheduler.Runner, drained) {
	if !strings.Contains(strings.Join(extra, ","), "retry:") {
		extra = append(extra, "retry: {max_attempts: 1}")
	}
	r, _ := startHostInputs(b, brokers, module, in, more, extra...)
	done := startUsage(b)
	var ms0 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	start := waitFetched(b, r)
	deadline := time.Now().Add(10 * time.Minute)
	peakTarget, peakLimit := 0, 0 // instances: auto, async.max_in_flight: auto
	var st starvation
	for s := r.Snapshots()[0]; s.Done < int64(n); s = r.Snapshots()[0] {
		if time.Now().After(deadline) {
			b.Fatalf("timed out: %+v", s)
		}
		peakTarget, peakLimit = max(peakTarget, s.TargetInstances), max(peakLimit, s.AsyncLimit)
		st.sample(s, n)
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	var ms1 runtime.MemStats
	runtime.ReadMemStats(&ms1)
	u := done()
	u.report(b)
	d := drained{el: el, cpuUs: float64(u.cpu.Microseconds()) / float64(n),
		allocs: float64(ms1.Mallocs-ms0.Mallocs) / float64(n), by: float64(ms1.TotalAlloc-ms0.TotalAlloc) / float64(n)}
	b.ReportMetric(d.cpuUs, "cpu_us/rec")
	if len(servicePids) > 0 {
		b.ReportMetric(float64(u.service.Microseconds())/float64(n), "service_cpu_us/rec")
	}
	b.ReportMetric(d.allocs, "allocs/rec")
	b.ReportMetric(d.by, "B/rec")
	st.report(b, r.Snapshots()[0], n)
	if s := r.Snapshots()[0]; s.PoolReason != "" {
		b.ReportMetric(float64(peakTarget), "peak_target")
		b.Logf("instances: auto: peak target %d over the tasks, %d at the end (%s)", peakTarget, s.TargetInstances, s.PoolReason)
	}
	if s := r.Snapshots()[0]; s.AsyncReason != "" {
		b.ReportMetric(float64(peakLimit), "peak_async_limit")
		b.Logf("async.max_in_flight: auto: peak %d, %d at the end (%s)", peakLimit, s.AsyncLimit, s.AsyncReason)
	}
	// Under exactly_once a record is done once released into the open
	// transaction; its output is counted when acknowledged, a moment later.
	for wait := time.Now().Add(30 * time.Second); r.Snapshots()[0].Outputs < int64(n) && time.Now().Before(wait); {
		time.Sleep(5 * time.Millisecond)
	}
	if s := r.Snapshots()[0]; s.Outputs != int64(n) || s.DeadLetter != 0 {
		r.Stop(context.Background())
		b.Fatalf("outputs %d, dead letters %d, want %d and 0", s.Outputs, s.DeadLetter, n)
	}
	return r, d
}

// starvation measures the fetch stall: the share of the drain during which
// the host had nothing to run — no record waiting to start, no instance
// busy — while the input still held records it had not fetched. Sampled
// every millisecond from the pipeline's snapshot.
type starvation struct{ samples, idle int }

func (s *starvation) sample(snap scheduler.Snapshot, n int) {
	if snap.Fetched+snap.Skipped >= int64(n) {
		return // everything fetched: the tail is not a stall
	}
	s.samples++
	if snap.Queued == 0 && snap.Busy == 0 {
		s.idle++
	}
}

// report adds idle_frac (starved share of the samples) and refetch (records
// the client decoded beyond the ones handed to tasks, per input record).
func (s *starvation) report(b *testing.B, snap scheduler.Snapshot, n int) {
	if s.samples > 0 {
		b.ReportMetric(float64(s.idle)/float64(s.samples), "idle_frac")
	}
	b.ReportMetric(float64(snap.Read-snap.Fetched-snap.Skipped)/float64(n), "refetch/rec")
	b.ReportMetric(float64(snap.Pauses), "pauses")
}

// batchRecords counts the records a client decodes from fetch responses:
// what it fetched, and what it read beyond (again, or before the offset it
// asked for).
type batchRecords struct{ atomic.Int64 }

func (c *batchRecords) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	c.Add(int64(m.NumRecords))
}

// topicPartitions is the number of partitions of topic.
func topicPartitions(b *testing.B, brokers []string, topic string) int32 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	td, err := kadm.NewClient(kafkatest.Client(b, brokers)).ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		b.Fatalf("partitions of %s: %v %v", topic, err, td[topic].Err)
	}
	return int32(len(td[topic].Partitions))
}

// usage is the CPU time and peak resident set of this process over a run.
// The benchmarks run wasmstream in process, so it is wasmstream's usage plus
// the harness's (a snapshot read every millisecond, a few MiB of heap):
// startUsage returns unused memory to the OS and resets the kernel's
// high-water mark (/proc/self/clear_refs) first.
type usage struct {
	cpu     time.Duration
	rss     int64
	service time.Duration // CPU of the services in servicePids
}

// servicePids are the processes serving the benchmark that runs (the lookup
// service of AsyncIO): startUsage measures their CPU apart from the host's.
var servicePids []int

func servicesCPU() time.Duration {
	var d time.Duration
	for _, pid := range servicePids {
		cpu, _ := procStats(pid)
		d += cpu
	}
	return d
}

func startUsage(b *testing.B) func() usage {
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("cannot reset the peak RSS (%v): peak_rss_MiB covers the whole benchmark process", err)
	}
	cpu0, svc0 := selfCPU(), servicesCPU()
	stopProfile := startProfile(b)
	return func() usage {
		stopProfile()
		_, rss := procStats(os.Getpid())
		return usage{cpu: selfCPU() - cpu0, rss: rss, service: servicesCPU() - svc0}
	}
}

// startProfile writes a CPU profile of the measured window alone (not the
// input's production or the latency probe) to $BENCH_CPUPROFILE, sampled at
// 1 kHz, and the allocation profile at its start and end beside it
// ($BENCH_CPUPROFILE.allocs0, .allocs1: pprof -base the first the second
// for the window's allocations); the returned func stops it. Without the
// variable it does nothing.
// With several measured windows in one run the last one's profile is kept.
func startProfile(b *testing.B) (stop func()) {
	path := os.Getenv("BENCH_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatalf("BENCH_CPUPROFILE: %v", err)
	}
	runtime.SetCPUProfileRate(1000)
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatalf("BENCH_CPUPROFILE: %v", err)
	}
	heap := func(suffix string) {
		if f, err := os.Create(path + suffix); err == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	heap(".allocs0")
	return func() { pprof.StopCPUProfile(); f.Close(); heap(".allocs1") }
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (u usage) report(b *testing.B) {
	b.ReportMetric(u.cpu.Seconds(), "cpu_s")
	b.ReportMetric(float64(u.rss)/(1<<20), "peak_rss_MiB")
}

// pacedLatency produces records into in at rate (between 50 and 2,000 per
// second: half the scenario's measured throughput, so the pipeline is not
// saturated) for 2 s, and returns their latency from being produced to
// their output being received by a consumer tailing out, matched by key.
// It measures any consumer-producer on the same terms: wasmstream as much as
// a peer (Kafka Streams keeps input timestamps on its outputs, so the
// outputs' own timestamps could not tell).
//
// readOpts are options of the tailing consumer (read_committed, for an
// exactly_once pipeline's outputs).
func pacedLatency(b *testing.B, brokers []string, in, out string, rate float64, readOpts ...kgo.Opt) (p50, p99 time.Duration) {
	rate = min(max(rate, 50), 2000)
	count := int(2 * rate)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(kafkatest.Client(b, brokers)).ListEndOffsets(ctx, out)
	if err != nil {
		b.Fatalf("end offsets of %s: %v", out, err)
	}
	from := map[string]map[int32]kgo.Offset{out: {}}
	ends.Each(func(o kadm.ListedOffset) { from[out][o.Partition] = kgo.NewOffset().At(o.Offset) })
	rd := kafkatest.Client(b, brokers, append([]kgo.Opt{kgo.ConsumePartitions(from), kgo.FetchMaxWait(100 * time.Millisecond)}, readOpts...)...)
	run := time.Now().UnixNano() // keys unique to this phase (outputs of other runs share the topic)
	keys := make([]string, count)
	for i := range keys {
		keys[i] = fmt.Sprintf("lat%d-%d", run, i)
	}
	sent := make([]time.Time, count)
	var mu sync.Mutex
	got := make(map[string]time.Time, count)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for ctx.Err() == nil {
			fs := rd.PollFetches(ctx)
			now := time.Now()
			mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				if _, dup := got[string(r.Key)]; !dup {
					got[string(r.Key)] = now
				}
			})
			n := len(got)
			mu.Unlock()
			if n >= count {
				return
			}
		}
	}()
	cl := kafkatest.Client(b, brokers, kgo.ProducerLinger(0))
	val := strings.Repeat("abcdefghij", 10)
	start := time.Now()
	for i := 0; i < count; i++ {
		if d := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); d > 0 {
			time.Sleep(d)
		}
		mu.Lock()
		sent[i] = time.Now()
		mu.Unlock()
		cl.Produce(ctx, &kgo.Record{Topic: in, Key: []byte(keys[i]), Value: []byte(val)}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	<-readDone
	mu.Lock()
	defer mu.Unlock()
	lat := make([]time.Duration, 0, count)
	for i, k := range keys {
		if t, ok := got[k]; ok {
			lat = append(lat, t.Sub(sent[i]))
		}
	}
	if len(lat) < count {
		b.Fatalf("paced phase: %d of %d outputs within the deadline", len(lat), count)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[len(lat)*99/100]
}

// uppercaseInput is the input of the uppercase benchmarks: records() records
// on the real broker, and the uppercase Go guest built.
func uppercaseInput(b *testing.B) (brokers []string, n int, in, uppercase string) {
	brokers = kafkatest.RealBrokers(b)
	n = records()
	in = input(b, brokers, n)
	uppercase = filepath.Join(b.TempDir(), "uppercase.wasm")
	os.WriteFile(uppercase, wt.BuildGoGuest(b, "plugins/examples/uppercase"), 0o644)
	return
}

// runReference runs the passthrough reference over in as a sub-benchmark
// and stores its rate in ref.
func runReference(b *testing.B, brokers []string, in string, n int, ref *float64) {
	kafkatest.CreateTopic(b, brokers, partitions, in+"-ref")
	runReferenceTo(b, brokers, in, n, ref)
}

// runReferenceTo is runReference on an output topic (in+"-ref") already
// created: a benchmark that runs the reference again (its rounds).
func runReferenceTo(b *testing.B, brokers []string, in string, n int, ref *float64) {
	b.Run("reference-franz-go-passthrough", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			done := startUsage(b)
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			*ref = float64(n) / passthrough(b, brokers, in, in+"-ref", n).Seconds()
			runtime.ReadMemStats(&ms1)
			u := done()
			u.report(b)
			b.ReportMetric(float64(u.cpu.Microseconds())/float64(n), "cpu_us/rec")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(n), "allocs/rec")
			b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/float64(n), "B/rec")
			b.ReportMetric(*ref, "rec/s")
			b.ReportMetric(1, "x_ref")
		}
	})
}

// BenchmarkThroughput: the reference and wasmstream with the uppercase Go,
// C and Rust guests (ordering partition, the default), in runs of records
// (batch_records' default) and one record per call, over the same input on
// the same broker, one after the other. Beside records/s each run reports CPU
// time and allocations per record (the whole process: client included) and
// the fetch stall (idle_frac, refetch/rec: see starvation).
func BenchmarkThroughput(b *testing.B) {
	brokers, n, in, uppercase := uppercaseInput(b)
	var ref float64
	runReference(b, brokers, in, n, &ref)
	cUpper := filepath.Join(b.TempDir(), "c-uppercase.wasm")
	os.WriteFile(cUpper, wt.BuildCGuest(b, "plugins/examples/c-uppercase/uppercase.c"), 0o644)
	rustUpper := filepath.Join(b.TempDir(), "rust-uppercase.wasm")
	os.WriteFile(rustUpper, wt.BuildRustGuest(b, "plugins/examples/rust-uppercase"), 0o644)
	for _, g := range []struct{ name, module, extra string }{
		{"go", uppercase, ""}, {"c", cUpper, ""}, {"rust", rustUpper, ""},
		// One record per call, as before runs (batch_records: 1).
		{"go-one-per-call", uppercase, "batch_records: 1"}, {"c-one-per-call", cUpper, "batch_records: 1"},
	} {
		b.Run("wasmstream-uppercase-"+g.name+"-guest", func(b *testing.B) {
			var extra []string
			if g.extra != "" {
				extra = append(extra, g.extra)
			}
			for i := 0; i < b.N; i++ {
				el := host(b, brokers, g.module, in, n, extra...)
				rate := float64(n) / el.Seconds()
				b.ReportMetric(rate, "rec/s")
				if ref > 0 {
					b.ReportMetric(rate/ref, "x_ref")
				}
			}
		})
	}
}

// BenchmarkCPUBound: a CPU-bound Go guest (hash: SHA-256 over the value, 100
// rounds per record) with ordering none and a fixed pool of 1, 2 or 4
// instances per partition task or instances: auto, on 1, 4 and 16
// partitions, beside the
// passthrough reference over the same input. The machine has 2 cores: past
// two busy instances host-wide, more instances cannot add throughput.
func BenchmarkCPUBound(b *testing.B) {
	brokers := kafkatest.RealBrokers(b)
	n := max(records()/15, 200)
	hash := filepath.Join(b.TempDir(), "hash.wasm")
	os.WriteFile(hash, wt.BuildGoGuest(b, "plugins/examples/hash"), 0o644)
	partsRows, instRows := []int32{1, 4, 16}, []string{"1", "2", "4", "auto"}
	if smoke() {
		partsRows, instRows = []int32{4}, []string{"1", "auto"}
	}
	for _, parts := range partsRows {
		in := inputOn(b, brokers, n, parts)
		kafkatest.CreateTopic(b, brokers, parts, in+"-ref")
		var ref, native float64
		b.Run(fmt.Sprintf("partitions=%d/reference-passthrough", parts), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				ref = float64(n) / passthrough(b, brokers, in, in+"-ref", n).Seconds()
				b.ReportMetric(ref, "rec/s")
			}
		})
		b.Run(fmt.Sprintf("partitions=%d/reference-native-go-hash", parts), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				native = float64(n) / passthroughMap(b, brokers, in, in+"-ref", n, nativeHash).Seconds()
				b.ReportMetric(native, "rec/s")
				b.ReportMetric(native/ref, "x_ref")
			}
		})
		for _, inst := range instRows {
			pool := fmt.Sprintf("instances: {min: %s, max: %s}", inst, inst)
			if inst == "auto" {
				pool = "instances: auto" // from 1, the host chooses
			}
			b.Run(fmt.Sprintf("partitions=%d/instances=%s", parts, inst), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					el := host(b, brokers, hash, in, n, "ordering: none", pool)
					rate := float64(n) / el.Seconds()
					b.ReportMetric(rate, "rec/s")
					b.ReportMetric(rate/ref, "x_ref")
					b.ReportMetric(rate/native, "x_native")
				}
			})
		}
	}
}

// nativeHash is the hash example's work done natively: SHA-256, 100 rounds.
func nativeHash(r *kgo.Record) []byte {
	v := r.Value
	sum := sha256.Sum256(v)
	for i := 1; i < 100; i++ {
		sum = sha256.Sum256(sum[:])
	}
	return []byte(hex.EncodeToString(sum[:]))
}

// BenchmarkRetries: healthy-record throughput and latency with 0%, 1% and 10%
// of records failing every attempt (the enrich guest's "retry" fault; 2
// attempts, 100 ms backoff, then the dead-letter topic), retrying through
// retry topics vs inline. Throughput: 5,000 records already in the topic, 4
// partitions, healthy records per second until the last healthy output.
// Latency: 2,000 records (BENCH_RECORDS/150) produced at ~500/s into a running host, healthy
// records' input-to-output p50/p99.
func BenchmarkRetries(b *testing.B) {
	brokers := kafkatest.RealBrokers(b)
	enrich := filepath.Join(b.TempDir(), "enrich.wasm")
	os.WriteFile(enrich, wt.BuildGoGuest(b, "plugins/examples/enrich"), 0o644)
	n := max(records()/60, 200)
	pcts := []int{0, 1, 10}
	if smoke() {
		pcts = []int{10}
	}
	for _, mode := range []string{"topics", "inline"} {
		for _, pct := range pcts {
			b.Run(fmt.Sprintf("mode=%s/failing=%d%%", mode, pct), func(b *testing.B) {
				value := func(i int) string {
					if pct > 0 && i%100 < pct {
						return fmt.Sprintf(`{"i":%d,"fault":"retry"}`, i)
					}
					return fmt.Sprintf(`{"i":%d}`, i)
				}
				healthy := 0
				for i := 0; i < n; i++ {
					if !strings.Contains(value(i), "fault") {
						healthy++
					}
				}
				for i := 0; i < b.N; i++ {
					in := fmt.Sprintf("bench-retry-%d", time.Now().UnixNano())
					kafkatest.CreateTopic(b, brokers, 4, in, in+"-out", in+"-dlq", in+".r.100ms")
					kafkatest.Produce(b, brokers, in, n, value)
					retry := fmt.Sprintf("retry: {mode: %s, max_attempts: 2, backoff: [100ms], topic_prefix: %s.r}", mode, in)
					r, cfg := startHost(b, brokers, enrich, in, retry, "instances: {min: 1, max: 1}")
					done := startUsage(b)
					start := waitFetched(b, r)
					waitOutputs(b, r, healthy, 10*time.Minute)
					rate := float64(healthy) / time.Since(start).Seconds()
					done().report(b)
					// Latency: the same host, records arriving at a steady rate.
					p50, p99 := steadyLatency(b, brokers, in, r, max(records()/150, 100), value)
					r.Stop(context.Background())
					_ = cfg
					b.ReportMetric(rate, "healthy_rec/s")
					b.ReportMetric(float64(p50.Microseconds())/1000, "p50_ms")
					b.ReportMetric(float64(p99.Microseconds())/1000, "p99_ms")
				}
			})
		}
	}
}

// hostSets are extra --set overrides for the hosts startHost starts;
// BENCH_SETS adds more, separated by ";" (e.g. to trace a run:
// BENCH_SETS="tracing.exporter=jsonl;tracing.sample_ratio=1;tracing.file=/tmp/t.jsonl").
var hostSets []string

func startHost(b *testing.B, brokers []string, module, in string, extra ...string) (*scheduler.Runner, *config.Config) {
	return startHostInputs(b, brokers, module, in, nil, extra...)
}

// startHostInputs is startHost with more input topics beside in (whose name
// still makes the output and dead-letter topics' names).
func startHostInputs(b *testing.B, brokers []string, module, in string, more []string, extra ...string) (*scheduler.Runner, *config.Config) {
	y := fmt.Sprintf(`kafka: {brokers: [%q], group: bench-ws-%d}
pipelines:
  - {name: p, module: %s, inputs: [%s], output: %s-out, dead_letter_topic: %s-dlq, %s}
`, strings.Join(brokers, ","), time.Now().UnixNano(), module, strings.Join(append([]string{in}, more...), ", "), in, in, strings.Join(extra, ", "))
	p := filepath.Join(b.TempDir(), "c.yaml")
	os.WriteFile(p, []byte(y), 0o644)
	sets := []string{"kafka.create_topics=true", fmt.Sprintf("kafka.topic_partitions=%d", partitions), "host.max_instances=256"}
	sets = append(sets, hostSets...)
	if env := os.Getenv("BENCH_SETS"); env != "" {
		sets = append(sets, strings.Split(env, ";")...)
	}
	cfg, err := config.Load(p, nil, sets)
	if err != nil {
		b.Fatal(err)
	}
	log := hostLog
	if log == nil {
		log = benchLogger()
	}
	r, err := scheduler.NewRunner(context.Background(), cfg, log)
	if err != nil {
		b.Fatal(err)
	}
	if hostHook != nil {
		hostHook(r)
	}
	r.Start()
	return r, cfg
}

// hostLog, when set, is the logger of the runners startHost starts
// (benchLogger otherwise).
var hostLog *slog.Logger

// hostHook, when set, is called with each runner before it starts.
var hostHook func(*scheduler.Runner)

func waitFetched(b *testing.B, r *scheduler.Runner) time.Time {
	deadline := time.Now().Add(2 * time.Minute)
	for r.Snapshots()[0].Fetched == 0 {
		if time.Now().After(deadline) {
			b.Fatal("nothing fetched")
		}
		time.Sleep(time.Millisecond)
	}
	return time.Now()
}

// waitOutputs waits until the pipeline and its retry workers acknowledged n
// outputs.
func waitOutputs(b *testing.B, r *scheduler.Runner, n int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		total := int64(0)
		for _, s := range r.Snapshots() {
			total += s.Outputs
		}
		if total >= int64(n) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("timed out at %d of %d outputs", total, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// steadyLatency produces count records at ~500/s into in (offsets after what
// is there) and returns healthy records' input-to-output latency.
func steadyLatency(b *testing.B, brokers []string, in string, r *scheduler.Runner, count int, value func(int) string) (p50, p99 time.Duration) {
	cl := kafkatest.Client(b, brokers, kgo.ProducerLinger(0))
	sent := map[string]time.Time{}
	base := 1_000_000
	healthy := 0
	before := int64(0)
	for _, s := range r.Snapshots() {
		before += s.Outputs
	}
	for i := 0; i < count; i++ {
		v := strings.Replace(value(i), `{"i":`, fmt.Sprintf(`{"i":%d,"j":`, base+i), 1)
		rec := &kgo.Record{Topic: in, Key: []byte(strconv.Itoa(i)), Value: []byte(v), Timestamp: time.Now()}
		sent[strconv.Itoa(base+i)] = rec.Timestamp.Truncate(time.Millisecond) // Kafka timestamps are milliseconds
		if !strings.Contains(v, "fault") {
			healthy++
		}
		cl.Produce(context.Background(), rec, nil)
		time.Sleep(2 * time.Millisecond)
	}
	cl.Flush(context.Background())
	rd := kafkatest.NewReader(b, brokers, in+"-out")
	var lat []time.Duration
	rd.ReadUntil(b, 10*time.Minute, "healthy steady-rate outputs", func(rs []*kgo.Record) bool {
		lat = lat[:0]
		for _, rec := range rs {
			var doc struct{ I int }
			json.Unmarshal(rec.Value, &doc)
			if t, ok := sent[strconv.Itoa(doc.I)]; ok {
				lat = append(lat, rec.Timestamp.Sub(t))
			}
		}
		return len(lat) >= healthy
	})
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat[len(lat)/2], lat[len(lat)*99/100]
}

// benchLogger is the hosts' logger: discarded, unless BENCH_LOG=1 writes
// it to standard error (with BENCH_SETS="log.level=debug" for more).
func benchLogger() *slog.Logger {
	if os.Getenv("BENCH_LOG") == "1" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
