//go:build integration

package integration

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestFleetDeployReachesEveryHost: three hosts in one group under load; a
// deploy through one host's admin API reaches all three (the API answers
// with --wait-all once every live host runs it), per input partition no
// old-version output follows a new-version one, nothing is lost; a host
// killed and restarted, and a fourth host started afterwards, run the
// deployed version, not their config's.
func TestFleetDeployReachesEveryHost(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	const parts = 12
	kafkatest.CreateTopic(t, brokers, parts, in, dlq)
	kafkatest.CreateTopic(t, brokers, 1, out)
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "v1.wasm"), filepath.Join(dir, "v2.wasm")
	os.WriteFile(v1, wt.BuildGoGuest(t, "plugins/examples/uppercase", "-ldflags=-X main.version=1"), 0o644)
	os.WriteFile(v2, wt.BuildGoGuest(t, "plugins/examples/uppercase", "-ldflags=-X main.version=2"), 0o644)
	token := "WASMSTREAM_ADMIN_TOKEN=" + adminToken(n)
	base := writeConfig(t, brokers, n, v1, in, out, dlq, "")
	// host i: its own admin port and module store, the same group.
	hostConfig := func(i int) (cfg, admin string) {
		admin = freePort(t)
		return fleetHostConfig(t, base, dir, i, admin, nil), "http://" + admin
	}

	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond))
	ld := startLoad(t, cl, in, parts, 2*time.Millisecond, nil)

	var procs [4]*proc
	var cfgs, admins [4]string
	for i := range 3 {
		cfgs[i], admins[i] = hostConfig(i)
		procs[i] = startProcEnv(t, []string{token, fmt.Sprintf("WASMSTREAM_HOST_ID=fleet-%d", i)}, "run", "--config", cfgs[i])
	}
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, 2*time.Minute, "version 1 serving", func(rs []*kgo.Record) bool { return len(rs) >= 1000 })
	processors := func(i int) string {
		t.Helper()
		o, err := cli(t, []string{token}, "processors", "--admin", admins[i])
		if err != nil {
			t.Fatalf("processors on host %d: %v\n%s", i, err, o)
		}
		return o
	}
	// polled asks while a host may still be starting: its admin API
	// listens a moment after its records flow or its log says what it
	// runs, so a refused connection is asked again, not a failure.
	polled := func(i int) string {
		o, err := cli(t, []string{token}, "processors", "--admin", admins[i])
		if err != nil {
			t.Logf("processors on host %d (asked again): %v", i, err)
			return ""
		}
		return o
	}
	kafkatest.Eventually(t, time.Minute, "three live hosts in the registry", func() bool {
		return strings.Count(polled(2), "    host fleet-") == 3
	})

	start := time.Now()
	o, err := cli(t, []string{token}, "deploy", "--pipeline", "p", "--wait-all", "--admin", admins[0], v2)
	if err != nil || !strings.Contains(o, "every live host of the group runs it") {
		t.Fatalf("deploy --wait-all: %v\n%s", err, o)
	}
	t.Logf("deploy to three hosts: %s (%s)", time.Since(start).Round(time.Millisecond), strings.TrimSpace(o))
	// Every host says it runs v2, as seen from another host.
	v2digest := digestFile(t, v2)
	if p := processors(2); strings.Count(p, "runs "+v2digest[:12]) < 4 || !strings.Contains(p, "fleet: deployed "+v2digest[:12]+" by fleet-0") {
		t.Fatalf("processors on host 2 after the deploy:\n%s", p)
	}
	// Every input partition's outputs reach version 2.
	seen := len(rd.Recs)
	rd.ReadUntil(t, time.Minute, "version 2 on every partition", func(rs []*kgo.Record) bool {
		got := map[int]bool{}
		for _, r := range rs[seen:] {
			if kafkatest.Header(r, "processor.version") == "2" {
				got[inputPartition(t, r, parts)] = true
			}
		}
		return len(got) == parts
	})

	// A host killed and restarted, and a fourth host started now, run the
	// deployed version, not their config's v1.
	procs[1].kill(t)
	procs[1] = startProcEnv(t, []string{token, "WASMSTREAM_HOST_ID=fleet-1"}, "run", "--config", cfgs[1])
	cfgs[3], admins[3] = hostConfig(3)
	procs[3] = startProcEnv(t, []string{token, "WASMSTREAM_HOST_ID=fleet-3"}, "run", "--config", cfgs[3])
	for _, i := range []int{1, 3} {
		kafkatest.Eventually(t, time.Minute, fmt.Sprintf("host %d runs the deployed version", i), func() bool {
			return strings.Contains(procs[i].logText(), "msg=\"running the deployed version\" pipeline=p digest="+v2digest[:12])
		})
		// It says loudly that the registry's version replaces the config's
		// module (and, found before the modules load, compiles only it).
		if l := procs[i].logText(); !strings.Contains(l, "CONFIG OVERRIDDEN") || !strings.Contains(l, "runs="+v2digest[:12]) {
			t.Fatalf("host %d does not say its config's module is overridden:\n%s", i, l)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for view := polled(3); strings.Count(view, "runs "+v2digest[:12]) != 5; view = polled(3) { // the pipeline's line and four hosts
		if time.Now().After(deadline) {
			t.Fatalf("after 1m0s: not four live hosts on version 2; processors on host 3:\n%s", view)
		}
		time.Sleep(100 * time.Millisecond)
	}

	total := ld.Stop()
	rd.ReadUntil(t, 2*time.Minute, "every input's output", func(rs []*kgo.Record) bool { return len(distinct(rs)) >= total })
	// Version order per input partition: no version-1 output after a
	// version-2 one.
	last := map[int]string{}
	for _, r := range rd.Recs {
		p, v := inputPartition(t, r, parts), kafkatest.Header(r, "processor.version")
		if last[p] == "2" && v == "1" {
			t.Fatalf("partition %d: a version-1 output (%s) after a version-2 one", p, r.Value)
		}
		last[p] = v
	}
	t.Logf("%d inputs, %d outputs (%d distinct), 0 lost", total, len(rd.Recs), len(distinct(rd.Recs)))
	for i, p := range procs {
		if code := p.stop(t, time.Minute); code != 0 {
			t.Errorf("host %d: exit code %d", i, code)
		}
	}
}

// inputPartition is the input partition of an output of key k<i>.
func inputPartition(t *testing.T, r *kgo.Record, parts int) int {
	i, err := strconv.Atoi(strings.TrimPrefix(string(r.Key), "k"))
	if err != nil {
		t.Fatalf("output key %q", r.Key)
	}
	return i % parts
}

// distinct is the set of output values.
func distinct(rs []*kgo.Record) map[string]bool {
	m := map[string]bool{}
	for _, r := range rs {
		m[string(r.Value)] = true
	}
	return m
}

func digestFile(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256hex(b)
}

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestFleetCanary: three hosts; a healthy canary on 25% of 12 partitions runs
// on exactly 3 of them and --promote takes it to all; a canary that fails
// every record is aborted automatically (its failure rate over the stable
// version's by more than the margin) and every partition goes back to the
// stable version. Every input ends as an output or a dead letter.
func TestFleetCanary(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	const parts = 12
	kafkatest.CreateTopic(t, brokers, parts, in)
	kafkatest.CreateTopic(t, brokers, 1, out, dlq)
	dir := t.TempDir()
	v1, v2, bad := filepath.Join(dir, "v1.wasm"), filepath.Join(dir, "v2.wasm"), filepath.Join(dir, "bad.wasm")
	os.WriteFile(v1, wt.BuildGoGuest(t, "plugins/examples/uppercase", "-ldflags=-X main.version=1"), 0o644)
	os.WriteFile(v2, wt.BuildGoGuest(t, "plugins/examples/uppercase", "-ldflags=-X main.version=2"), 0o644)
	os.WriteFile(bad, wt.Minimal(wt.Unreachable).Bytes(), 0o644)
	token := "WASMSTREAM_ADMIN_TOKEN=" + adminToken(n)
	base := writeConfig(t, brokers, n, v1, in, out, dlq, "")
	var admins [3]string
	var procs [3]*proc
	metrics := freePort(t) // host 1's, for its dashboard
	for i := range 3 {
		addr := freePort(t)
		var edit func(string) string
		if i == 1 {
			edit = func(y string) string {
				return strings.Replace(y, "metrics:\n  listen: 127.0.0.1:0", "metrics:\n  listen: "+metrics, 1)
			}
		}
		cfg := fleetHostConfig(t, base, dir, i, addr, edit)
		admins[i] = "http://" + addr
		procs[i] = startProcEnv(t, []string{token, fmt.Sprintf("WASMSTREAM_HOST_ID=canary-%d", i)}, "run", "--config", cfg)
	}
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond))
	ld := startLoad(t, cl, in, parts, 2*time.Millisecond, nil)
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, 2*time.Minute, "version 1 serving", func(rs []*kgo.Record) bool { return len(rs) >= 500 })
	for i, p := range procs {
		if !p.alive() {
			t.Fatalf("host %d exited while the others served:\n%s", i, tail(p.logText(), 30))
		}
	}
	// The outputs can come from the other hosts before host 0's admin API
	// listens (it starts after its pipelines): ask it until it answers.
	kafkatest.Eventually(t, time.Minute, "host 0's admin API answering", func() bool {
		_, err := cli(t, []string{token}, "processors", "--admin", admins[0])
		return err == nil
	})
	deploy := func(args ...string) string {
		t.Helper()
		o, err := cli(t, []string{token}, append([]string{"deploy", "--pipeline", "p", "--admin", admins[0]}, args...)...)
		if err != nil {
			t.Fatalf("deploy %v: %v\n%s", args, err, o)
		}
		t.Logf("deploy %v: %s", args, strings.TrimSpace(o))
		return o
	}
	// versionsBy is the set of input partitions whose outputs since index
	// from carry each version.
	versionsBy := func(from int) map[string]map[int]bool {
		m := map[string]map[int]bool{}
		for _, r := range rd.Recs[from:] {
			v := kafkatest.Header(r, "processor.version")
			if m[v] == nil {
				m[v] = map[int]bool{}
			}
			m[v][inputPartition(t, r, parts)] = true
		}
		return m
	}

	// A healthy canary: exactly 3 of the 12 partitions run it.
	deploy("--canary", "25%", "--label", "v2-tested", v2)
	seen := len(rd.Recs)
	rd.ReadUntil(t, time.Minute, "the canary on its partitions", func(rs []*kgo.Record) bool { return len(versionsBy(seen)["2"]) == 3 })
	mark := len(rd.Recs)
	rd.ReadFor(2 * time.Second)
	if got := versionsBy(mark); len(got["2"]) != 3 || len(got["1"]) != parts-3 {
		t.Fatalf("during the canary: partitions on version 2 %v, on version 1 %v; want 3 and 9", got["2"], got["1"])
	}
	deploy("--promote")
	seen = len(rd.Recs)
	rd.ReadUntil(t, time.Minute, "version 2 on every partition", func(rs []*kgo.Record) bool { return len(versionsBy(seen)["2"]) == parts })

	// A canary that fails every record: aborted automatically.
	dl := kafkatest.NewReader(t, brokers, dlq)
	deploy("--canary", "25%", "--label", "v3-unreachable", bad)
	var o string
	defer func() {
		if t.Failed() {
			t.Logf("host 1's last answer to processors:\n%s", o)
		}
	}()
	kafkatest.Eventually(t, 2*time.Minute, "the failing canary aborted", func() bool {
		out, err := cli(t, []string{token}, "processors", "--admin", admins[1])
		if o = out; err != nil {
			o = fmt.Sprintf("%v: %s", err, out)
		}
		return err == nil && strings.Contains(o, "last canary aborted: automatic")
	})
	t.Logf("after the abort:\n%s", o)
	// Host 1's dashboard in Chromium (live: its event stream re-renders the
	// panels every second, so polled): the fleet's hosts, the deployed
	// version by its label, the abort's reason, and the canary's life in the
	// event log (started, promoted, started again, aborted).
	ctx, cancel := ctxTimeout(time.Minute)
	defer cancel()
	bctx := browser(t, ctx)
	if err := chromedp.Do(bctx, chromedp.Navigate("http://"+metrics+"/dashboard")); err != nil {
		t.Fatalf("chromium could not open host 1's dashboard: %v", err)
	}
	type shown struct {
		Hosts    []string // each row's first cell
		Live     int
		Versions string // the versions panel's text
		Aborted  string
		Events   []string // each row's kind and text
	}
	var got shown
	var missing []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		got, err = chromedp.Run(bctx, chromedp.Evaluate[shown](`(() => { const txt = (q) => [...document.querySelectorAll(q)].map((e) => e.textContent);
			return {Hosts: txt("#hosts tbody tr td:first-child"), Live: document.querySelectorAll("#hosts tbody td.up").length,
				Versions: document.querySelector("#versions tbody").textContent, Aborted: txt("#versions td.aborted").join(" | "),
				Events: [...document.querySelectorAll("#events tbody tr")].map((r) => (r.dataset.kind || "") + ": " + r.textContent)}; })()`))
		if err != nil {
			t.Fatal(err)
		}
		missing = missing[:0]
		have := func(ok bool, what string) {
			if !ok {
				missing = append(missing, what)
			}
		}
		hosts := slices.Sorted(slices.Values(got.Hosts))
		have(slices.Equal(hosts, []string{"canary-0", "canary-1 (this host)", "canary-2"}) && got.Live == 3, "the three hosts, live, this one marked")
		have(strings.Contains(got.Versions, "v2-tested"), "the deployed version's label")
		have(strings.HasPrefix(got.Aborted, "automatic"), "the abort's reason")
		events := strings.Join(got.Events, "\n")
		have(strings.Contains(events, "canary.start: ") && strings.Contains(events, "v3-unreachable"), "the canary's start, with its label")
		have(strings.Contains(events, "canary promoted:"), "the promotion")
		have(strings.Contains(events, "canary.abort: "), "the abort")
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(missing) > 0 {
		t.Errorf("host 1's dashboard in Chromium lacks %q; it shows %+v", missing, got)
	}
	if png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)); err == nil {
		if art := os.Getenv("TEST_ARTEFACTS"); art != "" {
			os.WriteFile(filepath.Join(art, "dashboard-fleet.png"), png, 0o644)
		}
	}
	dl.ReadFor(2 * time.Second)
	failedParts := map[int]bool{}
	for _, r := range dl.Recs {
		failedParts[inputPartition(t, r, parts)] = true
	}
	if len(failedParts) == 0 || len(failedParts) > 3 {
		t.Fatalf("dead letters from partitions %v during the failing canary: want 1 to 3 (the canary's share)", failedParts)
	}
	seen = len(rd.Recs)
	rd.ReadUntil(t, time.Minute, "version 2 on every partition after the abort", func(rs []*kgo.Record) bool { return len(versionsBy(seen)["2"]) == parts })

	total := ld.Stop()
	kafkatest.Eventually(t, 2*time.Minute, "every input an output or a dead letter", func() bool {
		rd.ReadFor(500 * time.Millisecond)
		dl.ReadFor(100 * time.Millisecond)
		done := distinct(rd.Recs)
		for _, r := range dl.Recs {
			done["DL "+string(r.Key)] = true
		}
		return len(done) >= total
	})
	t.Logf("%d inputs: %d outputs, %d dead letters (partitions %v)", total, len(distinct(rd.Recs)), len(dl.Recs), failedParts)
	for i, p := range procs {
		if code := p.stop(t, time.Minute); code != 0 {
			t.Errorf("host %d: exit code %d", i, code)
		}
	}
}

