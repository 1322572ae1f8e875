//go:build integration

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/faultproxy"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// The fault tests of this file run on the 3-node cluster the test command
// starts once for all of them (bash tests/kafka/kafka.sh cluster 3):
// replication factor 3, min.insync.replicas 2. The host under test reaches
// the brokers through the fault proxy (KAFKA_CLUSTER_PROXIED); the loads,
// the checkers and the tests' own admin requests go direct
// (KAFKA_CLUSTER_BROKERS), so a fault between the host and a broker is the
// host's alone. Each test leaves every node running and the proxy healed.

// faultCluster is the shared 3-node cluster.
type faultCluster struct {
	brokers []string // direct: loads, checkers, admin
	proxied []string // through the fault proxy: the host under test
	proxy   faultproxy.Control
	dir     string // KAFKA_CLUSTER_DIR, for kafka.sh kill/start-broker
	script  string
	nodes   int32
}

const clusterParts = 4

func theCluster(t *testing.T) *faultCluster {
	t.Helper()
	env := func(k string) string {
		v := os.Getenv(k)
		if v == "" {
			t.Fatalf("%s is not set: the fault tests need the 3-node cluster that `make test` starts (eval \"$(bash tests/kafka/kafka.sh cluster 3)\"; export KAFKA_CLUSTER_BROKERS KAFKA_CLUSTER_PROXIED KAFKA_CLUSTER_PROXY KAFKA_CLUSTER_DIR)", k)
		}
		return v
	}
	c := &faultCluster{
		brokers: strings.Split(env("KAFKA_CLUSTER_BROKERS"), ","),
		proxied: strings.Split(env("KAFKA_CLUSTER_PROXIED"), ","),
		proxy:   faultproxy.Control{Addr: env("KAFKA_CLUSTER_PROXY")},
		dir:     env("KAFKA_CLUSTER_DIR"),
		script:  wt.RepoRoot(t) + "/tests/kafka/kafka.sh",
	}
	c.nodes = int32(len(c.brokers))
	if err := c.proxy.Heal(); err != nil {
		t.Fatalf("fault proxy: %v", err)
	}
	t.Cleanup(func() {
		if err := c.proxy.Heal(); err != nil {
			t.Errorf("fault proxy: %v", err)
		}
		// A node a failed test left down is started again for the next.
		for n := int32(1); n <= c.nodes; n++ {
			if !c.up(n) {
				c.startBroker(t, n)
			}
		}
	})
	return c
}

