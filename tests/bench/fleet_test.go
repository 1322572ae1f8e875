//go:build integration

package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// BenchmarkFleet: 1, 2 and 3 hosts (runners in this process, distinct
// host ids, one consumer group) on one input of 12, 48 or 96 partitions,
// the uppercase Go guest. For each: the time from starting the hosts to
// every partition assigned (assign_ms), the drain's records/s from then on
// (and as a ratio to one host on the same partitions, x_1host; neither when
// the first hosts had done more than maxBeforeAssigned percent of the input
// by then, before_assigned), then the time for the group to hand
// partitions to a host joining (join_ms) and to take them back from one that
// stops cleanly (leave_ms), both until every partition is owned again.
// CAPACITY.md reads them. On this 2-core machine every host shares the same
// cores: the rows measure the cost of coordination, not the gain of
// scale-out.
func BenchmarkFleet(b *testing.B) {
	brokers := kafkatest.RealBrokers(b)
	module := filepath.Join(b.TempDir(), "uppercase.wasm")
	os.WriteFile(module, wt.BuildGoGuest(b, "plugins/examples/uppercase"), 0o644)
	n := records() / 2
	sizes, hostRows := []int32{12, 48, 96}, []int{1, 2, 3}
	if smoke() {
		sizes, hostRows = []int32{48}, []int{1, 2}
	}
	for _, parts := range sizes {
		var one float64
		for _, hosts := range hostRows {
			b.Run(fmt.Sprintf("partitions=%d/hosts=%d", parts, hosts), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					rate := fleetRun(b, brokers, module, n, parts, hosts)
					if hosts == 1 {
						one = rate
					} else if one > 0 && rate > 0 {
						b.ReportMetric(rate/one, "x_1host")
					}
				}
			})
		}
	}
}

// maxBeforeAssigned is the share of the input, in percent, that the first
// hosts may have done before every host owned partitions for the drain's
// rate to be reported.
const maxBeforeAssigned = 20

// fleetRun measures one fleet; it returns the drain's records/s, or 0 when
// more than maxBeforeAssigned percent of the input was done before every
// host owned partitions.
func fleetRun(b *testing.B, brokers []string, module string, n int, parts int32, hosts int) float64 {
	in := inputOn(b, brokers, n, parts)
	group := fmt.Sprintf("bench-fleet-%d", time.Now().UnixNano())
	y := fmt.Sprintf(`kafka: {brokers: [%q], group: %s, create_topics: true}
pipelines:
  - {name: p, module: %s, inputs: [%s], output: %s-out, dead_letter_topic: %s-dlq, retry: {max_attempts: 1}}
`, strings.Join(brokers, ","), group, module, in, in, in)
	cfgPath := filepath.Join(b.TempDir(), "c.yaml")
	os.WriteFile(cfgPath, []byte(y), 0o644)
	newRunner := func(id int) *scheduler.Runner {
		cfg, err := config.Load(cfgPath, nil, []string{fmt.Sprintf("kafka.topic_partitions=%d", parts), fmt.Sprintf("host.id=fleet-%d", id)})
		if err != nil {
			b.Fatal(err)
		}
		r, err := scheduler.NewRunner(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	owned := func(rs []*scheduler.Runner) (total int, each []int) {
		for _, r := range rs {
			t := r.Snapshots()[0].Tasks
			total += t
			each = append(each, t)
		}
		return total, each
	}
	until := func(what string, rs []*scheduler.Runner, ok func(total int, each []int) bool) time.Duration {
		t0 := time.Now()
		for {
			if ok(owned(rs)) {
				return time.Since(t0)
			}
			if time.Since(t0) > 3*time.Minute {
				total, each := owned(rs)
				b.Fatalf("%s: not after 3 minutes (%d partitions owned: %v)", what, total, each)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	everyOneOwns := func(total int, each []int) bool {
		for _, e := range each {
			if e == 0 {
				return false
			}
		}
		return total == int(parts)
	}
	var rs []*scheduler.Runner
	for i := range hosts {
		rs = append(rs, newRunner(i)) // modules loaded, topics checked
	}
	defer func() {
		for _, r := range rs {
			r.Stop(context.Background())
		}
	}()
	b.ResetTimer()
	for _, r := range rs {
		r.Start()
	}
	doneSum := func() (d int64) {
		for _, r := range rs {
			d += r.Snapshots()[0].Done
		}
		return d
	}
	assign := until("every partition assigned", rs, everyOneOwns)
	// The drain's rate is measured from the moment every host owns its
	// partitions: what the first hosts did before is left out.
	done := startUsage(b)
	first, before := time.Now(), doneSum()
	for d := before; d < int64(n); d = doneSum() {
		if time.Since(first) > 10*time.Minute {
			b.Fatalf("drain: %d of %d done", d, n)
		}
		time.Sleep(time.Millisecond)
	}
	el := time.Since(first)
	u := done()
	b.StopTimer()
	rate := float64(int64(n)-before) / el.Seconds()
	b.ReportMetric(float64(before)/float64(n), "before_assigned")
	// When the hosts that got partitions first drained most of the input
	// before the last one got any, the rest is a tail too short to time: a
	// few records over a few milliseconds, or none at all. Such a row
	// reports no rate (and gives none to compare with one host).
	measured := before <= int64(n)*maxBeforeAssigned/100
	if !measured {
		rate = 0
	}
	joiner := newRunner(hosts)
	rs = append(rs, joiner)
	joiner.Start()
	join := until("a joining host given partitions", rs, everyOneOwns)
	leaving := rs[0]
	rs = rs[1:] // the deferred stop stops the others
	leaving.Stop(context.Background())
	leave := until("the partitions of a host that stopped taken back", rs, func(total int, _ []int) bool { return total == int(parts) })
	if measured {
		b.ReportMetric(rate, "rec/s")
		b.ReportMetric(float64(u.cpu.Microseconds())/float64(int64(n)-before), "cpu_us/rec")
	}
	b.ReportMetric(float64(assign.Milliseconds()), "assign_ms")
	b.ReportMetric(float64(join.Milliseconds()), "join_ms")
	b.ReportMetric(float64(leave.Milliseconds()), "leave_ms")
	return rate
}
