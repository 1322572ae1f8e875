//go:build integration

package bench

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/internal/windowmodel"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// The windowed count's input (issue 58 §5): 1-minute tumbling windows with
// a grace of 10 s; event time advancing 2 ms a record (400,000 records are
// 800 s, 14 windows); 1% of the records out of order within grace, 0.1%
// late beyond it.
const (
	winSize  = 60_000
	winGrace = 10_000
	winStep  = 2
)

// windowRecords is BENCH_RECORDS when set, else 400,000.
func windowRecords() int {
	if os.Getenv("BENCH_RECORDS") == "" {
		return 400000
	}
	return records()
}

// windowedInput is a windowed count's input and what the reference model
// (internal/windowmodel) says it makes.
//
// The input grows: each run's close-to-visible phase (closeLatency)
// appends its records, which the runs after it read in their drain, so
// byPart keeps every record produced and n, finals and late are the
// model's over all of them.
type windowedInput struct {
	topic  string
	keys   int
	n      int // records, the closing ones included
	finals int // final windows
	late   int // records no window took
	byPart [][]windowmodel.Record
	// clock is every partition's stream time once its records are
	// decided: the closing ramps' end, then each phase's closing records'.
	clock int64
}

// model sets n, finals and late from the reference model over byPart.
func (in *windowedInput) model() {
	in.n, in.finals, in.late = 0, 0, 0
	for _, recs := range in.byPart {
		r := windowmodel.Tumbling(recs, winSize, winGrace)
		in.n += len(recs)
		in.finals += len(r.Final)
		in.late += r.Late
	}
}

