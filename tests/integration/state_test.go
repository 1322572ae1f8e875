//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// Stateful pipelines on the real broker under SIGKILL (issue 21): the count
// example's running counts per key.

const stateKeys = 97 // kafkatest.Produce's keys: "k<i%97>"

func stateRun(t *testing.T, count int, pipelineKeys string) (brokers []string, out, cfg string) {
	brokers = kafkatest.RealBrokers(t)
	n := names(t)
	in, dlq := n+"-in", n+"-dlq"
	out = n + "-out"
	kafkatest.CreateTopic(t, brokers, 4, in, out, dlq)
	kafkatest.Produce(t, brokers, in, count, strconv.Itoa)
	cfg = writeConfig(t, brokers, n, modules["count"], in, out, dlq, "")
	replace(t, cfg, "    retry: {max_attempts: 1}\n", fmt.Sprintf("    retry: {max_attempts: 1}\n    state: {enabled: true, dir: %q}\n%s", t.TempDir(), pipelineKeys))
	return brokers, out, cfg
}

// readCounts reads the count outputs until every key reached its true
// count (of count records over stateKeys keys) and a little longer; it
// returns, per key, how often each count appeared.
func readCounts(t *testing.T, rd *kafkatest.Reader, count int) map[string]map[int]int {
	t.Helper()
	truth := func(k int) int { return stateTruth(count, k) }
	co := newCountOutputs()
	seen := co.seen
	read := func(rs []*kgo.Record) { co.fold(t, rs) }
	complete := func() bool {
		for k := 0; k < stateKeys; k++ {
			if seen[fmt.Sprintf("k%d", k)][truth(k)] == 0 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(2 * time.Minute)
	for read(rd.Recs); !complete() && time.Now().Before(deadline); read(rd.Recs) {
		rd.ReadFor(500 * time.Millisecond)
	}
	rd.ReadFor(3 * time.Second)
	read(rd.Recs)
	if !complete() {
		for _, r := range rd.Recs[:5] {
			t.Logf("sample: %q=%q at %d@%d", r.Key, r.Value, r.Partition, r.Offset)
		}
		// Which keys fell short, and how their counts went.
		shown := 0
		for k := 0; k < stateKeys && shown < 3; k++ {
			key := fmt.Sprintf("k%d", k)
			if seen[key][truth(k)] > 0 {
				continue
			}
			shown++
			var odd []string
			for c := 1; c <= truth(k) && len(odd) < 20; c++ {
				if n := seen[key][c]; n != 1 {
					odd = append(odd, fmt.Sprintf("%d×%d", c, n))
				}
			}
			t.Errorf("key %s never reached %d; counts seen other than once: %v", key, truth(k), odd)
			for _, r := range rd.Recs {
				if string(r.Key) == key {
					if c, _ := strconv.Atoi(string(r.Value)); seen[key][c] != 1 {
						t.Logf("  %s=%d at out %d@%d producer %d/%d %s", key, c, r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch, r.Timestamp.Format("15:04:05.000"))
					}
				}
			}
		}
		t.Fatalf("%d records read: not every key reached its count", len(rd.Recs))
	}
	for k := 0; k < stateKeys; k++ {
		key := fmt.Sprintf("k%d", k)
		for c := range seen[key] {
			if c > truth(k) {
				t.Errorf("key %s counted to %d, above its %d records", key, c, truth(k))
				break
			}
		}
	}
	return seen
}

// TestStateExactlyOnceKills: five SIGKILLs of a stateful exactly_once
// pipeline, each followed by a restart (an incremental restore from the
// changelog, read_committed). The read_committed output holds every count
// of every key exactly once: 1, 2, ... up to the key's number of records.
func TestStateExactlyOnceKills(t *testing.T) {
	const count = 60000
	brokers, out, cfg := stateRun(t, count, eosKeys)
	rd := kafkatest.NewReader(t, brokers, out)
	p := startProc(t, "run", "--config", cfg)
	for i, frac := range []int{10, 25, 40, 55, 70} {
		rd.ReadUntil(t, 3*time.Minute, fmt.Sprintf("%d%% of the outputs before kill %d", frac, i+1), func(rs []*kgo.Record) bool { return len(rs) >= count*frac/100 })
		time.Sleep(time.Duration(23*(i+1)) * time.Millisecond)
		p.kill(t)
		t.Logf("kill %d after %d committed outputs", i+1, len(rd.Recs))
		p = startProc(t, "run", "--config", cfg)
	}
	seen := readCounts(t, rd, count)
	kafkatest.Eventually(t, time.Minute, "the last process restored its state", func() bool { return strings.Contains(p.logText(), "state restored") })
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	dups, total := 0, 0
	for key, cs := range seen {
		for c, n := range cs {
			total++
			if n > 1 {
				dups += n - 1
				if dups < 5 {
					t.Errorf("key %s: count %d appears %d times", key, c, n)
				}
			}
		}
	}
	if total != count || dups > 0 {
		t.Fatalf("not exactly once: %d distinct counts for %d records, %d duplicates", total, count, dups)
	}
	t.Logf("%d records, 5 kills: every count of every key once", count)
}

// TestStateAtLeastOnceKills: the same under at_least_once: a record may be
// counted twice (its changelog write acknowledged, its offset not yet
// committed when the process died), never lost: every key reaches at least
// its true count. readCounts fails on counts above the truth, so this test
// reads the maximum itself.
func TestStateAtLeastOnceKills(t *testing.T) {
	const count = 200000
	brokers, out, cfg := stateRun(t, count, "")
	rd := kafkatest.NewReader(t, brokers, out)
	p := startProc(t, "run", "--config", cfg)
	for i, frac := range []int{20, 50} {
		rd.ReadUntil(t, 3*time.Minute, fmt.Sprintf("%d%% of the outputs before kill %d", frac, i+1), func(rs []*kgo.Record) bool { return len(rs) >= count*frac/100 })
		p.kill(t)
		p = startProc(t, "run", "--config", cfg)
	}
	truth := func(k int) int { return stateTruth(count, k) }
	co := newCountOutputs()
	top := co.top
	rd.ReadUntil(t, 4*time.Minute, "every key at least at its true count", func(rs []*kgo.Record) bool {
		co.fold(t, rs)
		for k := 0; k < stateKeys; k++ {
			if top[fmt.Sprintf("k%d", k)] < truth(k) {
				return false
			}
		}
		return true
	})
	// The last process may have had nothing left to do: let it start
	// (restore its stores) before it is stopped.
	kafkatest.Eventually(t, time.Minute, "the last process restored its state", func() bool { return strings.Contains(p.logText(), "state restored") })
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	over := 0
	for k := 0; k < stateKeys; k++ {
		over += top[fmt.Sprintf("k%d", k)] - truth(k)
	}
	t.Logf("%d records, 2 kills: no key below its count; %d counted twice", count, over)
}

// keyedLoad produces records keyed "k<i%stateKeys>" (value i, i = 0, 1, ...)
// to topic with the default (murmur2) partitioner, in batches of 100 every
// 50 ms, until the returned stop is called; stop returns how many it
// produced.
func keyedLoad(t *testing.T, brokers []string, topic string) (stop func() int) {
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(5*time.Millisecond))
	var produced atomic.Int64
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			base := int(produced.Load())
			recs := make([]*kgo.Record, 100)
			for j := range recs {
				recs[j] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", (base+j)%stateKeys)), Value: []byte(strconv.Itoa(base + j))}
			}
			ctx, cancel := ctxTimeout(time.Minute)
			err := cl.ProduceSync(ctx, recs...).FirstErr()
			cancel()
			if err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			produced.Add(int64(len(recs)))
		}
	}()
	var once sync.Once
	stop = func() int { once.Do(func() { close(quit); <-done }); return int(produced.Load()) }
	t.Cleanup(func() { stop() }) // a test that ends early stops it too
	return stop
}

