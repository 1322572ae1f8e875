//go:build integration

package integration

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// ownBroker starts a single broker of the test's own (kafka.sh start, on
// ports of its own: 23292-23293, below the ephemeral range with the
// others), for a test that stops it; stopped at the end.
func ownBroker(t *testing.T) (brokers []string, stop func()) {
	t.Helper()
	script := wt.RepoRoot(t) + "/tests/kafka/kafka.sh"
	env := append(os.Environ(), "KAFKA_DATA_DIR="+filepath.Join(os.TempDir(), "wasmstream-kafka-stop-test"),
		"KAFKA_PORT=23292", "KAFKA_CONTROLLER_PORT=23293", "KAFKA_HEAP_OPTS=-Xms128m -Xmx384m")
	ctl := func(args ...string) string {
		cmd := exec.Command("bash", append([]string{script}, args...)...)
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("kafka.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String()
	}
	out := ctl("start")
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "KAFKA_BROKERS="); ok {
			brokers = strings.Split(v, ",")
		}
	}
	if brokers == nil {
		t.Fatalf("kafka.sh start printed no KAFKA_BROKERS: %q", out)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			ctl("stop")
		}
	}
	t.Cleanup(stop)
	return brokers, stop
}

// TestStopWhileBrokersDown: with the only broker stopped under running
// hosts (admin API on, so the fleet registry is in use), SIGTERM ends a
// host within shutdown.drain_timeout plus the stated margin
// (assembly.ShutdownMargin, 15 s), and a second SIGTERM during a shutdown
// ends the process at once, non-zero, saying so. Before, the first hung in
// the fleet registry's leave (a produce that ignored its context) for
// minutes, and the second was ignored.
func TestStopWhileBrokersDown(t *testing.T) {
	brokers, stopBroker := ownBroker(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 2, in, out, dlq)
	kafkatest.Produce(t, brokers, in, 200, func(i int) string { return fmt.Sprintf("v-%d", i) })
	const drain = 3 * time.Second
	procs := make([]*proc, 2)
	for i := range procs {
		b, err := os.ReadFile(writeConfig(t, brokers, fmt.Sprintf("%s-%d", n, i), modules["uppercase"], in, out, dlq, ""))
		if err != nil {
			t.Fatal(err)
		}
		y := strings.Replace(string(b), "admin:\n  enabled: false", fmt.Sprintf("admin:\n  listen: 127.0.0.1:0\n  store_dir: %s", t.TempDir()), 1)
		y = strings.Replace(y, "drain_timeout: 5s", fmt.Sprintf("drain_timeout: %s", drain), 1)
		cfg := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(cfg, []byte(y), 0o644); err != nil {
			t.Fatal(err)
		}
		procs[i] = startProcEnv(t, []string{"WASMSTREAM_ADMIN_TOKEN=" + adminToken(n)}, "run", "--config", cfg)
	}
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, 2*time.Minute, "both hosts' outputs", func(rs []*kgo.Record) bool { return len(rs) >= 400 })
	for i, p := range procs {
		kafkatest.Eventually(t, time.Minute, fmt.Sprintf("host %d in the fleet registry", i), func() bool {
			return strings.Contains(p.logText(), "fleet registry")
		})
	}
	stopBroker()

	// One SIGTERM: bounded.
	t0 := time.Now()
	procs[0].cmd.Process.Signal(syscall.SIGTERM)
	bound := drain + 15*time.Second + 10*time.Second // the margin, and room for a slow machine
	select {
	case <-procs[0].done:
	case <-time.After(bound):
		t.Fatalf("the host was still running %v after SIGTERM with its broker down (drain_timeout %v + margin 15 s)\n%s", bound, drain, tail(procs[0].logText(), 20))
	}
	t.Logf("stopped %v after SIGTERM with the broker down, exit status %d", time.Since(t0).Round(100*time.Millisecond), procs[0].cmd.ProcessState.ExitCode())
	// Its last commits could not be made: it says so and exits 1 (what it
	// had not committed is processed again on restart), not 0 as if the
	// stop had been clean, and not killed by the signal.
	if code := procs[0].cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("exit status %d after a stop with the broker down, want 1\n%s", code, tail(procs[0].logText(), 20))
	}
	if !strings.Contains(procs[0].logText(), "shutdown did not finish in time") {
		t.Fatalf("the host did not say its stop was cut short:\n%s", tail(procs[0].logText(), 20))
	}

	// Two SIGTERMs: the second ends it at once.
	p := procs[1]
	p.cmd.Process.Signal(syscall.SIGTERM)
	kafkatest.Eventually(t, 10*time.Second, "the shutdown began", func() bool { return strings.Contains(p.logText(), "shutting down") })
	t1 := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		t.Fatalf("a second SIGTERM during the shutdown did not end the process within 5 s\n%s", tail(p.logText(), 20))
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit status %d after a second SIGTERM, want %d", code, 128+int(syscall.SIGTERM))
	}
	if !strings.Contains(p.logText(), "a second signal (terminated) during shutdown") {
		t.Fatalf("the process did not say why it exited at once:\n%s", tail(p.logText(), 10))
	}
	t.Logf("a second SIGTERM ended the process in %v", time.Since(t1).Round(time.Millisecond))
}

// TestSignalRightAfterStart: a SIGTERM that arrives while the process
// starts (as it reads its config, connects, creates topics, compiles) ends
// it cleanly, status 0: not killed by the signal, not a failed start.
func TestSignalRightAfterStart(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 2, in, out, dlq)
	cfg := writeConfig(t, brokers, n, modules["uppercase"], in, out, dlq, "")
	for _, after := range []time.Duration{30 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond, time.Second} {
		cmd := exec.Command(binary, "run", "--config", cfg)
		cmd.Env = append(os.Environ(), "WASMSTREAM_HOST_ID=early-stop")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var log bytes.Buffer
		logged := make(chan struct{})
		go func() {
			defer close(logged)
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				log.WriteString(sc.Text() + "\n")
			}
		}()
		time.Sleep(after)
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { <-logged; done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			t.Fatalf("SIGTERM %v after start: still running a minute later", after)
		}
		st := cmd.ProcessState
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("SIGTERM %v after start killed the process (%v) instead of stopping it\n%s", after, ws.Signal(), log.String())
		}
		if st.ExitCode() != 0 {
			t.Fatalf("SIGTERM %v after start: exit status %d\n%s", after, st.ExitCode(), log.String())
		}
	}
}