// makeWindowedInput produces n records over keys keys, each to its key's
// partition by Kafka's default partitioner (wasmstream's state keys must
// be their record's partition's), and after them, on each partition, a
// ramp of records a second apart up to the last timestamp + size + grace,
// which closes every window of the data. A
// ramp, not one record that far ahead: Kafka Streams' window store with its
// default retention loses the windows a jump of stream time closes
// (windowmodel's package comment), and this benchmark runs it with its
// defaults.
func makeWindowedInput(b *testing.B, brokers []string, n, keys int) windowedInput {
	in := windowedInput{topic: fmt.Sprintf("bench-windowed-%d", time.Now().UnixNano()), keys: keys}
	kafkatest.CreateTopic(b, brokers, partitions, in.topic)
	cl := kafkatest.Client(b, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(58, 5))
	byPart := make([][]windowmodel.Record, partitions)
	batch := make([]*kgo.Record, 0, 1000)
	add := func(p int, key string, ts int64) {
		byPart[p] = append(byPart[p], windowmodel.Record{Key: key, TS: ts})
		batch = append(batch, &kgo.Record{Topic: in.topic, Partition: int32(p), Key: []byte(key), Value: []byte("clicked"), Timestamp: time.UnixMilli(ts)})
		if len(batch) == cap(batch) {
			if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	// The input's time starts on a minute's boundary and ends an hour
	// ago: timestamps of 1970 would be older than the broker's log
	// retention, which deletes their segments at its next check.
	epoch := (time.Now().Add(-time.Hour).UnixMilli() - int64(n)*winStep) / winSize * winSize
	last := epoch
	for i := 0; i < n; i++ {
		ts := epoch + int64(i)*winStep
		switch x := rng.IntN(1000); {
		case x < 10: // out of order, within grace
			ts -= 1 + rng.Int64N(winGrace/2)
		case x == 10: // late: every window of ts closed
			ts -= winSize + winGrace + 100 + rng.Int64N(winSize)
		}
		last = max(last, ts)
		key := fmt.Sprintf("user-%05d", i%keys)
		add(keyPartition(key), key, ts)
	}
	for j := 0; !closed(byPart, last); j++ { // a closing key on each partition
		key := fmt.Sprintf("close-%d", j)
		p := keyPartition(key)
		if recs := byPart[p]; len(recs) > 0 && recs[len(recs)-1].TS > last {
			continue // this partition has its ramp
		}
		for ts := last + 1000; ts <= last+winSize+winGrace+1000; ts += 1000 {
			add(p, key, ts)
		}
	}
	if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
		b.Fatal(err)
	}
	in.byPart = byPart
	for _, recs := range byPart {
		in.clock = max(in.clock, recs[len(recs)-1].TS) // each ramp's end, the same on every partition
	}
	in.model()
	return in
}

// closed tells whether every partition has its closing ramp (a record past
// last).
func closed(byPart [][]windowmodel.Record, last int64) bool {
	for _, recs := range byPart {
		if len(recs) == 0 || recs[len(recs)-1].TS <= last {
			return false
		}
	}
	return true
}

// BenchmarkWindowedCount: a windowed count per key, one final result per
// 1-minute tumbling window (emit on close), over the same input on the
// same broker: wasmstream's plugins/examples/window-count (the Go SDK's
// tumbling windows over the host's event-time timers, state in bbolt per
// partition and its changelog; ordering partition), the same count in C
// over the raw ABI (plugins/examples/c-window: the guest's own cost
// small beside the host's) and Kafka Streams'
// groupByKey().windowedBy(TimeWindows.
// ofSizeAndGrace(1 min, 10 s)).emitStrategy(onWindowClose()).count()
// (tests/peers StreamsWindowedCount: 2 stream threads, record cache off,
// commits every 100 ms, final results emitted on every record, its store's
// default retention), under at_least_once and exactly_once_v2.
// BENCH_RECORDS records (default 400,000) over 10,000 keys, 8 partitions.
//
// After the drain, a close-to-visible phase (closeLatency): 1,000 records
// a second for 3 s (1 s in the smoke run) filling a new window, then one
// closing record per partition at that window's end + grace, produced at
// a known time; its records stay in the input, so each run drains the
// phases of the runs before it too (the model counts them).
//
//	BENCH_RECORDS=5000 go test -tags integration -run '^$' -bench BenchmarkWindowedCount -benchtime 1x ./tests/bench/
//
// (the smoke run, in the test command: the harness, not speed; without
// BENCH_RECORDS the 400,000 records of BENCHMARKS.md, in `make bench`).
// The columns:
//   - rec/s: for both, the input committed per second between the first
//     commit seen and the last (the group's offsets, polled every 50 ms);
//   - cpu_s: this process's CPU over that drain for wasmstream, the JVM's
//     whole life up to the drain's end (start included) for Kafka Streams;
//     cpu_us/rec: cpu_s per record of the drain;
//   - peak_rss_MiB: this process's peak resident set from the drain's
//     start (the benchmark's own heap included), the JVM's whole life's;
//   - store_bytes: the state directory at the end; changelog_bytes: the
//     store's changelog on the broker;
//   - final_windows: the model's (internal/windowmodel) final windows of
//     the drain (a few more each run: it drains the phases before it);
//   - p50_ms, p99_ms: close-to-visible latency over closed_windows, the
//     windows the phase's closing records closed: from a window's
//     partition's closing record being produced to its final result being
//     read read_committed from the output (a consumer tailing it, fetches
//     of at most 100 ms).
//
// A run fails unless every final window the model makes is there:
// acknowledged outputs for wasmstream, read read_committed for Kafka
// Streams (whose late count must be the model's too), and each window the
// phase closes read with the model's count.
func BenchmarkWindowedCount(b *testing.B) {
	brokers := kafkatest.RealBrokers(b)
	input := makeWindowedInput(b, brokers, windowRecords(), stateKeys)
	in := &input
	b.Logf("%d records, %d final windows, %d late (the model's)", in.n, in.finals, in.late)
	module := filepath.Join(b.TempDir(), "window-count.wasm")
	os.WriteFile(module, wt.BuildGoGuest(b, "plugins/examples/window-count"), 0o644)
	cModule := filepath.Join(b.TempDir(), "c-window.wasm")
	os.WriteFile(cModule, wt.BuildCGuest(b, "plugins/examples/c-window/window.c"), 0o644)
	for _, g := range []struct{ ws, streams string }{{"at_least_once", "at_least_once"}, {"exactly_once", "exactly_once_v2"}} {
		b.Run("wasmstream-window-count/"+g.ws, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				wasmstreamWindowedCount(b, brokers, module, in, g.ws)
			}
		})
		b.Run("wasmstream-c-window/"+g.ws, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				wasmstreamWindowedCount(b, brokers, cModule, in, g.ws)
			}
		})
		if smoke() && g.ws == "exactly_once" {
			continue // the smoke run checks the harness: Kafka Streams once
		}
		b.Run("kafka-streams-windowed-count-2-threads/"+g.ws, func(b *testing.B) {
			cp := streamsClasspath(b)
			for i := 0; i < b.N; i++ {
				streamsWindowedCount(b, brokers, cp, in, g.streams)
			}
		})
	}
}

