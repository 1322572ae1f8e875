package config

import (
	"os/exec"
	"strings"
	"testing"
)

// The configuration knows the host's bounds and fault kinds from packages
// that link no WebAssembly runtime: loading or validating a file (the CLI's
// validate, the admin API) must not pull wazero in.
func TestConfigLinksNoRuntime(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the dependencies with")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.Contains(dep, "tetratelabs/wazero") || dep == "github.com/wasmstream/wasmstream/host" {
			t.Errorf("scheduler/config depends on %s", dep)
		}
	}
}
