package admin

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Temporary files a cut-short write left in the store are removed when it
// opens, each one logged; modules and the manifest stay.
func TestOpenStoreRemovesLeftoverTemps(t *testing.T) {
	var logBuf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	dir := t.TempDir()
	s, err := OpenStore(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.Put("p", "config", goodModule)
	if err != nil {
		t.Fatal(err)
	}
	leftovers := []string{filepath.Join(dir, ".tmp-1234"), filepath.Join(dir, "modules", ".tmp-5678")}
	for _, f := range leftovers {
		if err := os.WriteFile(f, make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logBuf.Reset()
	again, err := OpenStore(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range leftovers {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s is still there: %v", f, err)
		}
		if !strings.Contains(logBuf.String(), "file="+f) {
			t.Errorf("the removal of %s is not logged:\n%s", f, logBuf.String())
		}
	}
	if b, err := again.Get(d); err != nil || !bytes.Equal(b, goodModule) {
		t.Fatalf("the stored module after cleaning: %v", err)
	}
}
