//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

func produceRounds(t *testing.T, brokers []string, topic string, n int, key func(int) string, rounds func(int) int, size int) {
	t.Helper()
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100000))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pad := strings.Repeat("x", size)
	var errs = make(chan error, 1)
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(key(i)), Value: []byte(fmt.Sprintf("%d:%s", i, pad)),
			Headers: []kgo.RecordHeader{{Key: "rounds", Value: []byte(strconv.Itoa(rounds(i)))}}}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errs <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}

type hashOut struct {
	Partition int32
	Offset    int64
}

// TestKeyOrderRealKafka: ordering key with a pool of instances on the real
// broker, many keys plus one hot key carrying half the records, latency
// varying per record: for each key, output offsets strictly increase.
func TestKeyOrderRealKafka(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, out, dlq)
	const count = 20000
	rng := rand.New(rand.NewSource(3))
	lat := make([]int, count)
	for i := range lat {
		lat[i] = 1 + rng.Intn(400)
	}
	produceRounds(t, brokers, in, count, func(i int) string {
		if i%2 == 0 {
			return "hot"
		}
		return fmt.Sprintf("key-%d", i%500)
	}, func(i int) int { return lat[i] }, 10)
	cfgPath := writeConfig(t, brokers, n, modules["hash"], in, out, dlq, "")
	cfg, err := config.Load(cfgPath, nil, []string{})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Pipelines[0].Ordering = config.OrderKey
	cfg.Pipelines[0].Instances = config.Instances{Min: 1, Max: 4, IdleTimeout: time.Second}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := scheduler.NewRunner(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	defer r.Stop(context.Background())
	maxBusy := 0
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, 3*time.Minute, "every output", func(rs []*kgo.Record) bool {
		maxBusy = max(maxBusy, r.Snapshots()[0].Busy)
		return len(rs) >= count
	})
	last := map[string]int64{}
	for _, rec := range rd.Recs {
		var h hashOut
		if err := json.Unmarshal(rec.Value, &h); err != nil {
			t.Fatal(err)
		}
		k := string(rec.Key)
		if prev, ok := last[k]; ok && h.Offset <= prev {
			t.Fatalf("key %s: offset %d after %d", k, h.Offset, prev)
		}
		last[k] = h.Offset
	}
	if len(rd.Recs) != count || maxBusy < 2 {
		t.Fatalf("%d outputs, at most %d instances busy", len(rd.Recs), maxBusy)
	}
	t.Logf("%d records, %d keys (one hot): per-key order held; up to %d instances busy at once", count, len(last), maxBusy)
}

// TestPoolRebalance: two processes running pools (ordering key) in one
// group; one joins mid-run, one leaves mid-run: every input is in the output,
// and records that finished out of order are not processed twice.
func TestPoolRebalance(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 6, in, out, dlq)
	count := 60000
	produceRounds(t, brokers, in, count, func(i int) string { return fmt.Sprintf("key-%d", i%1000) }, func(i int) int { return 1 + i%50 }, 10)
	cfg := writeConfig(t, brokers, n, modules["hash"], in, out, dlq, "")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(b), "    limits:", "    ordering: key\n    instances: {min: 1, max: 3}\n    limits:", 1)), 0o644)
	a := startProc(t, "run", "--config", cfg)
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, 2*time.Minute, "some outputs", func(rs []*kgo.Record) bool { return len(rs) >= count/10 })
	bp := startProc(t, "run", "--config", cfg)
	// The first host can drain the whole input before the group gives the
	// second one its partitions: keep input coming until the second works.
	kafkatest.Eventually(t, 2*time.Minute, "the second host processing", keepProducing(func() bool { return doneCount(bp.logText(), "status") > 0 }, func() {
		produceRounds(t, brokers, in, 5000, func(i int) string { return fmt.Sprintf("key-%d", i%1000) }, func(i int) int { return 1 + i%50 }, 10)
		count += 5000
	}))
	if code := a.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	// Every input ends in the output or, if it faulted (a deadline on a
	// loaded machine), the dead-letter topic — exactly once across the two.
	dl := kafkatest.NewReader(t, brokers, dlq)
	readOutcomes(t, rd, dl, count, func(r *kgo.Record) int64 {
		var h hashOut
		json.Unmarshal(r.Value, &h)
		return int64(h.Partition)<<40 | h.Offset
	}, func(r *kgo.Record) int64 {
		var p, o int64
		fmt.Sscan(kafkatest.Header(r, scheduler.HeaderOriginalPartition), &p)
		fmt.Sscan(kafkatest.Header(r, scheduler.HeaderOriginalOffset), &o)
		return p<<40 | o
	})
	if code := bp.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	rd.ReadFor(time.Second)
	dl.ReadFor(time.Second)
	doneA, doneB := doneCount(a.logText(), "stopped"), doneCount(bp.logText(), "stopped")
	t.Logf("host A %d, host B %d records; %d outputs and %d dead letters for %d inputs", doneA, doneB, len(rd.Recs), len(dl.Recs), count)
	if len(rd.Recs)+len(dl.Recs) != count || doneA+doneB != count {
		t.Fatalf("%d duplicates across the handoff", len(rd.Recs)+len(dl.Recs)-count)
	}
}