// stateConfig writes a config of the count module with state in a
// directory of its own (one per host), pipelineKeys added to the pipeline.
func stateConfig(t *testing.T, brokers []string, group, module, in, out, dlq, pipelineKeys string) string {
	cfg := writeConfig(t, brokers, group, module, in, out, dlq, "")
	replace(t, cfg, "    retry: {max_attempts: 1}\n", fmt.Sprintf("    retry: {max_attempts: 1}\n    state: {enabled: true, dir: %q}\n%s", t.TempDir(), pipelineKeys))
	return cfg
}

// lastCounts reads the count outputs until every key's last count reached
// its true count (of count records over stateKeys keys), then 3 s more. It
// returns the last count per key and the number of outputs of each
// "key=count".
func lastCounts(t *testing.T, rd *kafkatest.Reader, count int) (last map[string]int, seen map[string]int) {
	t.Helper()
	co := newCountOutputs()
	rd.ReadUntil(t, time.Minute, "every key's last count at least its true count", func(rs []*kgo.Record) bool {
		co.fold(t, rs)
		for k := 0; k < stateKeys; k++ {
			if co.last[fmt.Sprintf("k%d", k)] < stateTruth(count, k) {
				return false
			}
		}
		return true
	})
	rd.ReadFor(3 * time.Second)
	co.fold(t, rd.Recs)
	seen = map[string]int{}
	for key, counts := range co.seen {
		for c, n := range counts {
			seen[fmt.Sprintf("%s=%d", key, c)] = n
		}
	}
	return co.last, seen
}

