//go:build integration

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// Unmodified Redpanda Data Transforms on a real Apache Kafka broker
// (docs/REDPANDA-TRANSFORMS.md): the conformance transform built from
// Redpanda's published Go SDK (tests/redpanda/redpanda-go), run by the
// wasmstream CLI.

var rpGoTransform = sync.OnceValues(func() (string, error) {
	tb := &testing.B{}
	p := filepath.Join(os.TempDir(), fmt.Sprintf("wasmstream-it-redpanda-go-%d.wasm", os.Getpid()))
	cmd := exec.Command("go", "build", "-o", p, ".")
	cmd.Dir = filepath.Join(wt.RepoRoot(tb), "tests/redpanda/redpanda-go")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build tests/redpanda/redpanda-go: %v\n%s", err, out)
	}
	return p, nil
})

// TestRedpandaTransformExactlyOnceKills: SIGKILL wasmstream three times
// while it runs a Redpanda transform exactly_once over 100,000 records,
// restarting it each time. The read_committed output holds every input
// exactly once, byte for byte (the transform is the identity), and a
// graceful stop commits every input offset. Redpanda runs the same
// transform at least once. As in TestExactlyOnceKills, a run whose kills
// all fell between transactions proves nothing, and runs again (up to
// three runs).
func TestRedpandaTransformExactlyOnceKills(t *testing.T) {
	module, err := rpGoTransform()
	if err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 3; run++ {
		if aborted := redpandaKillsRun(t, module); aborted > 0 {
			return
		}
		t.Logf("run %d: the kills interrupted no open transaction; running again", run)
	}
	t.Fatal("in three runs the kills interrupted no open transaction, so the test proved nothing")
}

func redpandaKillsRun(t *testing.T, module string) int {
	const count = 100000
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, out, dlq)
	kafkatest.Produce(t, brokers, in, count, func(i int) string { return fmt.Sprintf("v-%06d", i) })
	cfg := writeConfig(t, brokers, n, module, in, out, dlq, "")
	replace(t, cfg, "    retry: {max_attempts: 1}\n", "    retry: {max_attempts: 1}\n    guarantee: exactly_once\n    transactions: {max_records: 2000, interval: 100ms}\n")

	rd := kafkatest.NewReader(t, brokers, out)
	p := startProc(t, "run", "--config", cfg)
	for i, frac := range []int{20, 45, 70} {
		rd.ReadUntil(t, 3*time.Minute, fmt.Sprintf("%d%% of the outputs before kill %d", frac, i+1), func(rs []*kgo.Record) bool { return len(rs) >= count*frac/100 })
		time.Sleep(time.Duration(23*(i+1)) * time.Millisecond) // into the next transaction
		p.kill(t)
		t.Logf("kill %d after %d committed outputs", i+1, len(rd.Recs))
		p = startProc(t, "run", "--config", cfg)
	}
	seen := map[string]int{}
	counted := 0
	rd.ReadUntil(t, 4*time.Minute, "every input in the read_committed output", func(rs []*kgo.Record) bool {
		for _, r := range rs[counted:] {
			seen[string(r.Value)]++
		}
		counted = len(rs)
		return len(seen) >= count
	})
	rd.ReadFor(3 * time.Second) // late duplicates, if any
	for _, r := range rd.Recs[counted:] {
		seen[string(r.Value)]++
	}
	lost, dups := 0, 0
	for i := 0; i < count; i++ {
		switch c := seen[fmt.Sprintf("v-%06d", i)]; {
		case c == 0:
			lost++
		case c > 1:
			dups += c - 1
		}
	}
	if lost > 0 || dups > 0 || len(seen) != count {
		t.Fatalf("not exactly once: %d lost, %d duplicates, %d distinct outputs for %d inputs", lost, dups, len(seen), count)
	}
	if code := p.stop(t, time.Minute); code != 0 {
		t.Fatalf("exit code %d after SIGTERM", code)
	}
	if sum := committedSum(t, brokers, n+".p", in); sum != count {
		t.Fatalf("committed %d offsets after a graceful stop, want %d", sum, count)
	}
	raw := uncommittedCount(t, brokers, out)
	t.Logf("read_committed: each of %d inputs once (0 lost, 0 duplicates); read_uncommitted: %d records (%d from aborted transactions)", count, raw, raw-count)
	return raw - count
}
