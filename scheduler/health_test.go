package scheduler

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// A partition whose records wait and none of which is done for stallAfter
// is stalled, with where its records wait; one that moves, or has nothing
// waiting, is not.
func TestStallTracker(t *testing.T) {
	var s stallTracker
	t0 := time.Unix(1000, 0)
	done := map[tp]int64{}
	get := func(k tp) int64 { return done[k] }
	g := func(part int32, lag int64, inFlight, queued, busy int) partition.TaskGauges {
		return partition.TaskGauges{Topic: "in", Partition: part, Lag: lag, InFlight: inFlight, Queued: queued, Busy: busy}
	}
	gs := []partition.TaskGauges{
		g(0, 50, 0, 0, 0), // records wait on the broker
		g(1, 50, 8, 0, 0), // processed, not acknowledged
		g(2, 50, 8, 2, 1), // in the module
		g(3, 0, 0, 0, 0),  // idle: nothing waits
		g(4, 50, 0, 0, 0), // moves
		g(5, 0, 0, 0, 0),  // no lag known, its leader out of reach
	}
	sick := map[tp]bool{{Topic: "in", Partition: 5}: true}
	at := func(d time.Duration) []StalledPartition {
		done[tp{Topic: "in", Partition: 4}] += 10
		return s.stalled(gs, get, func(k tp) bool { return sick[k] }, t0.Add(d))
	}
	if st := at(0); len(st) != 0 {
		t.Fatalf("stalled at the first look: %+v", st)
	}
	if st := at(stallAfter - time.Second); len(st) != 0 {
		t.Fatalf("stalled before %v: %+v", stallAfter, st)
	}
	st := at(stallAfter)
	want := []StalledPartition{{"in", 0, StallFetching, stallAfter}, {"in", 1, StallProducing, stallAfter}, {"in", 2, StallProcessing, stallAfter}, {"in", 5, StallFetching, stallAfter}}
	if fmt.Sprint(st) != fmt.Sprint(want) {
		t.Fatalf("stalled %+v, want %+v", st, want)
	}
	// Partition 0 moves again; partition 1's records are acknowledged and
	// nothing more waits there; partition 5's leader is healthy again.
	done[tp{Topic: "in", Partition: 0}]++
	gs[1] = g(1, 0, 0, 0, 0)
	sick[tp{Topic: "in", Partition: 5}] = false
	if st := at(stallAfter + time.Second); len(st) != 1 || st[0].Partition != 2 {
		t.Fatalf("after partitions 0, 1 and 5 moved: %+v, want only partition 2", st)
	}
	// A partition that looked idle (no lag known, nothing in flight) while
	// its fetch hung: once its leader meets errors it counts from its last
	// record done, not from the first error.
	gs = append(gs, g(6, 0, 0, 0, 0))
	at(stallAfter + 2*time.Second)
	at(2*stallAfter + 2*time.Second) // a second before the first error: looks idle
	sick[tp{Topic: "in", Partition: 6}] = true
	if st := at(2*stallAfter + 3*time.Second); len(st) != 3 || st[2].Partition != 6 || st[2].Reason != StallFetching || st[2].For != stallAfter+time.Second {
		t.Fatalf("after partition 6's leader met errors: %+v, want partitions 0, 2 and 6 (fetching, %v)", st, stallAfter+time.Second)
	}
	// A partition no longer owned is forgotten.
	gs = gs[:1]
	at(stallAfter + 2*time.Second)
	if len(s.marks) != 1 {
		t.Fatalf("%d partitions tracked after the others were revoked, want 1", len(s.marks))
	}
}

// The client's errors are counted per broker and shown in the snapshot
// (the status line) and on /metrics as
// wasmstream_kafka_broker_errors_total{broker,kind}, beside
// wasmstream_task_stalled_ratio{reason}; with its broker gone
// the pipeline's partition, its records waiting, shows as stalled
// fetching or producing, never processing.
func TestBrokerErrorsAndStalls(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			c.Close()
		}
	}()
	brokers := c.ListenAddrs()
	cl := kafkatest.Client(t, brokers)
	produce := func(n int) {
		for i := 0; i < n; i++ {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "in", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	produce(10)
	cfg := testConfig(t, brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq")
	r := newRunner(t, cfg)
	handler := servedMetricsOf(t, r)
	r.Start()
	defer r.Stop(context.Background())
	kafkatest.Eventually(t, time.Minute, "every record done", func() bool { return r.Snapshots()[0].Done == 10 })
	if s := r.Snapshots()[0]; len(s.BrokerErrors) != 0 || len(s.Stalled) != 0 {
		t.Fatalf("a healthy broker: errors %+v, stalled %+v", s.BrokerErrors, s.Stalled)
	}

	// The broker goes away while the task still believes records wait
	// (the tracker is handed the gauges of a partition with lag).
	c.Close()
	closed = true
	kafkatest.Eventually(t, time.Minute, "connection errors counted for broker 0", func() bool {
		for _, b := range r.Snapshots()[0].BrokerErrors {
			if b.Broker == "0" && b.Connect > 0 && b.LastError != "" {
				return true
			}
		}
		return false
	})
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	m := regexp.MustCompile(`(?m)^wasmstream_kafka_broker_errors_total\{[^}]*broker="0"[^}]*kind="connect"[^}]*\} (\d+)$`).FindStringSubmatch(body)
	if m == nil || m[1] == "0" {
		t.Fatalf("/metrics has no connect errors of broker 0:\n%s", grepLines(body, "broker_errors"))
	}
	if !strings.Contains(body, `wasmstream_task_stalled_ratio{`) {
		t.Fatalf("/metrics has no wasmstream_task_stalled_ratio:\n%s", grepLines(body, "stalled"))
	}

	// The partition stalls on the broker's side: nothing waits that the
	// host can see (no lag, nothing in flight), but its leader is out of
	// reach, so whatever waits there cannot be fetched.
	p := r.pipelines[0]
	gs := p.taskGauges(false)
	if len(gs) != 1 || gs[0].Lag != 0 || gs[0].InFlight != 0 {
		t.Fatalf("tasks %+v, want one with nothing waiting", gs)
	}
	now := time.Now()
	p.counters.stall.stalled(gs, p.counters.partitionDone, p.leaderSick(now), now)
	st := p.counters.stall.stalled(gs, p.counters.partitionDone, p.leaderSick(now), now.Add(stallAfter))
	if len(st) != 1 || st[0].Reason != StallFetching {
		t.Fatalf("stalled %+v, want partition 0 fetching", st)
	}
}

func TestCountableBrokerErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{fmt.Errorf("read: %w", kgo.ErrClientClosed), false},
		{errors.New("connection reset by peer"), true},
	} {
		if got := countable(c.err); got != c.want {
			t.Errorf("countable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