// stateTruth is key k's true count after count records over stateKeys
// keys (record i has key k<i mod stateKeys>).
func stateTruth(count, k int) int {
	return count/stateKeys + map[bool]int{true: 1}[k < count%stateKeys]
}

// countOutputs folds the count example's outputs (key → decimal count) as
// a reader brings them: how often each count of each key came, and each
// key's last and highest count.
type countOutputs struct {
	seen    map[string]map[int]int
	last    map[string]int
	top     map[string]int
	counted int // records of the reader's slice folded
}

func newCountOutputs() *countOutputs {
	return &countOutputs{seen: map[string]map[int]int{}, last: map[string]int{}, top: map[string]int{}}
}

// fold takes the records of rs not taken yet (rs grows: the reader's Recs).
func (co *countOutputs) fold(t *testing.T, rs []*kgo.Record) {
	t.Helper()
	for _, r := range rs[co.counted:] {
		c, err := strconv.Atoi(string(r.Value))
		if err != nil {
			t.Fatalf("output %q", r.Value)
		}
		if co.seen[string(r.Key)] == nil {
			co.seen[string(r.Key)] = map[int]int{}
		}
		co.seen[string(r.Key)][c]++
		co.last[string(r.Key)] = c
		co.top[string(r.Key)] = max(co.top[string(r.Key)], c)
	}
	co.counted = len(rs)
}

// TestStateRebalanceTwoHosts: host a counts a keyed input under load; host
// b joins the group mid-run (partitions move to it, restored from the
// changelog), then a is stopped (SIGTERM; all partitions move to b), the
// load going on throughout. Under exactly_once the read_committed output
// has every count of every key once and each key's last count is its true
// count; under at_least_once no key's last count is below it.
func TestStateRebalanceTwoHosts(t *testing.T) {
	for _, mode := range []string{"exactly_once", "at_least_once"} {
		t.Run(mode, func(t *testing.T) {
			eos := mode == "exactly_once"
			brokers := kafkatest.RealBrokers(t)
			n := names(t)
			in, out, dlq := n+"-in", n+"-out", n+"-dlq"
			kafkatest.CreateTopic(t, brokers, 6, in)
			kafkatest.CreateTopic(t, brokers, 4, out, dlq)
			keys := ""
			if eos {
				keys = eosKeys
			}
			cfgA := stateConfig(t, brokers, n, modules["count"], in, out, dlq, keys)
			cfgB := stateConfig(t, brokers, n, modules["count"], in, out, dlq, keys)
			rd := kafkatest.NewReader(t, brokers, out)
			stop := keyedLoad(t, brokers, in)
			a := startProcEnv(t, []string{"WASMSTREAM_HOST_ID=a"}, "run", "--config", cfgA)
			rd.ReadUntil(t, time.Minute, "host a counting", func(rs []*kgo.Record) bool { return len(rs) >= 2000 })
			b := startProcEnv(t, []string{"WASMSTREAM_HOST_ID=b"}, "run", "--config", cfgB)
			kafkatest.Eventually(t, time.Minute, "partitions moved to host b (restored there)", func() bool { return strings.Contains(b.logText(), "state restored") })
			mark := len(rd.Recs)
			rd.ReadUntil(t, time.Minute, "both hosts counting", func(rs []*kgo.Record) bool { return len(rs) >= mark+4000 })
			onB := strings.Count(b.logText(), "state restored")
			if code := a.stop(t, time.Minute); code != 0 {
				t.Fatalf("host a: exit code %d after SIGTERM", code)
			}
			kafkatest.Eventually(t, time.Minute, "host a's partitions moved to host b", func() bool { return strings.Count(b.logText(), "state restored") >= 6 })
			mark = len(rd.Recs)
			rd.ReadUntil(t, time.Minute, "host b counting alone", func(rs []*kgo.Record) bool { return len(rs) >= mark+4000 })
			total := stop()
			truth := func(k int) int { return stateTruth(total, k) }
			last, seen := lastCounts(t, rd, total)
			if code := b.stop(t, time.Minute); code != 0 {
				t.Fatalf("host b: exit code %d after SIGTERM", code)
			}
			dups, over := 0, 0
			for kc, c := range seen {
				if c > 1 {
					dups += c - 1
					if eos && dups < 5 {
						t.Errorf("%s appears %d times", kc, c)
					}
				}
			}
			for k := 0; k < stateKeys; k++ {
				key := fmt.Sprintf("k%d", k)
				switch {
				case last[key] < truth(k):
					t.Errorf("key %s: last count %d, below its %d records", key, last[key], truth(k))
				case eos && last[key] != truth(k):
					t.Errorf("key %s: last count %d, want %d", key, last[key], truth(k))
				}
				over += last[key] - truth(k)
			}
			if eos && (len(seen) != total || dups > 0) {
				t.Errorf("not exactly once: %d distinct counts for %d records, %d duplicates", len(seen), total, dups)
			}
			t.Logf("%s: %d records, %d outputs; %d partition restores on b while a ran, %d in all; %d duplicate outputs, last counts %d over the truth in all",
				mode, total, len(rd.Recs), onB, strings.Count(b.logText(), "state restored"), dups, over)
		})
	}
}

