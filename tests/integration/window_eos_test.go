//go:build integration

package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/internal/windowmodel"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// Exactly-once of windows and timers (issue 58 §4) on the real broker:
// plugins/examples/window-count, a tumbling count per key emitted once a
// window has closed by the host's event-time timers (ABI.md §4.2), run by
// the built binary under exactly_once over a seeded random input with
// records out of order within the grace and late beyond it. Whatever
// happens to the hosts — SIGKILLs while windows are open and while
// firings are due, a restart on an empty state directory, a rebalance —
// the read_committed output holds every (key, window start) of
// internal/windowmodel's final windows exactly once, with the model's
// count, and nothing else; and two runs over one input write the same
// bytes in the same order on every output partition.

// The windows of the tests in milliseconds (windowConfig's env says them
// to the example).
const (
	winSize  = 1000
	winGrace = 300
)

var (
	windowOnce   sync.Once
	windowModule string
)

// windowCountModule builds plugins/examples/window-count once for the
// tests that need it (TestMain builds only the examples every run needs).
func windowCountModule(t *testing.T) string {
	t.Helper()
	windowOnce.Do(func() {
		p := filepath.Join(filepath.Dir(binary), "window-count.wasm")
		if err := os.WriteFile(p, wt.BuildGoGuest(t, "plugins/examples/window-count"), 0o644); err != nil {
			t.Fatal(err)
		}
		windowModule = p
	})
	if windowModule == "" {
		t.Fatal("plugins/examples/window-count did not build (see the first test that needed it)")
	}
	return windowModule
}

// windowRec is an input record: its key, partition (the key's murmur2
// partition, which the host's state requires), timestamp and value (its
// index in the input: a late record is told from the others by it).
type windowRec struct {
	key   string
	part  int32
	ts    int64
	value string
}

// windowInput is n seeded random records over 12 keys, on a clock that
// starts two hours ago, on the hour (a timestamp older than the broker's
// retention would have its segment deleted; one ahead of the broker's
// clock may be refused), and moves 0-29 ms a record, each record up to
// 500 ms behind it: some out of order within the 300 ms grace, some late
// beyond it. Then one closer a partition, ten minutes of event time
// ahead, which closes every window of its partition.
func windowInput(seed uint64, n int, parts int32) []windowRec {
	rng := rand.New(rand.NewPCG(seed, 58))
	hash := kgo.StickyKeyPartitioner(nil).ForTopic("")
	partOf := func(key string) int32 { return int32(hash.Partition(&kgo.Record{Key: []byte(key)}, int(parts))) }
	// On the hour: the windows, counts and late records are the seed's
	// whatever the day.
	clock := time.Now().Add(-2 * time.Hour).Truncate(time.Hour).UnixMilli()
	recs := make([]windowRec, 0, n+int(parts))
	for range n {
		clock += rng.Int64N(30)
		key := fmt.Sprintf("k%d", rng.IntN(12))
		recs = append(recs, windowRec{key: key, part: partOf(key), ts: clock - rng.Int64N(500), value: fmt.Sprintf("r%d", len(recs))})
	}
	for p := range parts {
		key := ""
		for i := 0; key == ""; i++ {
			if k := fmt.Sprintf("close-%d", i); partOf(k) == p {
				key = k
			}
		}
		recs = append(recs, windowRec{key: key, part: p, ts: clock + (10 * time.Minute).Milliseconds(), value: fmt.Sprintf("r%d", len(recs))})
	}
	return recs
}

// windowWant is internal/windowmodel's final windows of recs, a partition
// at a time (stream time is a partition's), as the example writes them:
// "key start end count", sorted.
func windowWant(recs []windowRec, parts int32) []string {
	var out []string
	for p := range parts {
		var in []windowmodel.Record
		for _, r := range recs {
			if r.part == p {
				in = append(in, windowmodel.Record{Key: r.key, TS: r.ts})
			}
		}
		for _, w := range windowmodel.Tumbling(in, winSize, winGrace).Final {
			out = append(out, fmt.Sprintf("%s %d %d %d", w.Key, w.Start, w.End, w.Count))
		}
	}
	slices.Sort(out)
	return out
}

// windowProduce produces recs to topic, each to its partition, in order,
// chunk records at a time, every pause between chunks (0: at once).
func windowProduce(brokers []string, topic string, recs []windowRec, chunk int, pause time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for len(recs) > 0 {
		n := min(chunk, len(recs))
		batch := make([]*kgo.Record, n)
		for i, r := range recs[:n] {
			batch[i] = &kgo.Record{Topic: topic, Partition: r.part, Key: []byte(r.key), Value: []byte(r.value), Timestamp: time.UnixMilli(r.ts)}
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			return err
		}
		recs = recs[n:]
		if pause > 0 && len(recs) > 0 {
			time.Sleep(pause) // the load's pace, not a wait for an outcome
		}
	}
	return nil
}

