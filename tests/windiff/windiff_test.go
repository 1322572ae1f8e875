//go:build integration

// Package windiff is the differential test of windowed counts against Kafka
// Streams 4.4 (issue 58 §4): the same seeded input on the real broker
// (KAFKA_BROKERS) through Kafka Streams' windowed count with
// EmitStrategy.onWindowClose() (tests/peers StreamsWindowedCount) and
// through internal/windowmodel, partition by partition; the sets of final
// (key, window start, window end, count) must be equal and the late counts
// must agree, for tumbling, hopping and session windows. A wasmstream
// pipeline is the third party (exactly_once, the Go SDK's windows over the
// host's event-time timers): plugins/examples/window-count, its
// WINDOW_KIND the test's kind, sending its late records to a late topic. Its final windows must be the
// model's too, and its late records the model's late ones.
//
//	KAFKA_BROKERS=... go test -tags integration -run TestStreamsWindowsEqualModel ./tests/windiff/
//
// (WINDIFF_SEED=n replays a run's input; the test logs its seed.)
package windiff

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/internal/windowmodel"
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

const (
	partitions = 4
	// keysPerPartition keys live on each partition (the test places every
	// record itself: a key's records are on one partition, as a keyed
	// producer's are).
	keysPerPartition = 4
	recordsPerPart   = 400
	// dataEnd bounds the data's timestamps; each partition's last record,
	// at closeAt, closes every window of the data (both from epoch). Both
	// stay in the first minute: Kafka Streams' session store (retention gap + grace + 1)
	// keeps its sessions in 60 s segments and drops a segment once its
	// own stream time passes the segment's end + retention, before the
	// record that moved it emits what it closed; a last record past
	// 60 s + retention would lose every session ending in the first
	// segment (windowmodel's package comment).
	dataEnd = 50_000
	closeAt = 59_000
	// timeRetention is the time windows' store retention given to Kafka
	// Streams: longer than the input's span, so that the jump to closeAt
	// does not drop windows from its store before it emits them (with the
	// default, size + grace, it does).
	timeRetention = 3_600_000
)

// epoch is where the input's time starts (input makes timestamps from 0
// and adds it): an hour ago on a minute's boundary, so that every window
// boundary and store segment falls where it does from 0. Timestamps of
// 1970 would be older than the broker's log retention (7 days by default),
// which deletes their segments at its next check, possibly before Kafka
// Streams reads them.
var epoch = time.Now().Add(-time.Hour).UnixMilli() / 60_000 * 60_000

// kind is one window definition, run through both.
type kind struct {
	name                string
	size, advance, gap  int64
	grace               int64
	guarantee           string // Kafka Streams' processing.guarantee
	model               func([]windowmodel.Record) windowmodel.Result
	retention           int64 // the peer's store retention (0: Streams' default)
	boundary            func(after int64) int64
	lateForStreamsCount func(windowmodel.Result) int
	// guestEnv is the environment of plugins/examples/window-count (a
	// YAML flow mapping's entries) that computes these windows in a
	// wasmstream pipeline, the third party to the comparison; it sends its
	// late records to the topic WINDOW_LATE_TOPIC names, where the test
	// counts them.
	guestEnv string
}

// windowGuest is the processor of every kind: the example, its windows
// chosen by its environment.
const windowGuest = "plugins/examples/window-count"