// TestStateHotSwap: a stateful exactly_once pipeline under load is switched
// to a second build of the count example through the admin API (wasmstream
// deploy): the state lives in the host, so the new module's counts go on
// from the old one's. The read_committed output has every count of every
// key once, each key's last count is its true count, and per key no output
// of version 1 follows one of version 2.
func TestStateHotSwap(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	const parts = 4
	kafkatest.CreateTopic(t, brokers, parts, in, out, dlq)
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "v1.wasm"), filepath.Join(dir, "v2.wasm")
	os.WriteFile(v1, wt.BuildGoGuest(t, "plugins/examples/count", "-ldflags=-X main.version=1"), 0o644)
	os.WriteFile(v2, wt.BuildGoGuest(t, "plugins/examples/count", "-ldflags=-X main.version=2"), 0o644)
	addr := freePort(t)
	cfg := stateConfig(t, brokers, n, v1, in, out, dlq, eosKeys)
	replace(t, cfg, "admin:\n  enabled: false", fmt.Sprintf("admin:\n  listen: %s\n  store_dir: %s", addr, filepath.Join(dir, "store")))
	token := "WASMSTREAM_ADMIN_TOKEN=" + adminToken(n)
	rd := kafkatest.NewReader(t, brokers, out)
	stop := keyedLoad(t, brokers, in)
	p := startProcEnv(t, []string{token}, "run", "--config", cfg)
	rd.ReadUntil(t, time.Minute, "version 1 counting", func(rs []*kgo.Record) bool { return len(rs) >= 3000 })

	start := time.Now()
	o, err := cli(t, []string{token}, "deploy", "--pipeline", "p", "--admin", "http://"+addr, v2)
	if err != nil || !strings.Contains(o, "p now runs") {
		t.Fatalf("deploy: %v\n%s", err, o)
	}
	t.Logf("%s", strings.TrimSpace(o))
	// Every input partition's keys reach version 2.
	part := kgo.StickyKeyPartitioner(nil).ForTopic(in)
	inPart := func(r *kgo.Record) int { return part.Partition(&kgo.Record{Key: r.Key}, parts) }
	seen := len(rd.Recs)
	rd.ReadUntil(t, time.Minute, "version 2 on every input partition", func(rs []*kgo.Record) bool {
		got := map[int]bool{}
		for _, r := range rs[seen:] {
			if kafkatest.Header(r, "processor.version") == "2" {
				got[inPart(r)] = true
			}
		}
		return len(got) == parts
	})
	swapped := time.Since(start)
	mark := len(rd.Recs)
	rd.ReadUntil(t, time.Minute, "version 2 counting", func(rs []*kgo.Record) bool { return len(rs) >= mark+2000 })
	total := stop()
	truth := func(k int) int { return stateTruth(total, k) }
	last, counts := lastCounts(t, rd, total)
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	dups := 0
	for kc, c := range counts {
		if c > 1 {
			dups += c - 1
			if dups < 5 {
				t.Errorf("%s appears %d times", kc, c)
			}
		}
	}
	for k := 0; k < stateKeys; k++ {
		if key := fmt.Sprintf("k%d", k); last[key] != truth(k) {
			t.Errorf("key %s: last count %d, want %d", key, last[key], truth(k))
		}
	}
	if len(counts) != total || dups > 0 {
		t.Errorf("not exactly once: %d distinct counts for %d records, %d duplicates", len(counts), total, dups)
	}
	// Per key: version 1's counts, then version 2's; both versions counted.
	version, byVersion := map[string]string{}, map[string]int{}
	for _, r := range rd.Recs {
		v := kafkatest.Header(r, "processor.version")
		if version[string(r.Key)] == "2" && v != "2" {
			t.Fatalf("key %s: a version-%q output (count %s) after a version-2 one", r.Key, v, r.Value)
		}
		version[string(r.Key)] = v
		byVersion[v]++
	}
	if byVersion["1"] == 0 || byVersion["2"] == 0 || len(byVersion) != 2 {
		t.Fatalf("outputs by version: %v", byVersion)
	}
	t.Logf("%d records, exact counts across the swap: %d outputs of version 1, %d of version 2; every partition on version 2 %s after the deploy began",
		total, byVersion["1"], byVersion["2"], swapped.Round(time.Millisecond))
}

