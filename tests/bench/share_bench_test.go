//go:build integration

package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"

	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/lookupsrv"
)

// shareLimit is the lookups in flight per instance in BenchmarkShare.
const shareLimit = 64

// BenchmarkShare: the I/O-bound lookup scenario of BenchmarkAsyncIO (one
// 10 ms HTTP lookup per record, the lookup Go guest, the service in a
// process of its own, async.max_in_flight 64), consumed through a share
// group (consume: share) against a consumer group, both ordering: none:
//   - partitions=4: one host with 4 instances on each side — the
//     consumer group's one per partition task, the share group's one task
//     (it takes every partition's records) with 4 — so equal lookups in
//     flight (256); the share rows (share.max_records 500, the default,
//     and 2000) report x_group, their rate over the consumer group's of the
//     same run;
//   - partitions=1: hosts 1, 2 and 3 (runners in this process, one share
//     group) on ONE partition, each with one instance: a consumer group
//     keeps one of them busy (its row is the group with one host), a share
//     group all of them; x_1host is the rate over one share host's.
//
// Each row reports rec/s over the drain, cpu_us/rec (the benchmark process:
// every host of the row), and p50/p99 from a paced phase at half the rate.
// On this 2-core machine the hosts share the cores: the rows measure what a
// share group adds per host, not a fleet's gain.
func BenchmarkShare(b *testing.B) {
	brokers := kafkatest.RealBrokers(b)
	srv := lookupsrv.StartProcess(b, wt.RepoRoot(b), ioLatency)
	servicePids = []int{srv.Pid}
	b.Cleanup(func() { servicePids = nil })
	lookup := filepath.Join(b.TempDir(), "lookup.wasm")
	os.WriteFile(lookup, wt.BuildGoGuest(b, "plugins/examples/lookup"), 0o644)
	n := min(records(), 30000)
	// instances: one per partition task; a consume: share pipeline has
	// one task for every partition, sized to the same total.
	keys := func(consume string, instances int) []string {
		return []string{
			fmt.Sprintf(`env: {LOOKUP_URL: "%s/users/"}`, srv.URL),
			fmt.Sprintf(`async: {max_in_flight: %d, http: {allow_hosts: [%q]}}`, shareLimit, srv.Host()),
			"limits: {record_timeout: 30s}", "ordering: none", fmt.Sprintf("instances: {min: %d, max: %d}", instances, instances),
			"consume: " + consume,
		}
	}
	// The smoke run (BENCH_RECORDS) checks the harness with fewer rows.
	rows4 := []string{"group", "share", "share/max_records=2000"}
	hosts1 := []int{1, 2, 3}
	if smoke() {
		rows4 = rows4[:1] // the share rows below cover the share group
	}
	var group float64
	for _, row := range rows4 {
		in := emptyInput(b, brokers, 4)
		consume, _, big := strings.Cut(row, "/")
		b.Run(fmt.Sprintf("partitions=4/%s", row), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				inst := 1
				if consume == "share" {
					inst = 4
				}
				k := keys(consume, inst)
				if big {
					k = append(k, "share: {max_records: 2000}")
				}
				rate := shareRun(b, brokers, lookup, in, n, 1, k)
				if consume == "group" {
					group = rate
				} else if group > 0 {
					b.ReportMetric(rate/group, "x_group")
				}
			}
		})
	}
	type row struct {
		consume string
		hosts   int
	}
	rows1 := []row{{"group", 1}}
	for _, h := range hosts1 {
		rows1 = append(rows1, row{"share", h})
	}
	if smoke() {
		rows1 = []row{{"share", 2}} // one share group over two hosts
	}
	var one float64
	for _, row := range rows1 {
		in := emptyInput(b, brokers, 1)
		b.Run(fmt.Sprintf("partitions=1/%s/hosts=%d", row.consume, row.hosts), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				rate := shareRun(b, brokers, lookup, in, n, row.hosts, keys(row.consume, 1))
				if row.consume == "share" && row.hosts == 1 {
					one = rate
				} else if row.consume == "share" && one > 0 {
					b.ReportMetric(rate/one, "x_1host")
				}
			}
		})
	}
}

// emptyInput creates an input topic of parts partitions, empty: shareRun
// fills it once every host is at work.
func emptyInput(b *testing.B, brokers []string, parts int32) string {
	topic := fmt.Sprintf("bench-in-%d", time.Now().UnixNano())
	kafkatest.CreateTopic(b, brokers, parts, topic)
	return topic
}