// windowLoad produces recs in the background (200 records every 50 ms:
// the input keeps coming while hosts are killed and moved); wait returns
// once all are on the broker and fails the test if producing failed.
func windowLoad(t *testing.T, brokers []string, topic string, recs []windowRec) (wait func()) {
	done := make(chan error, 1)
	go func() { done <- windowProduce(brokers, topic, recs, 200, 50*time.Millisecond) }()
	var once sync.Once
	var err error
	wait = func() {
		t.Helper()
		once.Do(func() { err = <-done })
		if err != nil {
			t.Fatalf("producing the input: %v", err)
		}
	}
	t.Cleanup(func() { once.Do(func() { err = <-done }) }) // the goroutine ends before the test
	return wait
}

// windowConfig writes the config of a window-count pipeline (state in
// dir, ordering partition, the tests' windows, late records to the topic
// late) with pipelineKeys added.
func windowConfig(t *testing.T, brokers []string, group, in, out, dlq, late, dir, pipelineKeys string) string {
	cfg := writeConfig(t, brokers, group, windowCountModule(t), in, out, dlq, "")
	replace(t, cfg, "    retry: {max_attempts: 1}\n", fmt.Sprintf(`    retry: {max_attempts: 1}
    ordering: partition
    state: {enabled: true, dir: %q}
    allowed_outputs: [%s]
    env: {WINDOW_SIZE: 1s, WINDOW_GRACE: 300ms, WINDOW_LATE_TOPIC: %s}
%s`, dir, late, late, pipelineKeys))
	return cfg
}

// windowLateCheck reads late (read_committed) until it holds the model's
// number of late records, then 1 s more, and fails unless each late record
// (its value, the input's index) was read once. Whether a record is late
// depends on the stream time its partition had decided when it came: a
// replay after an abort must decide the same.
func windowLateCheck(t *testing.T, brokers []string, late string, recs []windowRec, parts int32) {
	t.Helper()
	want := windowLate(recs, parts)
	rd := kafkatest.NewReader(t, brokers, late)
	rd.ReadUntil(t, time.Minute, fmt.Sprintf("the model's %d late records", want), func(rs []*kgo.Record) bool { return len(rs) >= want })
	rd.ReadFor(time.Second)
	seen := map[string]int{}
	for _, r := range rd.Recs {
		seen[string(r.Value)]++
	}
	if len(rd.Recs) != want || len(seen) != want {
		t.Fatalf("late records: %d read, %d distinct; the model's %d", len(rd.Recs), len(seen), want)
	}
}

// windowResults is the results read so far: "key start end count" and how
// many times each was read.
func windowResults(rs []*kgo.Record) map[string]int {
	got := map[string]int{}
	for _, r := range rs {
		got[fmt.Sprintf("%s %s", r.Key, r.Value)]++
	}
	return got
}

// windowCheck reads out (read_committed) until it holds as many distinct
// results as want, then 3 s more (a duplicate would come late), and fails
// unless each of want was read exactly once and nothing else was: a window
// missing, emitted twice, or with a count other than the model's.
func windowCheck(t *testing.T, rd *kafkatest.Reader, want []string) {
	t.Helper()
	rd.ReadUntil(t, 3*time.Minute, fmt.Sprintf("the model's %d final windows", len(want)), func(rs []*kgo.Record) bool {
		return len(windowResults(rs)) >= len(want)
	})
	rd.ReadFor(3 * time.Second)
	got := windowResults(rd.Recs)
	var missing, dups, extra []string
	for _, w := range want {
		switch n := got[w]; {
		case n == 0:
			missing = append(missing, w)
		case n > 1:
			dups = append(dups, fmt.Sprintf("%s (%d times)", w, n))
		}
		delete(got, w)
	}
	for w := range got {
		extra = append(extra, w)
	}
	slices.Sort(extra)
	if len(missing)+len(dups)+len(extra) > 0 {
		first := func(s []string) []string { return s[:min(len(s), 5)] }
		t.Fatalf("not exactly the model's windows: %d results read for %d final windows; %d missing %v, %d emitted more than once %v, %d not the model's %v",
			len(rd.Recs), len(want), len(missing), first(missing), len(dups), first(dups), len(extra), first(extra))
	}
}