func kinds() []kind {
	const (
		tSize, tGrace           = 1000, 300
		hSize, hAdvance, hGrace = 1000, 300, 200
		sGap, sGrace            = 400, 200
		// The session store's lookup finds sessions ending at or after
		// its stream time - retention + 1: gap + grace + 1 makes that the
		// processor's close time (windowmodel's package comment).
		sessionLookupRetention = sGap + sGrace + 1
	)
	next := func(step int64) func(int64) int64 {
		return func(after int64) int64 { return (after/step + 1) * step }
	}
	return []kind{
		{
			name: "tumbling", size: tSize, advance: tSize, grace: tGrace, guarantee: "exactly_once_v2",
			model:     func(r []windowmodel.Record) windowmodel.Result { return windowmodel.Tumbling(r, tSize, tGrace) },
			retention: timeRetention, boundary: next(tSize),
			lateForStreamsCount: func(r windowmodel.Result) int { return r.Dropped },
			guestEnv:            "WINDOW_SIZE: 1s, WINDOW_GRACE: 300ms",
		},
		{
			name: "hopping", size: hSize, advance: hAdvance, grace: hGrace, guarantee: "at_least_once",
			model: func(r []windowmodel.Record) windowmodel.Result {
				return windowmodel.Hopping(r, hSize, hAdvance, hGrace)
			},
			retention: timeRetention, boundary: next(hAdvance),
			// Kafka Streams counts a (record, window) pair refused.
			lateForStreamsCount: func(r windowmodel.Result) int { return r.Dropped },
			guestEnv:            "WINDOW_KIND: hopping, WINDOW_SIZE: 1000ms, WINDOW_ADVANCE: 300ms, WINDOW_GRACE: 200ms",
		},
		{
			name: "session", gap: sGap, grace: sGrace, guarantee: "at_least_once",
			model:     func(r []windowmodel.Record) windowmodel.Result { return windowmodel.Sessions(r, sGap, sGrace) },
			retention: sessionLookupRetention, boundary: next(sGap),
			// Kafka Streams counts a record refused.
			lateForStreamsCount: func(r windowmodel.Result) int { return r.Late },
			guestEnv:            "WINDOW_KIND: session, WINDOW_SIZE: 400ms, WINDOW_GRACE: 200ms",
		},
	}
}

// TestStreamsWindowsEqualModel: for each kind, the seeded input through
// Kafka Streams gives, partition by partition, the model's final windows
// (no more, no fewer, no duplicates) and its late count; and so does a
// wasmstream pipeline running plugins/examples/window-count (the Go SDK's
// windows over the host's timers, exactly_once).
func TestStreamsWindowsEqualModel(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	cp := streamsClasspath(t)
	for _, k := range kinds() {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel() // each owns its topics and its Kafka Streams; nothing is timed
			seed := uint64(time.Now().UnixNano())
			if s := os.Getenv("WINDIFF_SEED"); s != "" {
				seed, _ = strconv.ParseUint(s, 10, 64)
			}
			t.Logf("seed %d (WINDIFF_SEED=%d reproduces it)", seed, seed)
			in := input(rand.New(rand.NewPCG(seed, 58)), k)
			want := make([]windowmodel.Result, partitions)
			for p := range in {
				want[p] = k.model(in[p])
				checkInputCovers(t, k, in[p], want[p])
			}
			name := fmt.Sprintf("windiff-%s-%d", k.name, time.Now().UnixNano())
			kafkatest.DeleteNamedAtEnd(t, brokers, name) // the internal topics too
			inTopic := name + "-in"
			kafkatest.CreateTopic(t, brokers, partitions, inTopic)
			partOf := produce(t, brokers, inTopic, in)
			got, late := runWasmstream(t, brokers, k, name, in, partOf)
			for p := range in {
				t.Logf("partition %d: %d final windows (model), %d (wasmstream); late %d (model), %d in wasmstream's late topic (%s)",
					p, len(want[p].Final), len(got[p]), want[p].Late, late[p], windowGuest)
				if diff := windowsDiff(want[p].Final, got[p]); diff != "" {
					t.Errorf("partition %d: wasmstream's final windows differ from the model's (%d records, stream time %d, the input's from %d):\n%s",
						p, len(in[p]), want[p].StreamTime, epoch, diff)
				}
				if late[p] != want[p].Late {
					t.Errorf("partition %d: wasmstream sent %d records to its late topic, the model has %d late", p, late[p], want[p].Late)
				}
			}
			got, dropped := runStreams(t, brokers, cp, k, name, in, partOf)
			for p := range in {
				t.Logf("partition %d: %d records, %d final windows (model), %d (Kafka Streams); late %d, refused pairs %d, Streams dropped %d",
					p, len(in[p]), len(want[p].Final), len(got[p]), want[p].Late, want[p].Dropped, dropped[p])
				if diff := windowsDiff(want[p].Final, got[p]); diff != "" {
					t.Errorf("partition %d: Kafka Streams' final windows differ from the model's (%d records, stream time %d, the input's from %d):\n%s",
						p, len(in[p]), want[p].StreamTime, epoch, diff)
				}
				if w := k.lateForStreamsCount(want[p]); dropped[p] != w {
					t.Errorf("partition %d: Kafka Streams dropped %d, the model %d (late records %d, refused record-window pairs %d)",
						p, dropped[p], w, want[p].Late, want[p].Dropped)
				}
			}
		})
	}
}