// shareRun runs hosts runners of one pipeline over in.
// It feeds in warm-up records until every host has done one (all have
// joined the group and loaded their module), then produces n records and
// returns the drain's records/s: from the start of that produce to n more
// done across the hosts. It reports cpu_us/rec and p50/p99 of a paced phase
// at half that rate.
func shareRun(b *testing.B, brokers []string, module, in string, n, hosts int, keys []string) float64 {
	parts := topicPartitions(b, brokers, in)
	kafkatest.CreateTopic(b, brokers, parts, in+"-out", in+"-dlq")
	group := fmt.Sprintf("bench-share-%d", time.Now().UnixNano())
	y := fmt.Sprintf(`kafka: {brokers: [%q], group: %s}
pipelines:
  - {name: p, module: %s, inputs: [%s], output: %s-out, dead_letter_topic: %s-dlq, retry: {max_attempts: 1}, %s}
`, strings.Join(brokers, ","), group, module, in, in, in, strings.Join(keys, ", "))
	cfgPath := filepath.Join(b.TempDir(), "c.yaml")
	os.WriteFile(cfgPath, []byte(y), 0o644)
	var rs []*scheduler.Runner
	for i := range hosts {
		cfg, err := config.Load(cfgPath, nil, []string{fmt.Sprintf("host.id=share-%d", i), "host.max_instances=256"})
		if err != nil {
			b.Fatal(err)
		}
		r, err := scheduler.NewRunner(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		rs = append(rs, r)
	}
	defer func() {
		for _, r := range rs {
			r.Stop(context.Background())
		}
	}()
	sum := func(f func(scheduler.Snapshot) int64) (s int64) {
		for _, r := range rs {
			s += f(r.Snapshots()[0])
		}
		return s
	}
	for _, r := range rs {
		r.Start()
	}
	deadline := time.Now().Add(2 * time.Minute)
	warm := int64(0)
	for w := 0; ; w++ {
		ready := 0
		for _, r := range rs {
			if r.Snapshots()[0].Done > 0 {
				ready++
			}
		}
		// A consumer group gives one partition to one host: only it works.
		if ready == len(rs) || (ready > 0 && parts == 1 && strings.Contains(y, "consume: group")) {
			break
		}
		if time.Now().After(deadline) {
			var acq []int64
			for _, r := range rs {
				if st := r.ShareStats("p"); st != nil {
					acq = append(acq, st.Acquired.Load())
				}
			}
			b.Fatalf("warm-up: %d of %d hosts did a record (acquired %v)", ready, len(rs), acq)
		}
		produceEven(b, brokers, in, fmt.Sprintf("w%d-", w), 2000, parts)
		warm += 2000
		time.Sleep(200 * time.Millisecond)
	}
	kafkatest.Eventually(b, time.Minute, "warm-up records done", func() bool {
		return sum(func(s scheduler.Snapshot) int64 { return s.Done }) >= warm
	})
	base := warm
	done := startUsage(b)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	start := time.Now()
	go produceEven(b, brokers, in, "u", n, parts)
	busy := map[int]int64{}
	for i, r := range rs {
		busy[i] = r.Snapshots()[0].Done
	}
	for d := int64(0); d < base+int64(n); d = sum(func(s scheduler.Snapshot) int64 { return s.Done }) {
		if time.Since(start) > 10*time.Minute {
			b.Fatalf("drain: %d of %d done", d-base, n)
		}
		time.Sleep(time.Millisecond)
	}
	busyHosts := 0
	for i, r := range rs {
		if r.Snapshots()[0].Done-busy[i] > int64(n/10) {
			busyHosts++ // did more than a tenth of the records
		}
	}
	el := time.Since(start)
	u := done()
	runtime.ReadMemStats(&ms1)
	if o := sum(func(s scheduler.Snapshot) int64 { return s.Outputs }); o < base+int64(n) {
		b.Fatalf("outputs %d, want %d", o, base+int64(n))
	}
	rate := float64(n) / el.Seconds()
	b.ReportMetric(rate, "rec/s")
	if st := rs[0].ShareStats("p"); st != nil && st.Polls.Load() > 0 {
		b.ReportMetric(float64(st.Acquired.Load())/float64(st.Polls.Load()), "recs/poll")
	}
	b.ReportMetric(float64(busyHosts), "busy_hosts")
	b.ReportMetric(float64(u.cpu.Microseconds())/float64(n), "cpu_us/rec")
	b.ReportMetric(float64(u.service.Microseconds())/float64(n), "service_cpu_us/rec")
	// The whole process's allocations (every host, the input's producer
	// included) over the drain.
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(n), "allocs/rec")
	// The paced records go to the same input: a share group shares a
	// partition between members only when they outnumber the partitions
	// of its topics (the broker's simple assignor), so a second topic would
	// take a host away from the input.
	p50, p99 := pacedLatency(b, brokers, in, in+"-out", rate/2)
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99_ms")
	return rate
}

// produceEven produces n records to topic, spread round-robin over its
// parts partitions, keys prefix<i>.
func produceEven(b *testing.B, brokers []string, topic, prefix string, n int, parts int32) {
	cl := kafkatest.Client(b, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	recs := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i) % parts, Key: []byte(fmt.Sprint(prefix, i)), Value: []byte(fmt.Sprintf(`{"i":%d}`, i))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		b.Error(err)
	}
}