// TestWindowExactlyOnceKills: the window-count pipeline under exactly_once
// is SIGKILLed five times while its input keeps coming — four times at
// points of its output (windows open on every key at each: the last
// second and a grace of event time), the second of them followed by a
// restart on an empty state directory (its windows and timers restored
// from the changelog alone), and once right after the closers (firings of
// every open window due: they ride in the closers' transaction, which the
// kill aborts unless it lands after the commit — the log says which — and
// fire again after the restart). The read_committed output is the model's
// final windows, each exactly once, and its late records, each once.
func TestWindowExactlyOnceKills(t *testing.T) {
	t.Parallel() // owns its topics, group and state directory
	const n, parts = 16000, 4
	brokers := kafkatest.RealBrokers(t)
	name := names(t)
	in, out, dlq, late := name+"-in", name+"-out", name+"-dlq", name+"-late"
	kafkatest.CreateTopic(t, brokers, parts, in, out, dlq, late)
	recs := windowInput(1, n, parts)
	want := windowWant(recs, parts)
	dir := t.TempDir()
	// Transactions of a second: most kills land in an open one.
	cfg := windowConfig(t, brokers, name, in, out, dlq, late, dir, "    guarantee: exactly_once\n    transactions: {max_records: 5000, interval: 1s}\n")
	rd := kafkatest.NewReader(t, brokers, out)
	wait := windowLoad(t, brokers, in, recs[:n])
	p := startProc(t, "run", "--config", cfg)
	last := 0 // committed results at the last kill
	for i, frac := range []int{15, 35, 55, 75} {
		// Each restarted host commits something (its restore done, its
		// transactions running) before it is killed in turn.
		rd.ReadUntil(t, 3*time.Minute, fmt.Sprintf("%d%% of the final windows, and more than at the last kill, before kill %d", frac, i+1), func(rs []*kgo.Record) bool {
			return len(rs) >= len(want)*frac/100 && len(rs) > last
		})
		last = len(rd.Recs)
		time.Sleep(time.Duration(29*(i+1)) * time.Millisecond) // into the next transaction
		p.kill(t)
		t.Logf("kill %d after %d committed results", i+1, len(rd.Recs))
		if i == 1 {
			// A restart on an empty state directory: the open windows, their
			// timers and the stream time come from the changelog alone.
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}
		p = startProc(t, "run", "--config", cfg)
	}
	wait()
	// Caught up: every window the input without the closers closes is out.
	early := len(windowWant(recs[:n], parts))
	rd.ReadUntil(t, 3*time.Minute, "the windows closed before the closers", func(rs []*kgo.Record) bool { return len(rs) >= early })
	if err := windowProduce(brokers, in, recs[n:], parts, 0); err != nil {
		t.Fatal(err)
	}
	// The closers' firings are due now; kill within their transaction (a
	// second long: the host, caught up, fetches a closer at once).
	time.Sleep(60 * time.Millisecond)
	p.kill(t)
	rd.ReadFor(time.Second)
	t.Logf("kill 5 after the closers: %d of their round's %d results committed before it", len(rd.Recs)-early, len(want)-early)
	p = startProc(t, "run", "--config", cfg)
	windowCheck(t, rd, want)
	windowLateCheck(t, brokers, late, recs, parts)
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	raw := uncommittedCount(t, brokers, out)
	t.Logf("%d records, 5 kills: each of the model's %d final windows once, each of its %d late records once; read_uncommitted %d records (%d of aborted transactions)",
		len(recs), len(want), windowLate(recs, parts), raw, raw-len(want))
}

// windowLate is the model's count of late records of recs.
func windowLate(recs []windowRec, parts int32) int {
	late := 0
	for p := range parts {
		var in []windowmodel.Record
		for _, r := range recs {
			if r.part == p {
				in = append(in, windowmodel.Record{Key: r.key, TS: r.ts})
			}
		}
		late += windowmodel.Tumbling(in, winSize, winGrace).Late
	}
	return late
}

