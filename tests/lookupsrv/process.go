package lookupsrv

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Process is the service running in a process of its own (cmd/lookupsrv).
type Process struct {
	URL string
	Pid int
}

// Host is the service's host:port, for an allow list.
func (p *Process) Host() string { return strings.TrimPrefix(p.URL, "http://") }

// StartProcess builds cmd/lookupsrv and starts it with a fixed delay per
// answer; it stops when the test ends.
func StartProcess(t testing.TB, repoRoot string, delay time.Duration) *Process {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "lookupsrv")
	build := exec.Command("go", "build", "-o", bin, "./tests/lookupsrv/cmd/lookupsrv")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the lookup service: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-delay", delay.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the lookup service: %v", err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "http://") {
		t.Fatalf("the lookup service did not print its address: %q, %v", line, err)
	}
	return &Process{URL: strings.TrimSpace(line), Pid: cmd.Process.Pid}
}