// ctl runs kafka.sh on the cluster (kill N, start-broker N, ...).
func (c *faultCluster) ctl(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("bash", append([]string{c.script}, args...)...)
	cmd.Env = append(os.Environ(), "KAFKA_CLUSTER_DIR="+c.dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kafka.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
}

// startBroker starts node n on its data and waits until it serves and
// every partition of the cluster has all its replicas in sync again (asked
// here: kafka.sh would start a JVM per try).
func (c *faultCluster) startBroker(t *testing.T, n int32) {
	t.Helper()
	c.ctl(t, "start-broker", strconv.Itoa(int(n)), "--no-wait")
	adm := c.admin(t)
	lagging := "not registered"
	deadline := time.Now().Add(3 * time.Minute)
	for !c.inSync(adm, n, &lagging) {
		if !c.up(n) {
			t.Fatalf("node %d exited after its start", n)
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %d not back in sync within 3 min: %s", n, lagging)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// inSync reports whether node n is registered and every partition has all
// its replicas in sync; if not, lagging says what is not.
func (c *faultCluster) inSync(adm *kadm.Client, n int32, lagging *string) bool {
	ctx, cancel := ctxTimeout(5 * time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx)
	if err != nil {
		*lagging = err.Error()
		return false
	}
	if !slices.ContainsFunc(md.Brokers, func(b kadm.BrokerDetail) bool { return b.NodeID == n }) {
		*lagging = "not registered"
		return false
	}
	for _, td := range md.Topics {
		for _, pd := range td.Partitions {
			if pd.Err != nil || len(pd.ISR) < len(pd.Replicas) {
				*lagging = fmt.Sprintf("%s/%d: ISR %v of replicas %v", td.Topic, pd.Partition, pd.ISR, pd.Replicas)
				return false
			}
		}
	}
	return true
}

// up reports whether node n's process runs.
func (c *faultCluster) up(n int32) bool {
	b, err := os.ReadFile(fmt.Sprintf("%s/node%d/broker.pid", c.dir, n))
	if err != nil {
		return false
	}
	pid := strings.TrimSpace(string(b))
	_, err = os.Stat("/proc/" + pid)
	return err == nil
}

func (c *faultCluster) admin(t *testing.T) *kadm.Client {
	return kadm.NewClient(kafkatest.Client(t, c.brokers))
}

// createTopics creates topics of clusterParts partitions, partition p's
// replicas on nodes p%3+1, then the next two: input and output partition p
// share a preferred leader, so a fault of one node touches a known set of
// partitions. They are deleted when the test ends.
func (c *faultCluster) createTopics(t *testing.T, topics ...string) {
	t.Helper()
	kafkatest.DeleteAtEnd(t, c.brokers, func(topic string) bool { return slices.Contains(topics, topic) })
	cl := kafkatest.Client(t, c.brokers)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	for _, topic := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		for p := int32(0); p < clusterParts; p++ {
			a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
			a.Partition = p
			for r := int32(0); r < c.nodes; r++ {
				a.Replicas = append(a.Replicas, (p+r)%c.nodes+1)
			}
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		}
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := ctxTimeout(time.Minute)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != 0 {
			t.Fatalf("create %s: error code %d", rt.Topic, rt.ErrorCode)
		}
	}
}

// leader is the node leading topic's partition.
func (c *faultCluster) leader(t *testing.T, topic string, partition int32) int32 {
	t.Helper()
	var leader int32 = -1
	kafkatest.Eventually(t, time.Minute, fmt.Sprintf("a leader of %s/%d", topic, partition), func() bool {
		ctx, cancel := ctxTimeout(10 * time.Second)
		defer cancel()
		md, err := c.admin(t).Metadata(ctx, topic)
		if err != nil {
			return false
		}
		if p, ok := md.Topics[topic].Partitions[partition]; ok && p.Err == nil && p.Leader >= 0 {
			leader = p.Leader
			return true
		}
		return false
	})
	return leader
}

// groupCoordinator and txnCoordinator find a coordinator (FindCoordinator).
func (c *faultCluster) groupCoordinator(t *testing.T, group string) int32 {
	t.Helper()
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	r := c.admin(t).FindGroupCoordinators(ctx, group)
	if err := r.Error(); err != nil {
		t.Fatalf("find the coordinator of group %s: %v", group, err)
	}
	return r[group].NodeID
}

func (c *faultCluster) txnCoordinator(t *testing.T, id string) int32 {
	t.Helper()
	ctx, cancel := ctxTimeout(30 * time.Second)
	defer cancel()
	r := c.admin(t).FindTxnCoordinators(ctx, id)
	if err := r.Error(); err != nil {
		t.Fatalf("find the coordinator of transactional id %s: %v", id, err)
	}
	return r[id].NodeID
}

// clusterLoad produces perTick records (key "k<i%stateKeys>", value i, as
// the count checker stateTruth expects) every 50 ms to topic until stop,
// which returns how many were produced (each acknowledged by
// min.insync.replicas). Keys are placed by the default partitioner, which
// the host's output partitioner shares: an input of partition p has its
// output on partition p.
func clusterLoad(t *testing.T, brokers []string, topic string, perTick int) (stop func() int) {
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
			recs := make([]*kgo.Record, perTick)
			for j := range recs {
				recs[j] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", (base+j)%stateKeys)), Value: []byte(strconv.Itoa(base + j))}
			}
			ctx, cancel := ctxTimeout(2 * time.Minute)
			err := cl.ProduceSync(ctx, recs...).FirstErr()
			cancel()
			if err != nil {
				t.Errorf("load: produce: %v", err)
				return
			}
			produced.Add(int64(len(recs)))
		}
	}()
	var once sync.Once
	stop = func() int { once.Do(func() { close(quit); <-done }); return int(produced.Load()) }
	t.Cleanup(func() { stop() }) // before the client closes
	return stop
}

// outWatch reads an output topic (read_committed) as it grows and keeps,
// per partition, how many outputs came and when the last did, and the
// longest time without any output.
type outWatch struct {
	mu      sync.Mutex
	n       [clusterParts]int
	last    [clusterParts]time.Time
	lastAny time.Time
	gap     time.Duration
	gapAt   time.Time
	cancel  context.CancelFunc
	done    chan struct{}
	host    *proc // the host under test: progress fails at once if it exits
}

func watchOutputs(t *testing.T, brokers []string, topic string) *outWatch {
	cl := kafkatest.Client(t, brokers, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	w := &outWatch{cancel: cancel, done: make(chan struct{}), lastAny: time.Now()}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			w.mu.Lock()
			got := false
			fs.EachRecord(func(r *kgo.Record) {
				got = true
				w.n[r.Partition]++
				w.last[r.Partition] = now
			})
			if got {
				if g := now.Sub(w.lastAny); g > w.gap {
					w.gap, w.gapAt = g, now
				}
				w.lastAny = now
			}
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *outWatch) stop() {
	w.cancel()
	<-w.done
}

func (w *outWatch) total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := 0
	for _, n := range w.n {
		s += n
	}
	return s
}

func (w *outWatch) counts() [clusterParts]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// longestGap is the longest time without an output so far.
func (w *outWatch) longestGap() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gap
}

