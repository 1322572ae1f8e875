package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestStorePrunes: 60 versions of a pipeline deployed one after another,
// a module uploaded and never deployed, a module the fleet names (a
// canary, say) and a file the manifest does not name. Pruning keeps the
// active version, the 50 of its history, and what the fleet names; the
// rest goes, the orphan file too, and the manifest still names only files
// on disk. Before, the store kept all 62 modules forever; nothing newer
// than the retention is pruned.
func TestStorePrunes(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var versions []string
	for i := range 60 {
		d, err := s.Put("p", "upload", module(fmt.Sprint("v", i)))
		if err == nil {
			err = s.Activate("p", d)
		}
		if err != nil {
			t.Fatal(err)
		}
		versions = append(versions, d)
	}
	uploaded, _ := s.Put("p", "upload", module("never deployed"))
	fleet, _ := s.Put("p", "registry", module("canary"))
	orphan := filepath.Join(dir, "modules", Digest([]byte("orphan"))+".wasm")
	os.WriteFile(orphan, []byte("orphan"), 0o644)
	files := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, "modules", "*.wasm"))
		return len(m)
	}
	if n, _, err := s.Prune(nil, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("a prune of what is newer than the retention removed %d: %v", n, err)
	}
	before := files()
	n, size, err := s.Prune(map[string]bool{fleet: true}, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("60 versions deployed, one uploaded, one the fleet names, an orphan file: %d files before the prune, %d after (%d modules, %d bytes pruned)", before, files(), n, size)
	if files() != 52 || n != 10 {
		t.Fatalf("%d files, %d pruned", files(), n)
	}
	for _, d := range append(versions[9:], fleet) {
		if _, err := s.Get(d); err != nil {
			t.Errorf("kept module %s: %v", d[:12], err)
		}
	}
	for _, d := range append(versions[:9], uploaded) {
		if _, err := s.Get(d); !errors.Is(err, ErrNotFound) {
			t.Errorf("pruned module %s: %v", d[:12], err)
		}
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Errorf("the orphan file: %v", err)
	}
	for d := range s.Snapshot().Modules {
		if _, err := os.Stat(s.path(d)); err != nil {
			t.Errorf("the manifest names %s, not on disk", d[:12])
		}
	}
}

// sourceFunc is a ModuleSource.
type sourceFunc func(digest string) ([]byte, error)

func (f sourceFunc) Module(_ context.Context, digest string, _ int) ([]byte, error) { return f(digest) }

// TestFetch: a module the store has is not read from the source; one it
// lacks is read, stored (source "registry") and served from the store next
// time; one the source answers with other bytes than its digest names is
// refused and not stored.
func TestFetch(t *testing.T) {
	s, err := OpenStore(t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	src := sourceFunc(func(digest string) ([]byte, error) {
		reads++
		if digest == Digest(goodModule) {
			return goodModule, nil
		}
		return []byte("\x00asm other bytes"), nil
	})
	for range 2 {
		b, err := s.Fetch(context.Background(), src, "p", Digest(goodModule), len(goodModule))
		if err != nil || !bytes.Equal(b, goodModule) {
			t.Fatalf("fetch: %v", err)
		}
	}
	if reads != 1 || s.Snapshot().Modules[Digest(goodModule)].Source != "registry" {
		t.Fatalf("%d reads from the source, store: %+v", reads, s.Snapshot().Modules)
	}
	liar := strings.Repeat("ab", 32)
	if _, err := s.Fetch(context.Background(), src, "p", liar, 0); err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Fatalf("a module not matching its digest: %v", err)
	}
	if _, err := s.Get(liar); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a module not matching its digest was stored: %v", err)
	}
}
