//go:build integration

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// restoreKeys is how many distinct keys BenchmarkStateRestore's changelog
// holds: BENCH_RESTORE_KEYS, else 100,000, or BENCH_RECORDS when that is
// smaller (the smoke run's 5,000).
func restoreKeys() int {
	if s := os.Getenv("BENCH_RESTORE_KEYS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return min(100000, records())
}

// BenchmarkStateRestore: how long a partition's new owner takes to restore
// its store from the changelog before it processes the partition's
// records, on the real broker. The changelog is the one the host itself
// writes: the count example runs over an input of BENCH_RESTORE_KEYS
// distinct keys (default 100,000; one record per key, 8 partitions), so the
// changelog holds one record per key, partitioned as the host partitions
// it. That drain is the reference measured in the same run (process_s).
// Then, each on the same changelog:
//
//   - full: a new host (another host.id, an empty state directory) takes
//     over the group's 8 partitions and restores every key; 64 records of
//     the input's keys produced meanwhile measure when processing resumes.
//     full_restore_s runs from the first partition's restore starting (the
//     assignment) to the last partition restored (they run one after the
//     other in the assignment callback); first_rec_s from the assignment
//     to the first record processed.
//   - clean: that host stopped (SIGTERM-like Runner.Stop) and started again
//     on the same directory: the stores reflect the changelog's end.
//   - kill: the wasmstream CLI as a process, a group of its own over the
//     same input: once it has counted every key, a steady load of the same
//     keys (BENCH_RESTORE_RATE records/s, default 20,000) for 5 s, the
//     process SIGKILLed in the middle of it and started again on the same
//     directory: it reads the changelog records written after the last
//     commit's store update (scheduler/internal/state applies them to the
//     store after each commit, every kafka.commit_interval).
//
// records_read are changelog records applied; restore_x_process is the full
// restore's time over the reference drain's.
func BenchmarkStateRestore(b *testing.B) {
	brokers := kafkatest.RealBrokers(b)
	keys := restoreKeys()
	count := filepath.Join(b.TempDir(), "count.wasm")
	os.WriteFile(count, wt.BuildGoGuest(b, "plugins/examples/count"), 0o644)
	bin := filepath.Join(b.TempDir(), "wasmstream")
	build := exec.Command("go", "build", "-o", bin, "./cmd/wasmstream")
	build.Dir = wt.RepoRoot(b)
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("building the wasmstream CLI: %v\n%s", err, out)
	}
	per100k := func(d time.Duration, n int64) float64 {
		if n == 0 {
			return 0
		}
		return d.Seconds() * 100000 / float64(n)
	}
	for i := 0; i < b.N; i++ {
		in := keyedInput(b, brokers, keys, keys)
		group := fmt.Sprintf("bench-restore-%d", time.Now().UnixNano())
		dirA, dirB := b.TempDir(), b.TempDir()
		state := func(dir string) string { return fmt.Sprintf("state: {enabled: true, dir: %q}", dir) }

		// The reference: host a counts every key once, writing the changelog.
		hostSets = []string{"kafka.group=" + group, "host.id=a"}
		r, process := drainHost(b, brokers, count, in, nil, keys, "ordering: partition", "guarantee: at_least_once", state(dirA))
		r.Stop(context.Background())

		// Full: host b, an empty directory; probes show when records run.
		probes := min(64, keys)
		cl := kafkatest.Client(b, brokers)
		for k := 0; k < probes; k++ {
			cl.Produce(context.Background(), keyedRecord(in, k), nil)
		}
		if err := cl.Flush(context.Background()); err != nil {
			b.Fatal(err)
		}
		hostSets = []string{"kafka.group=" + group, "host.id=b"}
		rl := newRestoreLog()
		hostLog = slog.New(rl)
		r, _ = startHost(b, brokers, count, in, "retry: {max_attempts: 1}", "ordering: partition", "guarantee: at_least_once", state(dirB))
		var first time.Time
		deadline := time.Now().Add(10 * time.Minute)
		for first.IsZero() || r.Snapshots()[0].Done < int64(probes) || len(rl.events()) < partitions {
			if time.Now().After(deadline) {
				b.Fatalf("full restore: %d partitions restored, %d probes done", len(rl.events()), r.Snapshots()[0].Done)
			}
			if first.IsZero() && r.Snapshots()[0].Done > 0 {
				first = time.Now()
			}
			time.Sleep(time.Millisecond)
		}
		full := summarize(rl.events())
		r.Stop(context.Background())

		// Clean: host b again on its directory.
		rl = newRestoreLog()
		hostLog = slog.New(rl)
		r, _ = startHost(b, brokers, count, in, "retry: {max_attempts: 1}", "ordering: partition", "guarantee: at_least_once", state(dirB))
		kafkatest.Eventually(b, 5*time.Minute, "the clean restart's restores", func() bool { return len(rl.events()) >= partitions })
		clean := summarize(rl.events())
		r.Stop(context.Background())
		hostSets, hostLog = nil, nil

		kill, atKill := killRestore(b, brokers, bin, count, in, keys)

		if full.records < int64(keys) {
			b.Fatalf("the full restore read %d changelog records, want ≥ %d", full.records, keys)
		}
		if clean.records != 0 {
			b.Errorf("the restart after a clean stop read %d changelog records, want 0", clean.records)
		}
		b.ReportMetric(process.Seconds(), "process_s")
		b.ReportMetric(float64(full.records), "full_records_read")
		b.ReportMetric(full.span.Seconds(), "full_restore_s")
		b.ReportMetric(per100k(full.span, full.records), "full_restore_s/100k_keys")
		b.ReportMetric(float64(full.records)/full.span.Seconds(), "full_restore_rec/s")
		b.ReportMetric(full.sum.Seconds(), "full_restore_sum_s")
		b.ReportMetric(full.maxTook.Seconds(), "full_max_partition_s")
		b.ReportMetric(first.Sub(full.start).Seconds(), "first_rec_s")
		b.ReportMetric(full.span.Seconds()/process.Seconds(), "restore_x_process")
		b.ReportMetric(float64(kill.records), "kill_records_read")
		b.ReportMetric(kill.span.Seconds(), "kill_restore_s")
		b.ReportMetric(float64(atKill), "kill_load_outputs")
		b.ReportMetric(float64(clean.records), "clean_records_read")
		b.ReportMetric(clean.span.Seconds(), "clean_restore_s")
		b.Logf("%d keys: drain %v; full restore %d records in %v (partitions: sum %v, max %v), first record %v after the assignment; clean restart %d records in %v; restart after SIGKILL (%d load outputs out) %d records in %v",
			keys, process.Round(time.Millisecond), full.records, full.span.Round(time.Millisecond), full.sum.Round(time.Millisecond), full.maxTook.Round(time.Millisecond),
			first.Sub(full.start).Round(time.Millisecond), clean.records, clean.span.Round(time.Millisecond), atKill, kill.records, kill.span.Round(time.Millisecond))
	}
}