// TestWindowExactlyOnceRebalance: two hosts in one group run the
// window-count pipeline under exactly_once, each with a state directory of
// its own. Host b joins while host a counts (partitions, their open
// windows and timers, move to b through the changelog), then host a is
// stopped while the input keeps coming (its partitions move to b). The
// read_committed output is the model's final windows, each exactly once.
func TestWindowExactlyOnceRebalance(t *testing.T) {
	t.Parallel() // owns its topics, group and state directories
	const n, parts = 12000, 4
	brokers := kafkatest.RealBrokers(t)
	name := names(t)
	in, out, dlq, late := name+"-in", name+"-out", name+"-dlq", name+"-late"
	kafkatest.CreateTopic(t, brokers, parts, in, out, dlq, late)
	recs := windowInput(2, n, parts)
	want := windowWant(recs, parts)
	cfgA := windowConfig(t, brokers, name, in, out, dlq, late, t.TempDir(), eosKeys)
	cfgB := windowConfig(t, brokers, name, in, out, dlq, late, t.TempDir(), eosKeys)
	rd := kafkatest.NewReader(t, brokers, out)
	if err := windowProduce(brokers, in, recs[:n/3], 1000, 0); err != nil {
		t.Fatal(err)
	}
	a := startProcEnv(t, []string{"WASMSTREAM_HOST_ID=a"}, "run", "--config", cfgA)
	rd.ReadUntil(t, 2*time.Minute, "host a emitting windows", func(rs []*kgo.Record) bool { return len(rs) >= len(want)/10 })
	wait := windowLoad(t, brokers, in, recs[n/3:2*n/3])
	b := startProcEnv(t, []string{"WASMSTREAM_HOST_ID=b"}, "run", "--config", cfgB)
	kafkatest.Eventually(t, 2*time.Minute, "partitions moved to host b (restored there)", func() bool { return strings.Contains(b.logText(), "state restored") })
	wait()
	wait = windowLoad(t, brokers, in, recs[2*n/3:n])
	if code := a.stop(t, time.Minute); code != 0 {
		t.Fatalf("host a: exit code %d after SIGTERM", code)
	}
	kafkatest.Eventually(t, 2*time.Minute, "host a's partitions moved to host b", func() bool { return strings.Count(b.logText(), "state restored") >= parts })
	wait()
	if err := windowProduce(brokers, in, recs[n:], parts, 0); err != nil {
		t.Fatal(err)
	}
	windowCheck(t, rd, want)
	windowLateCheck(t, brokers, late, recs, parts)
	if code := b.stop(t, time.Minute); code != 0 {
		t.Fatalf("host b: exit code %d after SIGTERM", code)
	}
	t.Logf("%d records; host b restored %d partitions; each of the model's %d final windows once, each of its %d late records once", len(recs), strings.Count(b.logText(), "state restored"), len(want), windowLate(recs, parts))
}

// TestWindowReplayIdentical: two fresh pipelines (groups, state
// directories and output topics of their own) over one input write the
// same output: on every output partition the same records — key and value
// bytes — in the same order, and those are the model's final windows.
// The firing rule is deterministic (a record's due timers fire in (at,
// key) order in its transaction), and a key's windows go to one output
// partition from one input partition.
func TestWindowReplayIdentical(t *testing.T) {
	t.Parallel() // owns its topics, groups and state directories
	const n, parts = 6000, 3
	brokers := kafkatest.RealBrokers(t)
	name := names(t)
	in, dlq, late := name+"-in", name+"-dlq", name+"-late"
	kafkatest.CreateTopic(t, brokers, parts, in, dlq, late, name+"-out1", name+"-out2")
	recs := windowInput(3, n, parts)
	want := windowWant(recs, parts)
	if err := windowProduce(brokers, in, recs, 1000, 0); err != nil {
		t.Fatal(err)
	}
	var runs [2][parts][]string
	for i := range runs { // both at once
		out := fmt.Sprintf("%s-out%d", name, i+1)
		startProc(t, "run", "--config", windowConfig(t, brokers, fmt.Sprintf("%s-g%d", name, i+1), in, out, dlq, late, t.TempDir(), eosKeys))
	}
	for i := range runs {
		rd := kafkatest.NewReader(t, brokers, fmt.Sprintf("%s-out%d", name, i+1))
		windowCheck(t, rd, want)
		for _, r := range rd.Recs {
			runs[i][r.Partition] = append(runs[i][r.Partition], fmt.Sprintf("%q=%q", r.Key, r.Value))
		}
	}
	for p := range parts {
		if !slices.Equal(runs[0][p], runs[1][p]) {
			a, b := runs[0][p], runs[1][p]
			at := 0
			for at < min(len(a), len(b)) && a[at] == b[at] {
				at++
			}
			t.Fatalf("output partition %d differs between the runs at record %d of %d and %d: %v against %v",
				p, at, len(a), len(b), a[at:min(at+3, len(a))], b[at:min(at+3, len(b))])
		}
	}
	t.Logf("two runs of %d records: the same %d records, partition by partition (%d partitions)", len(recs), len(want), parts)
}