// progress waits until n more outputs came, failing after timeout.
func (w *outWatch) progress(t *testing.T, n int, timeout time.Duration, what string) time.Duration {
	t.Helper()
	t0, from := time.Now(), w.total()
	kafkatest.Eventually(t, timeout, fmt.Sprintf("%d more outputs %s (had %d)", n, what, from), func() bool {
		if w.host != nil && !w.host.alive() {
			t.Fatalf("wasmstream exited while waiting for %d more outputs %s", n, what)
		}
		return w.total() >= from+n
	})
	return time.Since(t0)
}

// checkOutputs reads out (read_committed) until each of count inputs
// (values 0..count-1, upper-cased unchanged) is there and 3 s more; it
// fails on a loss, and on a duplicate when exact. It returns the number of
// duplicates.
func checkOutputs(t *testing.T, brokers []string, out string, count int, exact bool) int {
	t.Helper()
	rd := kafkatest.NewReader(t, brokers, out)
	seen := make([]int, count)
	distinct, counted := 0, 0
	read := func(rs []*kgo.Record) {
		for _, r := range rs[counted:] {
			v, err := strconv.Atoi(string(r.Value))
			if err != nil || v < 0 || v >= count {
				t.Fatalf("output %q is no input of this run", r.Value)
			}
			if seen[v] == 0 {
				distinct++
			}
			seen[v]++
		}
		counted = len(rs)
	}
	rd.ReadUntil(t, 3*time.Minute, fmt.Sprintf("every one of %d inputs in the output", count), func(rs []*kgo.Record) bool {
		read(rs)
		return distinct >= count
	})
	rd.ReadFor(3 * time.Second)
	read(rd.Recs)
	dups := len(rd.Recs) - count
	if exact && dups > 0 {
		for v, n := range seen {
			if n > 1 {
				t.Errorf("input %d appears %d times", v, n)
				break
			}
		}
		t.Fatalf("not exactly once: %d duplicates among %d outputs", dups, len(rd.Recs))
	}
	return dups
}

