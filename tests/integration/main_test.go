//go:build integration

// Package integration runs wasmstream end to end against the real Apache
// Kafka broker that the test command starts (KAFKA_BROKERS), with the
// wasmstream binary as a separate process where a test kills it.
package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

var (
	binary  string                // the wasmstream CLI built for this run
	modules = map[string]string{} // example name -> .wasm path
	seq     atomic.Int64
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wasmstream-it")
	if err != nil {
		panic(err)
	}
	// Everything this binary writes to the temporary directory lands in dir,
	// removed when the tests end: the modules built below (through a
	// testing.B that never runs its clean-ups) and the Redpanda transform.
	os.Setenv("TMPDIR", dir)
	tb := &testing.B{}
	root := wt.RepoRoot(tb)
	binary = filepath.Join(dir, "wasmstream")
	cmd := exec.Command("go", "build", "-o", binary, "./cmd/wasmstream")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build wasmstream: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	for _, name := range []string{"uppercase", "enrich", "hash", "lookup", "count"} {
		p := filepath.Join(dir, name+".wasm")
		if err := os.WriteFile(p, wt.BuildGoGuest(tb, "plugins/examples/"+name), 0o644); err != nil {
			panic(err)
		}
		modules[name] = p
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// names returns topic and group names unique to this run. Every topic
// whose name holds them — those the test creates, and those the host makes
// for it (retry, changelog and registry topics) — is deleted from the
// brokers the test command started when the test ends
// (kafkatest.DeleteNamedAtEnd: after the processes it started are gone).
func names(t *testing.T) (prefix string) {
	prefix = fmt.Sprintf("it-%s-%d-%d", strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), time.Now().UnixNano()%1e9, seq.Add(1))
	for _, env := range []string{"KAFKA_BROKERS", "KAFKA_SECURE_BROKERS", "KAFKA_CLUSTER_BROKERS"} {
		if b := os.Getenv(env); b != "" {
			kafkatest.DeleteNamedAtEnd(t, strings.Split(b, ","), prefix)
		}
	}
	return prefix
}

func writeConfig(t *testing.T, brokers []string, group, module, in, out, dlq string, extra string) string {
	quoted := make([]string, len(brokers))
	for i, b := range brokers {
		quoted[i] = fmt.Sprintf("%q", b)
	}
	y := fmt.Sprintf(`kafka:
  brokers: [%s]
  group: %s
  commit_interval: 200ms
  session_timeout: 10s
pipelines:
  - name: p
    module: %s
    inputs: [%s]
    output: %s
    dead_letter_topic: %s
    retry: {max_attempts: 1}
    limits:
      record_timeout: 10s # generous: CI machines are small and shared
      memory_pages: 256
shutdown:
  drain_timeout: 5s
status:
  interval: 1s
metrics:
  listen: 127.0.0.1:0
admin:
  enabled: false
%s`, strings.Join(quoted, ", "), group, module, in, out, dlq, extra)
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// proc is a wasmstream process.
type proc struct {
	cmd    *exec.Cmd
	log    string
	done   chan error
	exited atomic.Bool // the process ended (done may already be drained)
}

func startProc(t *testing.T, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, nil, args...)
}

// startProcEnv starts wasmstream with extra environment variables. Unless
// env names one, the process gets a host.id of its own among the test's
// live processes, the lowest free: two hosts of one group need distinct ids
// (static membership), and a process started after one was killed takes
// the dead one's id, as a restarted host does.
func startProcEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	// WASMSTREAM_SOAK is the tests' own (soakDuration): the host refuses
	// a WASMSTREAM_ variable that names no config key.
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "WASMSTREAM_SOAK=") }), env...)
	slot := -1
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "WASMSTREAM_HOST_ID=") }) {
		slot = hostSlots.take(t)
		cmd.Env = append(cmd.Env, fmt.Sprintf("WASMSTREAM_HOST_ID=host-%d", slot))
	}
	p := startCmd(t, cmd)
	if slot >= 0 {
		hostSlots.set(t, slot, p)
	}
	return p
}