// wasmstreamWindowedCount runs plugins/examples/window-count (the Go SDK's
// tumbling windows over the host's timers) in this process until its group
// has committed the whole input and every final window is acknowledged.
func wasmstreamWindowedCount(b *testing.B, brokers []string, module string, in *windowedInput, guarantee string) {
	// Offsets committed every 100 ms, as the Kafka Streams peer's: the
	// rate is measured on the commits.
	defer func(sets []string) { hostSets = sets }(hostSets)
	hostSets = append(slices.Clone(hostSets), "kafka.commit_interval=100ms")
	dir := b.TempDir()
	r, cfg := startHostInputs(b, brokers, module, in.topic, nil, "ordering: partition", "guarantee: "+guarantee,
		"retry: {max_attempts: 1}", fmt.Sprintf("state: {enabled: true, dir: %q}", dir),
		fmt.Sprintf("env: {WINDOW_SIZE: %dms, WINDOW_GRACE: %dms}", winSize, winGrace))
	defer r.Stop(context.Background())
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	done := startUsage(b)
	rate := committedRate(b, brokers, cfg.GroupID(&cfg.Pipelines[0]), in.topic, in.n, 10*time.Minute)
	u := done()
	runtime.ReadMemStats(&ms1)
	s0 := r.Snapshots()[0] // the drain's runs of records (the host's Runs, RunRecords)
	waitOutputs(b, r, in.finals, 5*time.Minute)
	if s := r.Snapshots()[0]; s.Outputs != int64(in.finals) || s.DeadLetter != 0 {
		b.Fatalf("outputs %d, dead letters %d; want the model's %d final windows and none", s.Outputs, s.DeadLetter, in.finals)
	}
	n, finals := in.n, in.finals
	p50, p99, closed := closeLatency(b, brokers, in, in.topic+"-out")
	waitOutputs(b, r, in.finals, 2*time.Minute)
	if s := r.Snapshots()[0]; s.Outputs != int64(in.finals) || s.DeadLetter != 0 {
		b.Fatalf("after the close-to-visible phase: outputs %d, dead letters %d; want the model's %d final windows and none", s.Outputs, s.DeadLetter, in.finals)
	}
	u.report(b)
	b.ReportMetric(rate, "rec/s")
	b.ReportMetric(float64(u.cpu.Microseconds())/float64(n), "cpu_us/rec")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(n), "allocs/rec")
	// Records a call: the records of calls that ran several, over those
	// calls, and the share of the input they carried.
	b.ReportMetric(float64(s0.RunRecords)/float64(max(s0.Runs, 1)), "records/run")
	b.ReportMetric(float64(s0.RunRecords)/float64(n), "in_runs")
	b.ReportMetric(float64(dirBytes(dir)), "store_bytes")
	b.ReportMetric(float64(topicBytes(b, brokers, cfg.Pipelines[0].State.Changelog)), "changelog_bytes")
	b.ReportMetric(float64(finals), "final_windows")
	reportClose(b, p50, p99, closed)
}

// reportClose reports the close-to-visible phase's figures.
func reportClose(b *testing.B, p50, p99 time.Duration, closed int) {
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(closed), "closed_windows")
}