// TestStateBadCallsRealBroker: records whose count would store a value over
// state.max_value_bytes (count.pad) and records counting a key of another
// partition than theirs (count.key) go to the dead-letter topic with the
// errno's message; every other record is counted exactly, the records
// after the bad ones too, and the host stays up.
func TestStateBadCallsRealBroker(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	const parts = 4
	kafkatest.CreateTopic(t, brokers, parts, in, out, dlq)
	cfg := stateConfig(t, brokers, n, modules["count"], in, out, dlq, "")
	part := kgo.StickyKeyPartitioner(nil).ForTopic(in)
	partOf := func(k string) int { return part.Partition(&kgo.Record{Key: []byte(k)}, parts) }
	foreign := ""
	for i := 0; foreign == ""; i++ {
		if k := fmt.Sprintf("x%d", i); partOf(k) != partOf("k7") {
			foreign = k
		}
	}
	const half = 50 * stateKeys // good records before and after the bad ones: 100 per key
	kafkatest.Produce(t, brokers, in, half, strconv.Itoa)
	p := startProc(t, "run", "--config", cfg)
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, time.Minute, "the first good records counted", func(rs []*kgo.Record) bool { return len(rs) >= half })
	cl := kafkatest.Client(t, brokers)
	var bad []*kgo.Record
	for i := 0; i < 3; i++ {
		bad = append(bad,
			&kgo.Record{Topic: in, Key: []byte("k3"), Value: []byte(fmt.Sprint("pad-", i)), Headers: []kgo.RecordHeader{{Key: "count.pad", Value: []byte("70000")}}},
			&kgo.Record{Topic: in, Key: []byte("k7"), Value: []byte(fmt.Sprint("foreign-", i)), Headers: []kgo.RecordHeader{{Key: "count.key", Value: []byte(foreign)}}})
	}
	ctx, cancel := ctxTimeout(time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, bad...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, brokers, in, half, strconv.Itoa)

	dl := kafkatest.NewReader(t, brokers, dlq)
	dl.ReadUntil(t, time.Minute, "six dead letters", func(rs []*kgo.Record) bool { return len(rs) >= len(bad) })
	seen := readCounts(t, rd, 2*half) // every key exactly at 100, none above
	dl.ReadFor(time.Second)
	if len(dl.Recs) != len(bad) {
		t.Errorf("%d dead letters, want %d", len(dl.Recs), len(bad))
	}
	want := map[string]string{"k3": "state key or value too large", "k7": "state key outside the record's partition"}
	for _, r := range dl.Recs {
		if e := kafkatest.Header(r, "wasmstream.error"); !strings.Contains(e, want[string(r.Key)]) || want[string(r.Key)] == "" {
			t.Errorf("dead letter %q=%q: error %q, want it to name %q", r.Key, r.Value, e, want[string(r.Key)])
		}
	}
	if _, ok := seen[foreign]; ok {
		t.Errorf("the foreign key %s was counted", foreign)
	}
	if !p.alive() {
		t.Fatal("the host died")
	}
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	t.Logf("%d good records counted exactly; %d dead letters: %q, %q", 2*half, len(dl.Recs), kafkatest.Header(dl.Recs[0], "wasmstream.error"), kafkatest.Header(dl.Recs[1], "wasmstream.error"))
}