// checkInputCovers fails the test if the input missed what it is meant to
// probe: late records, final windows, records exactly at a boundary.
func checkInputCovers(t *testing.T, k kind, recs []windowmodel.Record, r windowmodel.Result) {
	t.Helper()
	atBoundary := 0
	for _, rec := range recs {
		if rec.TS > 0 && k.boundary(rec.TS-1) == rec.TS {
			atBoundary++
		}
	}
	if r.Late == 0 || len(r.Final) < 10 || atBoundary == 0 {
		t.Fatalf("the input does not probe the edges: %d late, %d final windows, %d records at a boundary", r.Late, len(r.Final), atBoundary)
	}
}

// input makes each partition's records, in the order they are produced
// (timestamps from epoch):
// mostly in timestamp order with pauses, some out of order within grace,
// some late beyond it, records exactly at a window boundary, the close
// edges (stream time at a window's end + grace - 1 and at end + grace, each
// followed by a record of that window) and, last, a record at closeAt.
func input(rng *rand.Rand, k kind) [][]windowmodel.Record {
	in := make([][]windowmodel.Record, partitions)
	span := max(k.size, k.gap)
	for p := range in {
		g := &gen{rng: rng, st: -1, keys: keysOn(p, keysPerPartition+1), last: map[string]int64{}}
		closer := g.keys[keysPerPartition]
		g.keys = g.keys[:keysPerPartition]
		for len(g.recs) < recordsPerPart && g.st < dataEnd-2*span {
			g.step(k, span)
		}
		g.add(closer, closeAt)
		for i := range g.recs {
			g.recs[i].TS += epoch
		}
		in[p] = g.recs
	}
	return in
}

// keysOn returns n keys that Kafka's default partitioner (murmur2) sends
// to partition p: wasmstream's state keys must be their record's
// partition's.
func keysOn(p, n int) []string {
	part := kgo.StickyKeyPartitioner(nil).ForTopic("")
	var keys []string
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprintf("p%d-k%d", p, i)
		if part.Partition(&kgo.Record{Key: []byte(k)}, partitions) == p {
			keys = append(keys, k)
		}
	}
	return keys
}

type gen struct {
	rng  *rand.Rand
	st   int64 // stream time so far
	keys []string
	last map[string]int64 // each key's latest timestamp
	recs []windowmodel.Record
}

func (g *gen) key() string { return g.keys[g.rng.IntN(len(g.keys))] }

func (g *gen) add(key string, ts int64) {
	ts = max(ts, 0)
	g.recs = append(g.recs, windowmodel.Record{Key: key, TS: ts})
	g.st = max(g.st, ts)
	g.last[key] = max(g.last[key], ts)
}

func (g *gen) step(k kind, span int64) {
	switch x := g.rng.IntN(100); {
	case x < 60: // in order
		g.add(g.key(), g.st+g.rng.Int64N(40))
	case x < 66: // a pause: sessions end, windows close
		g.add(g.key(), g.st+span/2+g.rng.Int64N(2*span))
	case x < 78: // out of order within grace
		g.add(g.key(), g.st-g.rng.Int64N(max(k.grace, 1)))
	case x < 82: // late beyond grace (for time windows every window; sessions mostly)
		g.add(g.key(), g.st-k.grace-span-g.rng.Int64N(span))
	case x < 88: // exactly at the next boundary
		g.add(g.key(), k.boundary(g.st))
	case x < 94:
		g.closeEdge(k)
	default:
		g.sessionEdge(k)
	}
}

// closeEdge brings stream time to e + grace - 1 and then to e + grace, e
// the end of the first window still open, with a record of that window
// after each: the first is counted, the second is late for that window.
func (g *gen) closeEdge(k kind) {
	if k.gap > 0 {
		g.sessionEdge(k)
		return
	}
	e := max(0, (g.st-k.size-k.grace)/k.advance)*k.advance + k.size // a window's end
	for e+k.grace <= g.st {
		e += k.advance
	}
	g.add(g.key(), e+k.grace-1)
	g.add(g.key(), e-1)
	g.add(g.key(), e+k.grace)
	g.add(g.key(), e-1)
	g.add(g.key(), e) // exactly at the end: the next window's
}