// canaryPartitions is the set of partitions of topic (of n) a canary of
// percent runs on for pipeline: the formula of scheduler/canary.go, which
// anyone who knows the pipeline's and the topic's names can compute.
func canaryPartitions(pipeline, topic string, n, percent int) map[int]bool {
	h := fnv.New32a()
	h.Write([]byte(pipeline + "/" + topic))
	s := int(h.Sum32() % uint32(n))
	k := (percent*n + 99) / 100
	out := map[int]bool{}
	for p := range n {
		if (p+s)%n < k {
			out[p] = true
		}
	}
	return out
}

// TestFleetCanaryPoisonedInput: two hosts run the enrich example (values
// that are not JSON objects fail) on 12 partitions, with organic poison
// (1 record in 20) everywhere. A canary identical to the stable code
// (another digest) runs on 25%; then poison is produced to the canary's 3
// partitions only, as anyone who can produce to the input can. The canary
// fails far more often than the stable version, on records the stable
// version fails too: it keeps running (before, it was aborted within a
// heartbeat). A canary that traps on every record is then aborted, and the
// reason names the kind, the partitions and the hosts. Every input ends as
// an output or a dead letter.
func TestFleetCanaryPoisonedInput(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	const parts = 12
	kafkatest.CreateTopic(t, brokers, parts, in)
	kafkatest.CreateTopic(t, brokers, 1, out, dlq)
	dir := t.TempDir()
	enrich := wt.BuildGoGuest(t, "plugins/examples/enrich")
	v1, same, bad := filepath.Join(dir, "v1.wasm"), filepath.Join(dir, "same.wasm"), filepath.Join(dir, "bad.wasm")
	os.WriteFile(v1, enrich, 0o644)
	// The same code under another digest: a custom section.
	os.WriteFile(same, append(append([]byte{}, enrich...), 0, 11, 6, 'c', 'a', 'n', 'a', 'r', 'y', 's', 'a', 'm', 'e'), 0o644)
	os.WriteFile(bad, wt.Minimal(wt.Unreachable).Bytes(), 0o644)
	token := "WASMSTREAM_ADMIN_TOKEN=" + adminToken(n)
	base := writeConfig(t, brokers, n, v1, in, out, dlq, "")
	var admins [2]string
	var procs [2]*proc
	for i := range 2 {
		addr := freePort(t)
		cfg := fleetHostConfig(t, base, dir, i, addr, nil)
		admins[i] = "http://" + addr
		procs[i] = startProcEnv(t, []string{token, fmt.Sprintf("WASMSTREAM_HOST_ID=poison-%d", i)}, "run", "--config", cfg)
	}
	targets := canaryPartitions("p", in, parts, 25)
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond))
	var attack atomic.Bool
	ld := startLoad(t, cl, in, parts, 2*time.Millisecond, func(i, p int) string {
		if i%20 == 0 || (attack.Load() && targets[p]) {
			return fmt.Sprintf("poison %d", i) // not a JSON object
		}
		return fmt.Sprintf(`{"i":%d}`, i)
	})
	rd := kafkatest.NewReader(t, brokers, out)
	dl := kafkatest.NewReader(t, brokers, dlq)
	rd.ReadUntil(t, 2*time.Minute, "version 1 serving", func(rs []*kgo.Record) bool { return len(rs) >= 500 })
	// The outputs can come from the other hosts before host 0's admin API
	// listens (it starts after its pipelines): ask it until it answers.
	kafkatest.Eventually(t, time.Minute, "host 0's admin API answering", func() bool {
		_, err := cli(t, []string{token}, "processors", "--admin", admins[0])
		return err == nil
	})
	deploy := func(args ...string) string {
		t.Helper()
		o, err := cli(t, []string{token}, append([]string{"deploy", "--pipeline", "p", "--admin", admins[0]}, args...)...)
		if err != nil {
			t.Fatalf("deploy %v: %v\n%s", args, err, o)
		}
		return o
	}
	processors := func() string {
		o, err := cli(t, []string{token}, "processors", "--admin", admins[1])
		if err != nil {
			t.Fatalf("processors: %v\n%s", err, o)
		}
		return o
	}

	deploy("--canary", "25%", same)
	sameDigest := digestFile(t, same)
	attack.Store(true)
	// The canary's dead letters: poison on its partitions only.
	canaryFailed := func() int {
		c := 0
		for _, r := range dl.Recs {
			if kafkatest.Header(r, "wasmstream.module.digest") == sameDigest {
				c++
			}
		}
		return c
	}
	kafkatest.Eventually(t, 2*time.Minute, "200 of the canary's records failed", func() bool {
		dl.ReadFor(200 * time.Millisecond)
		return canaryFailed() >= 200
	})
	// Three heartbeats more: a judgement on each.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if o := processors(); !strings.Contains(o, "canary: "+sameDigest[:12]) {
			t.Fatalf("a canary identical to the stable code aborted by poison on its partitions:\n%s", o)
		}
		time.Sleep(time.Second)
	}
	dl.ReadFor(500 * time.Millisecond)
	t.Logf("poison on the canary's partitions %v: %d of its records dead-lettered, the canary runs on", targets, canaryFailed())
	attack.Store(false)

	// A canary that traps on every record: aborted, the reason naming the
	// kind and the partitions.
	deploy("--canary", "25%", "--label", "v3-unreachable", bad)
	var o string
	kafkatest.Eventually(t, 2*time.Minute, "the trapping canary aborted", func() bool {
		o = processors()
		return strings.Contains(o, "last canary aborted: automatic")
	})
	t.Logf("after the abort:\n%s", o)
	for _, want := range []string{"fault.trap", "run again on the stable version", "partitions", "hosts"} {
		if !strings.Contains(o, want) {
			t.Fatalf("the abort reason does not say %q:\n%s", want, o)
		}
	}

	total := ld.Stop()
	kafkatest.Eventually(t, 2*time.Minute, "every input an output or a dead letter", func() bool {
		rd.ReadFor(500 * time.Millisecond)
		dl.ReadFor(100 * time.Millisecond)
		done := map[string]bool{}
		for _, r := range rd.Recs {
			done[string(r.Key)] = true
		}
		for _, r := range dl.Recs {
			done[string(r.Key)] = true
		}
		return len(done) >= total
	})
	for i, p := range procs {
		if code := p.stop(t, time.Minute); code != 0 {
			t.Errorf("host %d: exit code %d", i, code)
		}
	}
}