// killRun runs ordering none with one record stuck (it loops until its
// deadline) and SIGKILLs the host halfway; it returns how many records the
// restarted host processed again.
func killRun(t *testing.T, recordDone bool) (dups, skipped int) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 1, in, out, dlq)
	const count = 60000
	kafkatest.Produce(t, brokers, in, count, func(i int) string {
		if i == 100 {
			return `{"fault":"loop"}`
		}
		return fmt.Sprintf(`{"i":%d}`, i)
	})
	cfg := writeConfig(t, brokers, n, modules["enrich"], in, out, dlq, fmt.Sprintf("kafka: {record_done_offsets: %v}\n", recordDone))
	b, _ := os.ReadFile(cfg)
	y := strings.Replace(string(b), "    limits:", "    ordering: none\n    instances: {min: 3, max: 3}\n    limits:", 1)
	y = strings.Replace(y, "record_timeout: 10s", "record_timeout: 20s", 1)
	// The extra kafka section above would be a duplicate key: merge it.
	y = strings.Replace(y, "kafka: {record_done_offsets: "+fmt.Sprint(recordDone)+"}\n", "", 1)
	y = strings.Replace(y, "  commit_interval: 200ms", fmt.Sprintf("  commit_interval: 200ms\n  record_done_offsets: %v", recordDone), 1)
	os.WriteFile(cfg, []byte(y), 0o644)
	p1 := startProc(t, "run", "--config", cfg)
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, 2*time.Minute, "half the outputs", func(rs []*kgo.Record) bool { return len(rs) >= count/2 })
	time.Sleep(500 * time.Millisecond) // let a commit carry what is done
	p1.kill(t)
	p2 := startProc(t, "run", "--config", cfg)
	seen := map[string]int{}
	counted := 0
	rd.ReadUntil(t, 3*time.Minute, "every healthy input in the output", func(rs []*kgo.Record) bool {
		for _, r := range rs[counted:] {
			var doc struct{ I int }
			json.Unmarshal(r.Value, &doc)
			seen[fmt.Sprint(doc.I)]++
		}
		counted = len(rs)
		return len(seen) >= count-1
	})
	dl := kafkatest.NewReader(t, brokers, dlq)
	dl.ReadUntil(t, time.Minute, "the stuck record dead-lettered", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	if code := p2.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for i := 0; i < count; i++ {
		if i != 100 && seen[fmt.Sprint(i)] == 0 {
			t.Fatalf("input %d lost", i)
		}
	}
	return len(rd.Recs) - (count - 1), doneCountKey(p2.logText(), "stopped", "skipped")
}

// TestKillWithDoneOffsets: SIGKILL mid-run with ordering none and a record
// holding the watermark: nothing is lost either way, and recording done
// offsets in the commit metadata cuts the records processed again.
func TestKillWithDoneOffsets(t *testing.T) {
	without, _ := killRun(t, false)
	with, skipped := killRun(t, true)
	t.Logf("records processed again after SIGKILL: %d without done offsets, %d with (%d skipped on restart)", without, with, skipped)
	if with >= without || skipped == 0 {
		t.Fatalf("done offsets did not cut duplicates: %d with, %d without, %d skipped", with, without, skipped)
	}
}