// TestClusterKills: under a small load, SIGKILL of the node leading the
// input partitions, then of the one leading the output partitions, then of
// the group coordinator, then (exactly_once) of the transaction
// coordinator, one at a time, the node restarted and back in sync after
// each. at_least_once: 0 lost; exactly_once: 0 lost, 0 duplicates; the
// count example under exactly_once: every count of every key once.
func TestClusterKills(t *testing.T) {
	for _, mode := range []string{"at_least_once", "exactly_once", "state_exactly_once"} {
		t.Run(mode, func(t *testing.T) {
			c := theCluster(t)
			n := names(t)
			in, out, dlq := n+"-in", n+"-out", n+"-dlq"
			c.createTopics(t, in, out, dlq)
			module, keys := modules["uppercase"], ""
			if mode != "at_least_once" {
				keys = eosKeys
			}
			cfg := writeConfig(t, c.proxied, n, module, in, out, dlq, "")
			if mode == "state_exactly_once" {
				cfg = stateConfig(t, c.proxied, n, modules["count"], in, out, dlq, eosKeys)
			} else {
				replace(t, cfg, "    retry: {max_attempts: 1}\n", "    retry: {max_attempts: 1}\n"+keys)
			}
			stop := clusterLoad(t, c.brokers, in, 20) // 400 records/s
			w := watchOutputs(t, c.brokers, out)
			p := startProc(t, "run", "--config", cfg)
			w.host = p
			w.progress(t, 1000, 2*time.Minute, "before the first kill")

			group := n + ".p"
			victims := []struct {
				what string
				node func() int32
			}{
				{"the leader of input partition 0", func() int32 { return c.leader(t, in, 0) }},
				{"the leader of output partition 1", func() int32 { return c.leader(t, out, 1) }},
				{"the group coordinator", func() int32 { return c.groupCoordinator(t, group) }},
			}
			if mode != "at_least_once" {
				victims = append(victims, struct {
					what string
					node func() int32
				}{"the transaction coordinator", func() int32 { return c.txnCoordinator(t, group+".host-0") }})
			}
			for _, v := range victims {
				node := v.node()
				c.ctl(t, "kill", strconv.Itoa(int(node)))
				moved := w.progress(t, 1000, 2*time.Minute, fmt.Sprintf("after the SIGKILL of %s (node %d)", v.what, node))
				t0 := time.Now()
				c.startBroker(t, node)
				t.Logf("SIGKILL of %s (node %d): 1000 more outputs %v after it; node back in sync in %v", v.what, node, moved.Round(100*time.Millisecond), time.Since(t0).Round(100*time.Millisecond))
				if !p.alive() {
					t.Fatalf("wasmstream exited after the SIGKILL of %s", v.what)
				}
			}
			count := stop()
			gap := w.longestGap()
			switch mode {
			case "state_exactly_once":
				rd := kafkatest.NewReader(t, c.brokers, out)
				seen := readCounts(t, rd, count)
				dups, total := 0, 0
				for _, cs := range seen {
					for _, k := range cs {
						total++
						dups += k - 1
					}
				}
				if total != count || dups > 0 {
					t.Fatalf("not exactly once: %d distinct counts for %d records, %d duplicates", total, count, dups)
				}
				t.Logf("%d records, %d node kills: every count of every key once; longest output gap %v", count, len(victims), gap.Round(100*time.Millisecond))
			default:
				dups := checkOutputs(t, c.brokers, out, count, mode == "exactly_once")
				t.Logf("%s: %d records, %d node kills: 0 lost, %d duplicates; longest output gap %v", mode, count, len(victims), dups, gap.Round(100*time.Millisecond))
			}
			if code := p.stop(t, time.Minute); code != 0 {
				t.Fatalf("exit code %d after SIGTERM", code)
			}
			if mode != "at_least_once" {
				log := p.logText()
				t.Logf("transactions whose end was unconfirmed and settled: %d (of them committed after all: %d); aborted: %d; the pipeline rebuilt with a new client (its producer ID fatal after an end, or fenced): %d",
					strings.Count(log, "unconfirmed transaction settled"), strings.Count(log, "the unconfirmed transaction had committed"),
					strings.Count(log, "transaction aborted;"), strings.Count(log, "pipeline rebuilt;"))
			}
		})
	}
}

