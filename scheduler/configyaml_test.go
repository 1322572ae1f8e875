package scheduler

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

// configFromYAML loads a configuration written as YAML, the way the host
// loads its file: through a file in the test's temporary directory.
func configFromYAML(t testing.TB, y string) *config.Config {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