// sessionEdge brings stream time to exactly a key's latest timestamp L +
// gap + grace (a session ending at L is still open: it closes once end <
// stream time - gap - grace) and adds a record of that key at L + gap,
// which joins it; then one more millisecond and a record at L + gap of a
// key whose session ended just before, which may not. For time windows
// the same moves are plain out-of-order records.
func (g *gen) sessionEdge(k kind) {
	gap := max(k.gap, k.advance)
	key := g.key()
	l, ok := g.last[key]
	if !ok || l+gap+k.grace < g.st {
		g.add(key, g.st)
		return
	}
	g.add(g.key(), l+gap+k.grace)
	g.add(key, l+gap)
	other := g.key()
	if lo, ok := g.last[other]; ok && lo+gap+k.grace >= g.st {
		g.add(g.key(), lo+gap+k.grace+1)
		g.add(other, lo+gap)
	}
}

// windowsDiff describes what want has that got lacks and the reverse
// (counting duplicates); "" when they are equal.
func windowsDiff(want, got []windowmodel.Window) string {
	sortWindows(want)
	sortWindows(got)
	if slices.Equal(want, got) {
		return ""
	}
	count := func(ws []windowmodel.Window) map[windowmodel.Window]int {
		m := map[windowmodel.Window]int{}
		for _, w := range ws {
			m[w]++
		}
		return m
	}
	wm, gm := count(want), count(got)
	var b strings.Builder
	lines := 0
	report := func(prefix string, ws []windowmodel.Window, mine, theirs map[windowmodel.Window]int) {
		for _, w := range ws {
			if mine[w] > theirs[w] && lines < 40 {
				fmt.Fprintf(&b, "  %s %s [%d, %d] count %d (%d× against %d×)\n", prefix, w.Key, w.Start, w.End, w.Count, mine[w], theirs[w])
				lines++
				theirs[w]++ // reported once per surplus
			}
		}
	}
	report("model only: ", want, wm, gm)
	report("Streams only:", got, gm, wm)
	return fmt.Sprintf("model %d windows, Kafka Streams %d:\n%s", len(want), len(got), b.String())
}

func sortWindows(ws []windowmodel.Window) {
	slices.SortFunc(ws, func(a, b windowmodel.Window) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		if a.Start != b.Start {
			return int(a.Start - b.Start)
		}
		return int(a.End - b.End)
	})
}

// runStreams produces in (partition p's records to partition p) and runs
// StreamsWindowedCount over it until it has committed every input offset,
// by which time every final result is in the output (under exactly_once_v2
// committed with the offsets that made it; under at_least_once flushed
// before them). It returns the final windows read from the output, by the
// partition of their key, and each partition's dropped-records-total.
func runStreams(t *testing.T, brokers []string, cp string, k kind, name string, in [][]windowmodel.Record, partOf map[string]int) ([][]windowmodel.Window, []int) {
	t.Helper()
	inTopic, outTopic := name+"-in", name+"-streams-out"
	kafkatest.CreateTopic(t, brokers, partitions, outTopic)

	size := k.size
	if k.gap > 0 {
		size = k.gap
	}
	tmp := t.TempDir()
	logPath := filepath.Join(tmp, "streams.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command("java", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.io.tmpdir="+tmp,
		"-cp", cp, "wasmstream.peers.StreamsWindowedCount",
		strings.Join(brokers, ","), inTopic, outTopic, name+"-streams", k.name,
		strconv.FormatInt(size, 10), strconv.FormatInt(k.advance, 10), strconv.FormatInt(k.grace, 10),
		k.guarantee, strconv.FormatInt(k.retention, 10))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cmd.Process.Kill()
			<-exited
			t.Logf("Kafka Streams' log:\n%s", tail(logPath, 40))
		}
	})

	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	deadline := time.Now().Add(90 * time.Second)
	for {
		done, committed := committedAll(adm, name+"-streams", inTopic, in)
		if done {
			break
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("Kafka Streams exited (%v) before committing its input:\n%s", err, tail(logPath, 40))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90s Kafka Streams has committed %s of its input (partitions of %s); its stream thread:\n%s",
				committed, inputSizes(in), streamThreadDump(cmd.Process, logPath))
		}
	}
	got := readOutput(t, brokers, outTopic, partOf, streamsWindow)

	cmd.Process.Signal(os.Interrupt) // its shutdown hook prints the dropped counts, then closes
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatalf("Kafka Streams did not stop within 60s of SIGINT:\n%s", tail(logPath, 40))
	}
	stopped = true
	return got, droppedCounts(t, logPath)
}