// TestClusterRollingRestart: every node stopped cleanly and started again
// in turn, each back in sync before the next, under a small load; 0 lost,
// and the longest time without an output is reported.
func TestClusterRollingRestart(t *testing.T) {
	c := theCluster(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	c.createTopics(t, in, out, dlq)
	cfg := writeConfig(t, c.proxied, n, modules["uppercase"], in, out, dlq, "")
	stop := clusterLoad(t, c.brokers, in, 20)
	w := watchOutputs(t, c.brokers, out)
	p := startProc(t, "run", "--config", cfg)
	w.host = p
	w.progress(t, 1000, 2*time.Minute, "before the rolling restart")
	t0 := time.Now()
	for node := 1; node <= int(c.nodes); node++ {
		c.ctl(t, "stop-broker", strconv.Itoa(node))
		c.startBroker(t, int32(node))
		w.progress(t, 200, time.Minute, fmt.Sprintf("after node %d restarted", node))
	}
	took := time.Since(t0)
	count := stop()
	gap := w.longestGap()
	dups := checkOutputs(t, c.brokers, out, count, false)
	if !p.alive() {
		t.Fatal("wasmstream exited during the rolling restart")
	}
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	t.Logf("rolling restart of %d nodes in %v under load: %d records, 0 lost, %d duplicates; longest output gap %v",
		c.nodes, took.Round(100*time.Millisecond), count, dups, gap.Round(100*time.Millisecond))
}

// TestClusterNetworkFaults: between the host and the brokers (the fault
// proxy), under a small load, one after another: 500 ms added latency, a
// bandwidth cap, every connection reset every 3 s, and a 30 s blackhole of
// one node. The host makes progress through each, the partitions the
// blackholed node does not lead keep moving during the blackhole, the
// others resume within seconds of the heal, and nothing is lost.
func TestClusterNetworkFaults(t *testing.T) {
	c := theCluster(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	c.createTopics(t, in, out, dlq)
	cfg := writeConfig(t, c.proxied, n, modules["uppercase"], in, out, dlq, "")
	stop := clusterLoad(t, c.brokers, in, 20)
	w := watchOutputs(t, c.brokers, out)
	p := startProc(t, "run", "--config", cfg)
	w.host = p
	w.progress(t, 1000, 2*time.Minute, "before the faults")

	for _, f := range []struct {
		what string
		f    faultproxy.Faults
	}{
		{"500 ms added latency", faultproxy.Faults{LatencyMS: 500}},
		{"a 4 KiB/s cap per connection and direction", faultproxy.Faults{BytesPerSecond: 4 << 10}},
		{"every connection reset every 3 s", faultproxy.Faults{ResetEveryMS: 3000}},
	} {
		if err := c.proxy.SetAll(f.f); err != nil {
			t.Fatal(err)
		}
		took := w.progress(t, 2000, 2*time.Minute, "under "+f.what)
		if err := c.proxy.Heal(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: 2000 outputs in %v", f.what, took.Round(100*time.Millisecond))
	}

	// The blackholed node leads some of the partitions (input and output
	// partition p share a leader) and is not the group's coordinator: a
	// coordinator out of reach would end the host's membership, and every
	// partition with it, which is not this fault.
	coord := c.groupCoordinator(t, n+".p")
	victim := int32(-1)
	var held, free []int32
	for node := int32(1); node <= c.nodes && victim < 0; node++ {
		if node == coord {
			continue
		}
		held, free = nil, nil
		for part := int32(0); part < clusterParts; part++ {
			if c.leader(t, in, part) == node || c.leader(t, out, part) == node {
				held = append(held, part)
			} else {
				free = append(free, part)
			}
		}
		if len(held) > 0 && len(free) > 0 {
			victim = node
		}
	}
	if victim < 0 {
		t.Fatalf("no node leads some partitions but not all without being the group coordinator (node %d)", coord)
	}
	if err := c.proxy.Set(strconv.Itoa(int(victim)), faultproxy.Faults{Blackhole: true}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second) // what was in flight to the node drains out of the measure
	before := w.counts()
	time.Sleep(25 * time.Second)
	during := w.counts()
	for _, part := range free {
		if during[part] <= before[part] {
			t.Errorf("partition %d (not led by the blackholed node %d) made no progress during the blackhole: %d outputs before, %d after 25 s", part, victim, before[part], during[part])
		}
	}
	// The operator's view: the status line names the blackholed node's
	// errors and its partitions stalled on the broker side, never in the
	// module.
	var sick, stalledLine string
	for _, line := range strings.Split(p.logText(), "\n") {
		if strings.Contains(line, "msg=status ") && strings.Contains(line, fmt.Sprintf("broker_errors=\"%d: ", victim)) {
			sick = line
		}
		if strings.Contains(line, "msg=status ") && strings.Contains(line, "stalled=") {
			stalledLine = line
		}
	}
	if sick == "" || stalledLine == "" || strings.Contains(stalledLine, "processing") {
		t.Errorf("no status line during the blackhole shows node %d's errors (%q) and its partitions stalled fetching or producing (%q)", victim, sick, stalledLine)
	}
	for _, part := range held {
		if !strings.Contains(stalledLine, fmt.Sprintf("%s/%d ", in, part)) {
			t.Errorf("partition %d (led by the blackholed node) not in the status line's stalled partitions: %q", part, stalledLine)
		}
	}
	healed := time.Now()
	if err := c.proxy.Heal(); err != nil {
		t.Fatal(err)
	}
	var resumed time.Duration
	kafkatest.Eventually(t, time.Minute, fmt.Sprintf("partitions %v (led by node %d) moving again after the heal", held, victim), func() bool {
		now := w.counts()
		for _, part := range held {
			if now[part] <= during[part] {
				return false
			}
		}
		resumed = time.Since(healed)
		return true
	})
	count := stop()
	dups := checkOutputs(t, c.brokers, out, count, false)
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	t.Logf("status lines during the blackhole:\n%s\n%s", sick, stalledLine)
	t.Logf("30 s blackhole of node %d (leading partitions %v): partitions %v moved throughout (%v → %v outputs over 25 s); %v resumed %v after the heal; %d records, 0 lost, %d duplicates",
		victim, held, free, before, during, held, resumed.Round(10*time.Millisecond), count, dups)
}
