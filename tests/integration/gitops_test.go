//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestGitOpsVersionFromConfig: the GitOps flow of the README with
// version_source: config, on the real broker with two hosts under load, as
// a StatefulSet rolls them (one at a time, the last first). The config
// (in Git, a ConfigMap) names v1: both run it, and the admin API refuses a
// deploy, saying why. The config changes to v2: the first host restarted
// with it deploys v2 to the fleet, and the host still on the old config
// switches to it (every partition's outputs reach version 2) before it
// restarts; restarted, it writes nothing. The config adds a canary (v3 on
// 25%): v3 runs on the canary's partitions only, on both hosts. The
// config promotes it (module v3, no canary): every partition reaches
// version 3. Nothing is lost, and the label of each version is the
// config's.
func TestGitOpsVersionFromConfig(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	const parts = 12
	kafkatest.CreateTopic(t, brokers, parts, in, dlq)
	kafkatest.CreateTopic(t, brokers, 1, out)
	dir := t.TempDir()
	mod := map[int]string{}
	for v := 1; v <= 3; v++ {
		mod[v] = filepath.Join(dir, fmt.Sprintf("v%d.wasm", v))
		os.WriteFile(mod[v], wt.BuildGoGuest(t, "plugins/examples/uppercase", fmt.Sprintf("-ldflags=-X main.version=%d", v)), 0o644)
	}
	token := "WASMSTREAM_ADMIN_TOKEN=" + adminToken(n)
	base := writeConfig(t, brokers, n, mod[1], in, out, dlq, "")
	var admins, cfgs [2]string
	for i := range admins {
		admins[i] = freePort(t)
	}
	// commit is a change to the config in Git, which the ConfigMap both
	// hosts mount then holds: pipeline p's module and label, and a canary.
	commit := func(v int, label, canary string) {
		for i := range cfgs {
			cfgs[i] = fleetHostConfig(t, base, dir, i, admins[i], func(y string) string {
				return strings.Replace(y, "module: "+mod[1]+"\n", fmt.Sprintf("module: %s\n    version_source: config\n    module_label: %s\n%s", mod[v], label, canary), 1)
			})
		}
	}
	var procs [2]*proc
	start := func(i int) {
		procs[i] = startProcEnv(t, []string{token, fmt.Sprintf("WASMSTREAM_HOST_ID=gitops-%d", i)}, "run", "--config", cfgs[i])
	}
	// roll restarts host i as the StatefulSet does: a graceful stop, then
	// a start with the config the ConfigMap now holds.
	roll := func(i int) {
		if code := procs[i].stop(t, time.Minute); code != 0 {
			t.Fatalf("host %d: exit code %d", i, code)
		}
		start(i)
	}
	processors := func(i int) string {
		o, err := cli(t, []string{token}, "processors", "--admin", "http://"+admins[i])
		if err != nil {
			t.Logf("processors on host %d (asked again): %v", i, err)
			return ""
		}
		return o
	}

	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond))
	ld := startLoad(t, cl, in, parts, 2*time.Millisecond, nil)
	rd := kafkatest.NewReader(t, brokers, out)
	// reach waits until every partition in want has an output of version
	// v read after the first `from` outputs, and returns the partitions
	// with a version-v output there.
	reach := func(what string, from int, v string, want map[int]bool) map[int]bool {
		t.Helper()
		var got map[int]bool
		rd.ReadUntil(t, 2*time.Minute, what, func(rs []*kgo.Record) bool {
			got = map[int]bool{}
			for _, r := range rs[from:] {
				if kafkatest.Header(r, "processor.version") == v {
					got[inputPartition(t, r, parts)] = true
				}
			}
			for p := range want {
				if !got[p] {
					return false
				}
			}
			return true
		})
		return got
	}
	all := map[int]bool{}
	for p := range parts {
		all[p] = true
	}

	// v1, from the config.
	commit(1, "v1.0.0", "")
	start(0)
	start(1)
	reach("version 1 on every partition", 0, "1", all)
	kafkatest.Eventually(t, time.Minute, "two live hosts on v1.0.0", func() bool {
		p := processors(0)
		return strings.Count(p, "    host gitops-") == 2 && strings.Contains(p, "(v1.0.0)")
	})
	o, err := cli(t, []string{token}, "deploy", "--pipeline", "p", "--admin", "http://"+admins[0], mod[2])
	if err == nil || !strings.Contains(o, "version_source: config") {
		t.Fatalf("a deploy through the admin API of a pipeline its config decides: %v\n%s", err, o)
	}

	// v2 in Git; the StatefulSet restarts host 1 first. Host 0, on the
	// old config still, switches to v2 with the fleet.
	commit(2, "v2.0.0", "")
	seen := len(rd.Recs)
	began := time.Now()
	roll(1)
	reach("version 2 on every partition before host 0 restarts", seen, "2", all)
	t.Logf("v2 on every partition %s after host 1's restart began", time.Since(began).Round(time.Millisecond))
	v2 := digestFile(t, mod[2])
	kafkatest.Eventually(t, time.Minute, "host 0 runs v2.0.0", func() bool {
		return strings.Contains(processors(0), "fleet: deployed "+v2[:12]+" (v2.0.0) by gitops-1")
	})
	roll(0)
	kafkatest.Eventually(t, time.Minute, "host 0 back, on v2", func() bool {
		p := processors(0)
		return strings.Count(p, "runs "+v2[:12]) >= 3 && strings.Contains(p, "by gitops-1")
	})
	if strings.Contains(procs[0].logText(), "the config's version deployed to the fleet") {
		t.Error("host 0, restarted with the config the fleet runs, wrote it again")
	}

	// A canary in Git: v3 on 25% of the partitions, beside v2.
	commit(2, "v2.0.0", fmt.Sprintf("    canary: {module: %s, percent: 25, label: v3.0.0-rc1}\n", mod[3]))
	canary := canaryPartitions("p", in, parts, 25)
	roll(1)
	kafkatest.Eventually(t, time.Minute, "the canary on both hosts", func() bool {
		return strings.Contains(processors(0), "canary: "+digestFile(t, mod[3])[:12]+" (v3.0.0-rc1) on 25%")
	})
	seen = len(rd.Recs)
	got := reach("version 3 on the canary's partitions", seen, "3", canary)
	for p := range got {
		if !canary[p] {
			t.Errorf("partition %d, not the canary's (%v), ran version 3", p, canary)
		}
	}

	// Promoted in Git: module v3, no canary.
	commit(3, "v3.0.0", "")
	seen = len(rd.Recs)
	roll(1)
	reach("version 3 on every partition", seen, "3", all)
	roll(0)

	total := ld.Stop()
	rd.ReadUntil(t, 2*time.Minute, "every input's output", func(rs []*kgo.Record) bool { return len(distinct(rs)) >= total })
	t.Logf("%d inputs, %d outputs (%d distinct), 0 lost", total, len(rd.Recs), len(distinct(rd.Recs)))
	for i, p := range procs {
		if code := p.stop(t, time.Minute); code != 0 {
			t.Errorf("host %d: exit code %d", i, code)
		}
	}
}
