//go:build integration

package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// adminToken is the admin token of a test's hosts, named by name: 32 bytes
// in hex, as the host asks for (the hosts refuse weaker tokens).
func adminToken(name string) string {
	sum := sha256.Sum256([]byte("wasmstream-test-admin-token/" + name))
	return hex.EncodeToString(sum[:])
}

// freePort returns a 127.0.0.1 address no process listens on.
//
// The port is picked below the system's ephemeral range (Linux's default
// is 32768-60999), not by listening on port 0: a port the system hands
// out is handed out again, and another process's port-0 listener (a host's
// metrics endpoint, a broker's client) could take it between this test
// letting it go and the process it is for binding it, which then cannot
// start ("address already in use"). Below that range, only an address
// named on purpose can take it; each is given out once in this test
// binary, and one free now is checked by listening on it.
func freePort(t *testing.T) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 1000 {
		p := freePortLow + rand.IntN(freePortHigh-freePortLow)
		if handedOut.ports[p] {
			continue
		}
		handedOut.ports[p] = true
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		return addr
	}
	t.Fatalf("no free port in %d-%d after 1000 tries", freePortLow, freePortHigh)
	return ""
}

// freePortLow and freePortHigh bound freePort's ports: below the
// ephemeral range, above the ports the test command's services take
// (tests/run.sh: 23092-24140).
const freePortLow, freePortHigh = 26000, 32000