// hostSlots are each running test's processes by host.id slot.
var hostSlots = slotTable{m: map[*testing.T][]*proc{}}

type slotTable struct {
	mu sync.Mutex
	m  map[*testing.T][]*proc
}

// take returns the lowest slot of t with no live process (reserving it
// until set).
func (s *slotTable) take(t *testing.T) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps, ok := s.m[t]
	if !ok {
		t.Cleanup(func() { s.mu.Lock(); delete(s.m, t); s.mu.Unlock() })
	}
	for i, p := range ps {
		if p == nil || p.exited.Load() {
			ps[i] = &proc{} // reserved until set
			return i
		}
	}
	s.m[t] = append(ps, &proc{})
	return len(ps)
}

func (s *slotTable) set(t *testing.T, slot int, p *proc) {
	s.mu.Lock()
	s.m[t][slot] = p
	s.mu.Unlock()
}

// startCmd starts cmd (a wasmstream process, perhaps wrapped) with its output
// in a log file; the process is killed at the end of the test if it still
// runs, and its log shown if the test failed.
func startCmd(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), fmt.Sprintf("wasmstream-%d.log", seq.Add(1)))
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() {
		err := cmd.Wait()
		p.exited.Store(true)
		p.done <- err
		f.Close()
	}()
	t.Cleanup(func() {
		// exited, not cmd.ProcessState: the goroutine above writes that
		// in Wait, and only exited (stored after it) orders the two.
		if !p.exited.Load() {
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("wasmstream log (%s):\n%s", logPath, tail(p.logText(), 60))
		}
	})
	return p
}

func (p *proc) alive() bool {
	select {
	case err := <-p.done:
		p.done <- err
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits for the exit code.
func (p *proc) stop(t *testing.T, within time.Duration) int {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("wasmstream did not exit within %v of SIGTERM", within)
		return -1
	}
}

func (p *proc) kill(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *proc) logText() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	// The errors first: a long log is shown cut in the middle, and a
	// report that shows only part of the output may cut it again.
	var errs []string
	for _, l := range lines {
		if strings.Contains(l, "level=ERROR") && len(errs) < 10 {
			errs = append(errs, l)
		}
	}
	if len(lines) > n {
		lines = append(lines[:n/2:n/2], append([]string{"..."}, lines[len(lines)-n/2:]...)...)
	}
	for i, l := range lines {
		if len(l) > 2000 {
			lines[i] = l[:2000] + "…"
		}
	}
	head := ""
	if len(errs) > 0 {
		head = fmt.Sprintf("first %d ERROR lines:\n%s\nthe log:\n", len(errs), strings.Join(errs, "\n"))
	}
	return fmt.Sprintf("(%d bytes)\n%s%s", len(s), head, strings.Join(lines, "\n"))
}

func ctxTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// readOutcomes reads the output and dead-letter readers until want distinct
// inputs have appeared across the two, and returns how often each did. idOut
// and idDLQ name the input a record stands for.
func readOutcomes(t *testing.T, out, dlq *kafkatest.Reader, want int, idOut, idDLQ func(*kgo.Record) int64) map[int64]int {
	t.Helper()
	seen := map[int64]int{}
	outN, dlN := 0, 0
	kafkatest.Eventually(t, 3*time.Minute, "every input in the output or the dead-letter topic", func() bool {
		out.ReadFor(200 * time.Millisecond)
		dlq.ReadFor(100 * time.Millisecond)
		for _, r := range out.Recs[outN:] {
			seen[idOut(r)]++
		}
		for _, r := range dlq.Recs[dlN:] {
			seen[idDLQ(r)]++
		}
		outN, dlN = len(out.Recs), len(dlq.Recs)
		return len(seen) >= want
	})
	return seen
}

// committedSum is the sum of group's committed offsets on topic.
func committedSum(t *testing.T, brokers []string, group, topic string) int64 {
	t.Helper()
	sum := int64(0)
	for _, o := range kafkatest.Committed(t, brokers, group, topic) {
		sum += o
	}
	return sum
}