// keyedRecord is keyedInput's record of key k, produced again.
func keyedRecord(topic string, k int) *kgo.Record {
	return &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "user-%05d", k), Value: []byte("clicked")}
}

// restoreEvent is one "state restored" log line: when it was logged, and
// its partition, records applied and duration.
type restoreEvent struct {
	at        time.Time
	partition int64
	records   int64
	took      time.Duration
}

// restoreSummary sums a host's restores at one assignment: start is the
// first restore's start (the log line's time less its duration), span from
// there to the last one logged.
type restoreSummary struct {
	start          time.Time
	span, sum      time.Duration
	maxTook        time.Duration
	records, parts int64
}

func summarize(ev []restoreEvent) restoreSummary {
	var s restoreSummary
	var end time.Time
	for _, e := range ev {
		if st := e.at.Add(-e.took); s.start.IsZero() || st.Before(s.start) {
			s.start = st
		}
		if e.at.After(end) {
			end = e.at
		}
		s.sum += e.took
		s.maxTook = max(s.maxTook, e.took)
		s.records += e.records
		s.parts++
	}
	s.span = end.Sub(s.start)
	return s
}

// restoreLog is a slog handler that notes the "state restored" lines and
// passes every record on to benchLogger's handler.
type restoreLog struct {
	next slog.Handler
	sink *restoreSink
}

type restoreSink struct {
	mu sync.Mutex
	ev []restoreEvent
}

func newRestoreLog() *restoreLog {
	return &restoreLog{next: benchLogger().Handler(), sink: &restoreSink{}}
}

func (h *restoreLog) events() []restoreEvent {
	h.sink.mu.Lock()
	defer h.sink.mu.Unlock()
	return append([]restoreEvent(nil), h.sink.ev...)
}