var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// cli runs the wasmstream binary with env and returns its output.
func cli(t *testing.T, env []string, args ...string) (string, error) {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestHotSwapRealKafka: under continuous load on the real broker, a pipeline
// is switched from version 1 to version 2 of its processor through the admin
// API (wasmstream deploy), then to a C build of it: every input is in the
// output exactly once, and per input partition the outputs of version 1 all
// come before those of version 2. A request with a wrong token changes
// nothing. A restart comes back on the deployed version. Measured: time from
// upload to the new version serving, for the Go and the C guest.
func TestHotSwapRealKafka(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, dlq)
	kafkatest.CreateTopic(t, brokers, 1, out)
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "v1.wasm"), filepath.Join(dir, "v2.wasm")
	os.WriteFile(v1, wt.BuildGoGuest(t, "plugins/examples/uppercase", "-ldflags=-X main.version=1"), 0o644)
	os.WriteFile(v2, wt.BuildGoGuest(t, "plugins/examples/uppercase", "-ldflags=-X main.version=2"), 0o644)
	cv := filepath.Join(dir, "c.wasm")
	os.WriteFile(cv, wt.BuildCGuest(t, "plugins/examples/c-uppercase/uppercase.c"), 0o644)
	addr := freePort(t)
	cfg := writeConfig(t, brokers, n, v1, in, out, dlq, "")
	replace(t, cfg, "admin:\n  enabled: false", fmt.Sprintf("admin:\n  listen: %s\n  store_dir: %s", addr, filepath.Join(dir, "store")))
	token := "WASMSTREAM_ADMIN_TOKEN=" + adminToken(n)
	adminArgs := []string{"--admin", "http://" + addr}

	// Continuous load: records i = 0.. spread round-robin over 4 partitions.
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond))
	ld := startLoad(t, cl, in, 4, time.Millisecond, nil)
	p := startProcEnv(t, []string{token}, "run", "--config", cfg)
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, time.Minute, "version 1 serving", func(rs []*kgo.Record) bool { return len(rs) >= 1000 })

	// A wrong token is refused and changes nothing.
	if o, err := cli(t, []string{"WASMSTREAM_ADMIN_TOKEN=wrong"}, append([]string{"deploy", "--pipeline", "p", v2}, adminArgs...)...); err == nil || !strings.Contains(o, "missing or wrong bearer token") {
		t.Fatalf("deploy with a wrong token: %v\n%s", err, o)
	}
	// An incompatible module is refused with its reason.
	bad := filepath.Join(dir, "bad.wasm")
	os.WriteFile(bad, wt.Minimal(wt.I32Const(0), wt.Import{Module: "wasmstream_v9", Name: "emit", Params: []byte{wt.I32}, Results: []byte{wt.I32}}).Bytes(), 0o644)
	if o, err := cli(t, []string{token}, append([]string{"deploy", "--pipeline", "p", bad}, adminArgs...)...); err == nil || !strings.Contains(o, "built for wasmstream ABI v9") {
		t.Fatalf("deploy of an incompatible module: %v\n%s", err, o)
	}

	swap := func(module, want string) time.Duration {
		t.Helper()
		start := time.Now()
		o, err := cli(t, []string{token}, append([]string{"deploy", "--pipeline", "p", module}, adminArgs...)...)
		if err != nil {
			t.Fatalf("deploy: %v\n%s", err, o)
		}
		t.Logf("%s", strings.TrimSpace(o))
		seen := len(rd.Recs)
		rd.ReadUntil(t, time.Minute, "the new version serving", func(rs []*kgo.Record) bool {
			for _, r := range rs[seen:] {
				if kafkatest.Header(r, "processor.version") == want {
					return true
				}
			}
			return false
		})
		return time.Since(start)
	}
	goSwap := swap(v2, "2")
	rd.ReadUntil(t, time.Minute, "more output on version 2", func(rs []*kgo.Record) bool { return len(rs) >= ld.Produced()/2+2000 })
	cSwap := swap(cv, "")
	time.Sleep(time.Second)
	total := ld.Stop()
	rd.ReadUntil(t, 2*time.Minute, "every input", func(rs []*kgo.Record) bool { return len(rs) >= total })

	seen := map[string]int{}
	lastVersion := map[int]int{} // input partition -> rank of the last version seen (1, 2, 3 = C)
	rank := map[string]int{"1": 1, "2": 2, "": 3}
	counts := map[int]int{}
	for _, r := range rd.Recs {
		v := strings.ToLower(string(r.Value))
		seen[v]++
		var i int
		fmt.Sscanf(v, "v-%d", &i)
		ver := kafkatest.Header(r, "processor.version")
		k := rank[ver]
		if k < lastVersion[i%4] {
			t.Fatalf("partition %d: input %d processed by version %q after a newer version", i%4, i, ver)
		}
		lastVersion[i%4] = k
		counts[k]++
	}
	dups := 0
	for i := 0; i < total; i++ {
		switch c := seen[fmt.Sprintf("v-%d", i)]; {
		case c == 0:
			t.Fatalf("input %d lost", i)
		case c > 1:
			dups += c - 1
		}
	}
	if dups != 0 {
		t.Errorf("%d duplicates from the swaps", dups)
	}
	if counts[1] == 0 || counts[2] == 0 || counts[3] == 0 {
		t.Fatalf("outputs per version %v: every version must have served", counts)
	}
	o, err := cli(t, []string{token}, append([]string{"processors"}, adminArgs...)...)
	if err != nil || strings.Count(o, "upload") != 2 || !strings.Contains(o, "config") {
		t.Fatalf("processors: %v\n%s", err, o)
	}
	// Roll back to v2 and forward to the C build again: both are switches
	// like any other.
	if o, err := cli(t, []string{token}, append([]string{"deploy", "--pipeline", "p", "--rollback"}, adminArgs...)...); err != nil || !strings.Contains(o, "p now runs") {
		t.Fatalf("rollback: %v\n%s", err, o)
	}
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: in, Partition: 1, Key: []byte("rb"), Value: []byte("rolled-back")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rd.ReadUntil(t, time.Minute, "the record after the rollback", func(rs []*kgo.Record) bool {
		r := rs[len(rs)-1]
		return string(r.Value) == "ROLLED-BACK" && kafkatest.Header(r, "processor.version") == "2"
	})
	if o, err := cli(t, []string{token}, append([]string{"deploy", "--pipeline", "p", cv}, adminArgs...)...); err != nil {
		t.Fatalf("deploy C again: %v\n%s", err, o)
	}
	t.Logf("%d inputs, outputs per version %v, 0 lost, %d duplicates; upload to serving: Go guest %s, C guest %s", total, counts, dups, goSwap.Round(time.Millisecond), cSwap.Round(time.Millisecond))
	if code := p.stop(t, 30*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}

	// Restart: the deployed version (C) comes back, not the config's v1.
	p = startProcEnv(t, []string{token}, "run", "--config", cfg)
	before := len(rd.Recs)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: in, Partition: 0, Key: []byte("after"), Value: []byte("after-restart")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rd.ReadUntil(t, time.Minute, "the record after the restart", func(rs []*kgo.Record) bool { return len(rs) > before })
	last := rd.Recs[len(rd.Recs)-1]
	if string(last.Value) != "AFTER-RESTART" || kafkatest.Header(last, "processor.version") != "" {
		t.Fatalf("after the restart: %q version %q, want the C guest's output", last.Value, kafkatest.Header(last, "processor.version"))
	}
	if !strings.Contains(p.logText(), "running the deployed version") {
		t.Fatal("the restart did not report the deployed version")
	}
	p.stop(t, 30*time.Second)
}