func streamsWindowedCount(b *testing.B, brokers []string, cp string, in *windowedInput, guarantee string) {
	out := fmt.Sprintf("%s-streams-%d", in.topic, time.Now().UnixNano())
	kafkatest.CreateTopic(b, brokers, partitions, out)
	app := fmt.Sprintf("bench-streams-windowed-%d", time.Now().UnixNano())
	tmp := b.TempDir()
	logPath := filepath.Join(tmp, "streams.log")
	logf, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("java", "-Xmx1g", "-Djava.io.tmpdir="+tmp, "-cp", cp, "wasmstream.peers.StreamsWindowedCount",
		strings.Join(brokers, ","), in.topic, out, app, "tumbling",
		strconv.Itoa(winSize), strconv.Itoa(winSize), strconv.Itoa(winGrace), guarantee, "0", "2")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Process.Kill() // a no-op once it has exited
	rate := committedRate(b, brokers, app, in.topic, in.n, 10*time.Minute)
	consumeCount(b, brokers, out, in.finals, 5*time.Minute, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	cpu, _ := procStats(cmd.Process.Pid) // the drain's, before the close-to-visible phase
	n, finals := in.n, in.finals
	p50, p99, closed := closeLatency(b, brokers, in, out)
	_, rss := procStats(cmd.Process.Pid)
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	if d := streamsDropped(logPath); d != in.late {
		b.Errorf("Kafka Streams dropped %d records, the model %d", d, in.late)
	}
	b.ReportMetric(rate, "rec/s")
	b.ReportMetric(cpu.Seconds(), "cpu_s")
	b.ReportMetric(cpu.Seconds()*1e6/float64(n), "cpu_us/rec")
	b.ReportMetric(float64(rss)/(1<<20), "peak_rss_MiB")
	b.ReportMetric(float64(dirBytes(filepath.Join(tmp, "wasmstream-streams-"+app))), "store_bytes")
	b.ReportMetric(float64(topicBytes(b, brokers, app+"-counts-changelog")), "changelog_bytes")
	b.ReportMetric(float64(finals), "final_windows")
	reportClose(b, p50, p99, closed)
}

// committedRate polls group's committed offsets of topic every 50 ms until
// they cover n records, and returns the records committed per second from
// the first commit seen to the last.
func committedRate(b *testing.B, brokers []string, group, topic string, n int, timeout time.Duration) float64 {
	adm := kadm.NewClient(kafkatest.Client(b, brokers))
	deadline := time.Now().Add(timeout)
	var first time.Time
	var base int64
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		offs, err := adm.FetchOffsets(ctx, group)
		cancel()
		var sum int64
		if err == nil {
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Topic == topic && o.Err == nil && o.At > 0 {
					sum += o.At
				}
			})
		}
		now := time.Now()
		if sum > 0 && first.IsZero() {
			first, base = now, sum
		}
		if sum >= int64(n) {
			if sum == base {
				return 0 // committed in one go: no rate to measure
			}
			return float64(sum-base) / now.Sub(first).Seconds()
		}
		if now.After(deadline) {
			b.Fatalf("%s: %d of %d records committed within %v", group, sum, n, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var streamsDroppedLine = regexp.MustCompile(`^streams: dropped task=\S+ total=(\d+)$`)

// streamsDropped sums StreamsWindowedCount's "streams: dropped" lines.
func streamsDropped(logPath string) int {
	f, err := os.Open(logPath)
	if err != nil {
		return -1
	}
	defer f.Close()
	total := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := streamsDroppedLine.FindStringSubmatch(sc.Text()); m != nil {
			n, _ := strconv.Atoi(m[1])
			total += n
		}
	}
	return total
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) (n int64) {
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// topicBytes is topic's size on the brokers' log directories.
func topicBytes(b *testing.B, brokers []string, topic string) (n int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dirs, err := kadm.NewClient(kafkatest.Client(b, brokers)).DescribeAllLogDirs(ctx, nil) // nil: every topic (a set names partitions)
	if err != nil {
		b.Logf("log dirs of %s: %v", topic, err)
		return -1
	}
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == topic {
				n += p.Size
			}
		})
	})
	return n
}