func (h *restoreLog) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *restoreLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "state restored" {
		e := restoreEvent{at: r.Time}
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "partition":
				e.partition = a.Value.Int64()
			case "records":
				e.records = a.Value.Int64()
			case "took":
				e.took = a.Value.Duration()
			}
			return true
		})
		h.sink.mu.Lock()
		h.sink.ev = append(h.sink.ev, e)
		h.sink.mu.Unlock()
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *restoreLog) WithAttrs(as []slog.Attr) slog.Handler {
	return &restoreLog{next: h.next.WithAttrs(as), sink: h.sink}
}

func (h *restoreLog) WithGroup(name string) slog.Handler {
	return &restoreLog{next: h.next.WithGroup(name), sink: h.sink}
}

// restoreLoad is how long killRestore's host runs under the steady load
// before the kill (1 s under 10,000 keys: the smoke run).
const restoreLoad = 5 * time.Second

// restoreRate is the steady load's records/s: BENCH_RESTORE_RATE, default
// 20,000 (well under what the host drains).
func restoreRate() int {
	if s := os.Getenv("BENCH_RESTORE_RATE"); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n >= 100 {
			return n
		}
	}
	return 20000
}

// killRestore runs the wasmstream CLI (a group of its own, the count
// example over in, a state directory) until every key of in has its
// output, then under a steady load of the same keys (restoreRate) for
// restoreLoad, SIGKILLs it there, starts it again on the same directory
// and returns the restart's restores and how many load outputs were out at
// the kill.
func killRestore(b *testing.B, brokers []string, bin, module, in string, keys int) (restoreSummary, int64) {
	id := time.Now().UnixNano()
	out := fmt.Sprintf("%s-kill-%d", in, id)
	cfg := filepath.Join(b.TempDir(), "wasmstream.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`kafka: {brokers: [%q], group: bench-restore-kill-%d, create_topics: true, topic_partitions: %d}
host: {id: k}
pipelines:
  - {name: p, module: %s, inputs: [%s], output: %s, dead_letter_topic: %s-dlq, retry: {max_attempts: 1}, ordering: partition, guarantee: at_least_once, state: {enabled: true, dir: %q}}
metrics: {listen: ""}
admin: {enabled: false}
log: {level: info, format: json}
`, strings.Join(brokers, ","), id, partitions, module, in, out, out, b.TempDir())), 0o644)
	type proc struct {
		cmd  *exec.Cmd
		done chan struct{}
	}
	start := func(log string) proc {
		cmd := exec.Command(bin, "run", "--config", cfg)
		f, err := os.Create(log)
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		p := proc{cmd, make(chan struct{})}
		go func() { cmd.Wait(); f.Close(); close(p.done) }()
		return p
	}
	adm := kadm.NewClient(kafkatest.Client(b, brokers))
	outputs := func() int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err := adm.ListEndOffsets(ctx, out)
		if err != nil {
			return 0
		}
		n := int64(0)
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n
	}
	logA, logB := filepath.Join(b.TempDir(), "a.log"), filepath.Join(b.TempDir(), "b.log")
	p := start(logA)
	var atKill int64
	kafkatest.Eventually(b, 10*time.Minute, "every key's output before the load", func() bool {
		return outputs() >= int64(keys)
	})
	// A steady load of the same keys, then the kill in the middle of it.
	rate := restoreRate()
	cl := kafkatest.Client(b, brokers, kgo.ProducerLinger(5*time.Millisecond))
	stop := make(chan struct{})
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for k := 0; ; {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			for j := 0; j < rate/100; j++ {
				cl.Produce(context.Background(), keyedRecord(in, k%keys), nil)
				k++
			}
		}
	}()
	load := restoreLoad
	if keys < 10000 {
		load = time.Second // the smoke run
	}
	time.Sleep(load)
	atKill = outputs() - int64(keys)
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	close(stop)
	<-loaded
	p = start(logB)
	defer func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(time.Minute):
			p.cmd.Process.Kill()
			<-p.done
		}
	}()
	var ev []restoreEvent
	kafkatest.Eventually(b, 5*time.Minute, "the restarted process's restores", func() bool {
		ev = jsonRestores(logB)
		return len(ev) >= partitions
	})
	return summarize(ev), atKill
}

// jsonRestores reads the "state restored" lines of a JSON log.
func jsonRestores(path string) []restoreEvent {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var ev []restoreEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l struct {
			Time      time.Time
			Msg       string
			Partition int64
			Records   int64
			Took      int64 // nanoseconds (slog's JSON handler)
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "state restored" {
			continue
		}
		ev = append(ev, restoreEvent{at: l.Time, partition: l.Partition, records: l.Records, took: time.Duration(l.Took)})
	}
	return ev
}

// BenchmarkStateRestoreStreams is BenchmarkStateRestore's full restore for
// Kafka Streams' groupByKey().count() (tests/peers StreamsCount, 2 stream
// threads, at_least_once, record cache off): it counts the same input of
// BENCH_RESTORE_KEYS distinct keys once (the reference, process_s: its
// first output to its last), stops (SIGINT: a clean close), and starts
// again with the same application id on an empty state directory, which
// restores the counts store from its changelog. The restores are read from
// the StateRestoreListener's lines: full_restore_s from the first
// partition's restore start to the last one's end.
func BenchmarkStateRestoreStreams(b *testing.B) {
	brokers := kafkatest.RealBrokers(b)
	keys := restoreKeys()
	if keys < 10000 {
		// The smoke run (BENCH_RECORDS=5000): two JVM starts and group
		// joins would take a minute to restore nothing worth measuring.
		b.Skip("under 10,000 keys (BENCH_RESTORE_KEYS, BENCH_RECORDS): the smoke run")
	}
	cp := streamsClasspath(b)
	for i := 0; i < b.N; i++ {
		in := keyedInput(b, brokers, keys, keys)
		out := fmt.Sprintf("%s-streams-count-%d", in, time.Now().UnixNano())
		kafkatest.CreateTopic(b, brokers, partitions, out)
		app := fmt.Sprintf("bench-streams-restore-%d", time.Now().UnixNano())
		run := func(tmp, log string) *exec.Cmd {
			cmd := exec.Command("java", "-Xmx1g", "-Djava.io.tmpdir="+tmp, "-cp", cp, "wasmstream.peers.StreamsCount", strings.Join(brokers, ","), in, out, app, "2", "at_least_once", "0")
			f, err := os.Create(log)
			if err != nil {
				b.Fatal(err)
			}
			cmd.Stdout, cmd.Stderr = f, f
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			return cmd
		}
		logA, logB := filepath.Join(b.TempDir(), "a.log"), filepath.Join(b.TempDir(), "b.log")
		cmd := run(b.TempDir(), logA)
		first, last := consumeCount(b, brokers, out, keys, 10*time.Minute)
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		process := last.Sub(first)
		cmd = run(b.TempDir(), logB)
		var ev []restoreEvent
		kafkatest.Eventually(b, 10*time.Minute, "Kafka Streams' restores", func() bool {
			ev = streamsRestores(logB)
			return len(ev) >= partitions
		})
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		full := summarize(ev)
		b.ReportMetric(process.Seconds(), "process_s")
		b.ReportMetric(float64(full.records), "full_records_read")
		b.ReportMetric(full.span.Seconds(), "full_restore_s")
		if full.records > 0 {
			b.ReportMetric(full.span.Seconds()*100000/float64(full.records), "full_restore_s/100k_keys")
		}
		b.ReportMetric(float64(full.records)/full.span.Seconds(), "full_restore_rec/s")
		b.ReportMetric(full.sum.Seconds(), "full_restore_sum_s")
		b.ReportMetric(full.maxTook.Seconds(), "full_max_partition_s")
		b.ReportMetric(full.span.Seconds()/process.Seconds(), "restore_x_process")
		b.Logf("%d keys: Kafka Streams drained them in %v; full restore %d records in %v (partitions: sum %v, max %v)",
			keys, process.Round(time.Millisecond), full.records, full.span.Round(time.Millisecond), full.sum.Round(time.Millisecond), full.maxTook.Round(time.Millisecond))
	}
}

// streamsRestores reads StreamsCount's "streams: restored" lines.
func streamsRestores(path string) []restoreEvent {
	data, _ := os.ReadFile(path)
	var ev []restoreEvent
	for _, l := range strings.Split(string(data), "\n") {
		var e restoreEvent
		var tookUs, atUs int64
		if n, _ := fmt.Sscanf(l, "streams: restored partition=%d records=%d took_us=%d at_us=%d", &e.partition, &e.records, &tookUs, &atUs); n != 4 {
			continue
		}
		e.took, e.at = time.Duration(tookUs)*time.Microsecond, time.UnixMicro(atUs)
		ev = append(ev, e)
	}
	return ev
}
