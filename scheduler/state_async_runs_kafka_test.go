//go:build integration

package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestStateAsyncRunsChecksRealKafka is TestStateAsyncRuns on the real
// broker (KAFKA_BROKERS): records decided in their calls and records that
// wait on a state read in one run, retries in place, counts as alone.
func TestStateAsyncRunsChecksRealKafka(t *testing.T) {
	testStateAsyncRuns(t, func(t *testing.T) ([]string, string) {
		return kafkatest.RealBrokers(t), fmt.Sprintf("it-stateasyncruns-%d-", time.Now().UnixNano()%1e9)
	})
}

// TestStateAsyncRunsRealKafka: on the real broker (KAFKA_BROKERS), an
// exactly_once stateful pipeline whose module is asynchronous
// (count-async, ordering key) takes its records in runs — every third
// record counted in its call (count.sync), the others waiting on a state
// read, mixed in the runs — while a second host joins (partitions move to
// it, restored from the changelog), the first leaves, and the second
// restarts on its state directory. The read_committed output has every
// count of every key once, up to the key's number of records, and each
// host's calls ran several records.
func TestStateAsyncRunsRealKafka(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	name := fmt.Sprintf("it-stateasyncruns-%d", time.Now().UnixNano()%1e9)
	in, out, dlq := name+"-in", name+"-out", name+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, out, dlq)
	const n, keys = 1500, 97
	produced := 0
	produce := func() {
		t.Helper()
		recs := make([]*kgo.Record, 0, n)
		for i := 0; i < n; i++ {
			r := &kgo.Record{Topic: in, Key: []byte(fmt.Sprintf("k%d", (produced+i)%keys)), Value: []byte(strconv.Itoa(produced + i))}
			if (produced+i)%3 == 0 {
				r.Headers = []kgo.RecordHeader{{Key: "count.sync"}}
			}
			recs = append(recs, r)
		}
		if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		produced += n
	}
	truth := func() map[string]int {
		w := map[string]int{}
		for i := 0; i < produced; i++ {
			w[fmt.Sprintf("k%d", i%keys)]++
		}
		return w
	}
	dirs := map[string]string{"a": t.TempDir(), "b": t.TempDir()}
	host := func(id string) *Runner {
		return startRunner(t, testConfigWith(t, brokers, name, guestPath(t, "count-async"), in, out, dlq,
			stateConfig(t, brokers, dirs[id], "\n    ordering: key\n    batch_records: 32\n    instances: {min: 1, max: 2}\n    guarantee: exactly_once\n    transactions: {max_records: 5000, interval: 100ms}"),
			"host:\n  id: "+id))
	}
	runsOf := func(r *Runner) (int64, int64) { s := r.Snapshots()[0]; return s.Runs, s.RunRecords }
	check := func(runs, recs int64, who string) {
		t.Helper()
		if runs == 0 || recs < 2*runs {
			t.Errorf("%s: %d runs of %d records: the records were not run in runs", who, runs, recs)
		}
	}
	rd := kafkatest.NewReader(t, brokers, out)

	a := host("a")
	produce()
	countState(t, rd, truth())
	b := host("b")
	kafkatest.Eventually(t, time.Minute, "both hosts own partitions", func() bool {
		return a.Snapshots()[0].Tasks > 0 && b.Snapshots()[0].Tasks > 0 && a.Snapshots()[0].Tasks+b.Snapshots()[0].Tasks == 4
	})
	produce()
	countState(t, rd, truth())
	runs, recs := runsOf(a)
	check(runs, recs, "host a")
	a.Stop(context.Background())
	kafkatest.Eventually(t, time.Minute, "b owns every partition", func() bool { return b.Snapshots()[0].Tasks == 4 })
	produce()
	countState(t, rd, truth())
	runs, recs = runsOf(b)
	check(runs, recs, "host b")
	b.Stop(context.Background())

	b = host("b") // a restart on its state directory
	produce()
	top, seen := countState(t, rd, truth())
	runs, recs = runsOf(b)
	b.Stop(context.Background())
	check(runs, recs, "host b restarted")
	checkCounts(t, top, truth())
	for kc, c := range seen {
		if c != 1 {
			t.Errorf("%s appears %d times", kc, c)
		}
	}
	if len(seen) != produced {
		t.Errorf("%d distinct counts for %d records", len(seen), produced)
	}
	t.Logf("%d records over two hosts, a rebalance and a restart: every count once; the restarted host's calls ran %d records in %d runs", produced, recs, runs)
}