// committedAll tells whether group has committed every record of in (its
// group coordinator may not exist yet: not yet, then), and what it has
// committed.
func committedAll(adm *kadm.Client, group, topic string, in [][]windowmodel.Record) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	offs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return false, err.Error()
	}
	done, at := true, make([]int64, len(in))
	for p, recs := range in {
		o, ok := offs.Lookup(topic, int32(p))
		if ok && o.Err == nil {
			at[p] = o.At
		}
		done = done && at[p] >= int64(len(recs))
	}
	return done, fmt.Sprint(at)
}

func inputSizes(in [][]windowmodel.Record) string {
	n := make([]int, len(in))
	for p := range in {
		n[p] = len(in[p])
	}
	return fmt.Sprint(n)
}

// streamThreadDump has the JVM print its threads (SIGQUIT: on standard
// output, the log) and returns the stream thread's stack, for a run that
// stalls.
func streamThreadDump(proc *os.Process, logPath string) string {
	proc.Signal(syscall.SIGQUIT)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(logPath)
		s := string(b)
		if i := strings.Index(s, "-StreamThread-1\""); i >= 0 {
			if j := strings.Index(s[i:], "\n\n"); j >= 0 {
				return s[strings.LastIndexByte(s[:i], '\n')+1 : i+j]
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return tail(logPath, 60)
}

// produce writes in[p] to partition p in order and returns each key's
// partition.
func produce(t *testing.T, brokers []string, topic string, in [][]windowmodel.Record) map[string]int {
	t.Helper()
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	partOf := map[string]int{}
	var recs []*kgo.Record
	for p, part := range in {
		for _, r := range part {
			partOf[r.Key] = p
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Key: []byte(r.Key), Value: []byte("x"), Timestamp: time.UnixMilli(r.TS)})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return partOf
}

// readOutput reads the output topic read_committed to its end (control
// records kept, so that a partition's transaction markers count towards
// it) and returns the windows by their key's partition.
func readOutput(t *testing.T, brokers []string, topic string, partOf map[string]int, parse func([]byte) (windowmodel.Window, error)) [][]windowmodel.Window {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	left := stableEnds(ctx, t, kadm.NewClient(kafkatest.Client(t, brokers)), topic)
	cl := kafkatest.Client(t, brokers, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	got := make([][]windowmodel.Window, partitions)
	for len(left) > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s to its end: %v (partitions left: %v)", topic, ctx.Err(), left)
		}
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("reading %s partition %d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= left[r.Partition] {
				delete(left, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			w, err := parse(r.Value)
			if err != nil {
				t.Fatalf("output %q: %v", r.Value, err)
			}
			p, ok := partOf[string(r.Key)]
			if !ok {
				t.Fatalf("output for key %q, which the input does not have", r.Key)
			}
			w.Key = string(r.Key)
			got[p] = append(got[p], w)
		})
	}
	return got
}

// streamsWindow reads StreamsWindowedCount's value, {"start":S,"end":E,"count":N}.
func streamsWindow(v []byte) (windowmodel.Window, error) {
	var w struct{ Start, End, Count int64 }
	err := json.Unmarshal(v, &w)
	return windowmodel.Window{Start: w.Start, End: w.End, Count: w.Count}, err
}

// guestWindow reads the guests' value, "<start> <end> <count>".
func guestWindow(v []byte) (windowmodel.Window, error) {
	var w windowmodel.Window
	_, err := fmt.Sscanf(string(v), "%d %d %d", &w.Start, &w.End, &w.Count)
	return w, err
}

// runWasmstream runs windowGuest in a wasmstream pipeline (in this process,
// exactly_once, state and timers on) over name's input until its group has
// committed every input offset — by then every final result is in the
// output, in the transaction of the record whose firing emitted it — and
// returns the final windows read from the output, by the partition of
// their key, and the records in its late topic by partition. Nothing may
// reach its dead-letter topic.
func runWasmstream(t *testing.T, brokers []string, k kind, name string, in [][]windowmodel.Record, partOf map[string]int) ([][]windowmodel.Window, []int) {
	t.Helper()
	inTopic, outTopic, dlq, lateTopic, group := name+"-in", name+"-ws-out", name+"-ws-dlq", name+"-ws-late", name+"-ws"
	kafkatest.CreateTopic(t, brokers, partitions, outTopic, dlq, lateTopic)
	dir := t.TempDir()
	module := filepath.Join(dir, "guest.wasm")
	if err := os.WriteFile(module, wt.BuildGoGuest(t, windowGuest), 0o644); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(brokers))
	for i, b := range brokers {
		quoted[i] = strconv.Quote(b)
	}
	y := fmt.Sprintf(`kafka: {brokers: [%s], group: %s, commit_interval: 100ms}
pipelines:
  - name: p
    module: %s
    inputs: [%s]
    output: %s
    dead_letter_topic: %s
    allowed_outputs: [%s]
    ordering: partition
    guarantee: exactly_once
    retry: {max_attempts: 1}
    state: {enabled: true, dir: %q}
    env: {WINDOW_LATE_TOPIC: %s, %s}
`, strings.Join(quoted, ", "), group, module, inTopic, outTopic, dlq, lateTopic, filepath.Join(dir, "state"), lateTopic, k.guestEnv)
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	r, err := scheduler.NewRunner(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	defer r.Stop(context.Background())
	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	deadline := time.Now().Add(90 * time.Second)
	for {
		done, committed := committedAll(adm, group+".p", inTopic, in) // the pipeline's group: <kafka.group>.<name>
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 90s wasmstream has committed %s of its input (partitions of %s): %+v", committed, inputSizes(in), r.Snapshots())
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := readOutput(t, brokers, outTopic, partOf, guestWindow)
	late := make([]int, partitions)
	for p, recs := range readOutput(t, brokers, lateTopic, partOf, func([]byte) (windowmodel.Window, error) { return windowmodel.Window{}, nil }) {
		late[p] = len(recs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if ends := stableEnds(ctx, t, adm, dlq); len(ends) != 0 {
		t.Errorf("records dead-lettered (end offsets by partition: %v)", ends)
	}
	return got, late
}

// stableEnds returns topic's end offsets once no transaction is open on
// it (each partition's last stable offset is its end): a transaction's
// offsets become visible to the group before its markers reach every
// output partition, so the committed input does not yet mean the output's
// last stable offsets are final. Partitions with nothing are left out.
func stableEnds(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	for {
		stable, err1 := adm.ListCommittedOffsets(ctx, topic)
		ends, err2 := adm.ListEndOffsets(ctx, topic)
		if ctx.Err() != nil {
			t.Fatalf("%s: no stable end (last errors %v, %v)", topic, err1, err2)
		}
		left, same := map[int32]int64{}, err1 == nil && err2 == nil
		ends.Each(func(o kadm.ListedOffset) {
			s, ok := stable.Lookup(topic, o.Partition)
			same = same && o.Err == nil && ok && s.Err == nil && s.Offset == o.Offset
			if o.Offset > 0 {
				left[o.Partition] = o.Offset
			}
		})
		if same {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var droppedLine = regexp.MustCompile(`^streams: dropped task=0_(\d+) total=(\d+)$`)

// droppedCounts reads the "streams: dropped" lines StreamsWindowedCount
// prints when it stops: every partition's must be there.
func droppedCounts(t *testing.T, logPath string) []int {
	t.Helper()
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dropped := make([]int, partitions)
	seen := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := droppedLine.FindStringSubmatch(sc.Text()); m != nil {
			p, _ := strconv.Atoi(m[1])
			n, _ := strconv.Atoi(m[2])
			if p < partitions {
				dropped[p] = n
				seen++
			}
		}
	}
	if seen != partitions {
		t.Fatalf("Kafka Streams printed the dropped count of %d tasks, not %d:\n%s", seen, partitions, tail(logPath, 40))
	}
	return dropped
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// streamsClasspath builds the Java peers (tests/peers) and returns their
// classpath.
func streamsClasspath(t *testing.T) string {
	out, err := exec.Command("bash", filepath.Join(wt.RepoRoot(t), "tests/peers/peers.sh"), "build", "streams").Output()
	if err != nil {
		t.Fatalf("building the Java peers: %v", err)
	}
	return strings.TrimSpace(string(out))
}
