package main

import (
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// TestDemoPortBase: --port-base moves config.yaml's metrics and admin
// listeners and the demo user directory to the base and the two ports
// after it, and points the lookup pipeline (its env and
// async.http.allow_hosts) at the directory's new address; the other
// pipelines keep their keys.
func TestDemoPortBase(t *testing.T) {
	t.Parallel()
	cfgPath := filepath.Join(wt.RepoRoot(t), "config.yaml")
	var stderr strings.Builder
	d := &demoCmd{cf: commonFlags{config: cfgPath, brokers: "embedded"}, lookupAddr: defaultLookupAddr, portBase: 28190, stdout: io.Discard, stderr: &stderr}
	if code := d.ports(); code >= 0 {
		t.Fatalf("ports: exit %d\n%s", code, stderr.String())
	}
	if d.lookupAddr != "127.0.0.1:28192" {
		t.Errorf("the user directory at %s, want 127.0.0.1:28192", d.lookupAddr)
	}
	cfg, err := d.cf.load()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Metrics.Listen != "127.0.0.1:28190" || cfg.Admin.Listen != "127.0.0.1:28191" {
		t.Errorf("metrics.listen %s, admin.listen %s", cfg.Metrics.Listen, cfg.Admin.Listen)
	}
	var lookups int
	for _, p := range cfg.Pipelines {
		all := strings.Join(p.Async.HTTP.AllowHosts, ",")
		for _, v := range p.Env {
			all += " " + v
		}
		if strings.Contains(all, defaultLookupAddr) {
			t.Errorf("pipeline %s still names %s: %s", p.Name, defaultLookupAddr, all)
		}
		if strings.Contains(all, "127.0.0.1:28192") {
			lookups++
		}
	}
	if lookups != 1 {
		t.Errorf("%d pipelines call the directory at its new address, want 1 (lookup)", lookups)
	}
}

// TestDemoPortBaseOutOfRange: a --port-base the demo cannot listen on
// is refused naming the flag, before anything starts.
func TestDemoPortBaseOutOfRange(t *testing.T) {
	t.Parallel()
	cfgPath := filepath.Join(wt.RepoRoot(t), "config.yaml")
	for _, base := range []string{"80", "65534"} {
		code, _, errs := runCLI(t, "demo", "--config", cfgPath, "--port-base", base)
		if code != 2 || !strings.Contains(errs, "--port-base "+base+": want 1024 to 65533") {
			t.Errorf("--port-base %s: exit %d, %s", base, code, errs)
		}
	}
}

// freePortBase is a --port-base whose three ports are free now: the
// demo's tests listen where no other run (a parallel go test, a demo or a
// host on the machine) does, not on config.yaml's fixed ports. The system
// picks the first port; the two after it are held at once to prove them
// free, and all three are let go just before the demo takes them.
func freePortBase(t *testing.T) int {
	t.Helper()
	for range 50 {
		first, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		base := first.Addr().(*net.TCPAddr).Port
		held := []net.Listener{first}
		for p := base + 1; p <= base+2 && p <= 65535; p++ {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				break
			}
			held = append(held, ln)
		}
		for _, ln := range held {
			ln.Close()
		}
		if len(held) == 3 && base <= 65533 {
			return base
		}
	}
	t.Fatal("no three free ports in a row in 50 tries")
	return 0
}