// doneCountKey returns the last "<key>=N" on a log line with msg=<msg>.
func doneCountKey(log, msg, key string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, "msg="+msg+" ") {
			continue
		}
		if i := strings.Index(line, " "+key+"="); i >= 0 {
			fmt.Sscan(line[i+len(key)+2:], &n)
		}
	}
	return n
}

// TestCommitMetadataUnderLimitRealKafka: an adversarial done set (every other
// offset over a wide range) encodes under 4096 bytes and the real broker
// accepts and returns it intact, while metadata one byte over its default
// limit is refused — the limit the encoder respects is real.
func TestCommitMetadataUnderLimitRealKafka(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	topic := n + "-t"
	kafkatest.CreateTopic(t, brokers, 1, topic)
	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	meta, covered := scheduler.EncodeDoneOffsets(1000, everyOther(1001, 200000), 4096)
	if len(meta) > 4096 || covered == 0 {
		t.Fatalf("%d bytes, %d covered", len(meta), covered)
	}
	commit := func(group, meta string) error {
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: 1000, LeaderEpoch: -1, Metadata: meta})
		resp, err := adm.CommitOffsets(ctx, group, os)
		if err != nil {
			return err
		}
		return resp.Error()
	}
	if err := commit(n+"-ok", meta); err != nil {
		t.Fatalf("broker refused %d bytes of metadata: %v", len(meta), err)
	}
	got, err := adm.FetchOffsets(ctx, n+"-ok")
	if err != nil {
		t.Fatal(err)
	}
	o, _ := got.Lookup(topic, 0)
	if o.Metadata != meta {
		t.Fatal("metadata changed on the broker")
	}
	if c, err := scheduler.DecodeDoneOffsets(o.Metadata, o.At); err != nil || c != covered {
		t.Fatalf("decoded %d done offsets (%v), encoded %d", c, err, covered)
	}
	if err := commit(n+"-big", strings.Repeat("x", 4097)); err == nil || !strings.Contains(err.Error(), "OFFSET_METADATA_TOO_LARGE") {
		t.Fatalf("4097 bytes of metadata: %v", err)
	}
	t.Logf("%d bytes of metadata carry %d of %d done offsets (every other offset); 4097 bytes are refused", len(meta), covered, 100000)
}

func everyOther(from, to int64) []int64 {
	var d []int64
	for o := from; o < to; o += 2 {
		d = append(d, o)
	}
	return d
}

// TestRSSBoundedSlowProcessor: a slow processor under fast input
// (max_in_flight_bytes 4 MiB per task, 4 tasks). The host pauses fetching, so
// its resident memory stays bounded while the topic holds far more than that.
func TestRSSBoundedSlowProcessor(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, out, dlq)
	const count, size = 300000, 1000 // ~300 MB of input
	produceRounds(t, brokers, in, count, func(i int) string { return strconv.Itoa(i) }, func(int) int { return 200 }, size)
	cfg := writeConfig(t, brokers, n, modules["hash"], in, out, dlq, "")
	b, _ := os.ReadFile(cfg)
	os.WriteFile(cfg, []byte(strings.Replace(string(b), "    limits:", "    max_in_flight_bytes: 4194304\n    limits:", 1)), 0o644)
	// GOMEMLIMIT, as a deployment would set it, makes the Go collector return
	// garbage early, so RSS reflects what the host holds. Without it the same
	// run peaks near 195 MiB (GC headroom), still far below the input.
	p := startProcEnv(t, []string{"GOMEMLIMIT=100MiB"}, "run", "--config", cfg)
	peak := 0
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) && p.alive() {
		peak = max(peak, rssKiB(p.cmd.Process.Pid))
		time.Sleep(100 * time.Millisecond)
	}
	done := doneCount(p.logText(), "status")
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	t.Logf("peak RSS %d MiB over 20 s with %d MB of input waiting; %d records done meanwhile", peak/1024, count*size/1000000, done)
	if done >= count {
		t.Fatal("the processor was not slower than the input: the test proves nothing")
	}
	if peak > 220*1024 {
		t.Fatalf("peak RSS %d MiB: memory is not bounded", peak/1024)
	}
}

func rssKiB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			var kb int
			fmt.Sscan(strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:")), &kb)
			return kb
		}
	}
	return 0
}
