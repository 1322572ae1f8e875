package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

// cacheEngine is an engine with its compile cache in dir.
func cacheEngine(t *testing.T, dir string) *Engine {
	t.Helper()
	e, err := NewEngine(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// loadUppercase loads the uppercase guest from e and checks that it works.
func loadUppercase(t *testing.T, e *Engine, wasm []byte) (*Module, time.Duration) {
	t.Helper()
	start := time.Now()
	m, err := e.Load(context.Background(), wasm, ModuleConfig{Name: "test"})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	in := newInstance(t, m)
	defer in.Close(context.Background())
	res := in.Process(context.Background(), &abi.Record{Topic: "in", Value: []byte("abc"), Attempt: 1}, nil)
	if res.Err != nil || len(res.Outputs) != 1 || string(res.Outputs[0].Value) != "ABC" {
		t.Fatalf("uppercase after load: %v %+v", res.Err, res.Outputs)
	}
	return m, took
}

// entries lists the compiled-code entries of the cache in dir (every file
// but manifests).
func entries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != "manifest.json" {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// A restart reads compiled code from the cache instead of compiling; an
// entry damaged, replaced by another module's or added by someone else is
// never used: it is deleted and the module compiled again, and works.
func TestCompileCacheOnDisk(t *testing.T) {
	wasm := guest(t, "plugins/examples/uppercase")
	other := guest(t, "plugins/examples/filter")
	dir := filepath.Join(t.TempDir(), "cache")

	m, cold := loadUppercase(t, cacheEngine(t, dir), wasm)
	if m.FromCache() {
		t.Fatal("first load reported from the cache")
	}
	ents := entries(t, dir)
	if len(ents) != 1 {
		t.Fatalf("entries after the first load: %v, want 1", ents)
	}
	e := cacheEngine(t, dir)
	m, warm := loadUppercase(t, e, wasm)
	if !m.FromCache() || e.CacheStats().Hits != 1 {
		t.Fatalf("second load: from cache %v, stats %+v", m.FromCache(), e.CacheStats())
	}
	t.Logf("load: %v compiling, %v from the cache", cold, warm)

	// Damaged: one byte of the compiled code flipped.
	b, err := os.ReadFile(ents[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(ents[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	e = cacheEngine(t, dir)
	if m, _ = loadUppercase(t, e, wasm); m.FromCache() || e.CacheStats().Rejected != 1 {
		t.Fatalf("damaged entry: from cache %v, stats %+v; want compiled again, 1 rejected", m.FromCache(), e.CacheStats())
	}
	// And the entry compiled again is trusted on the next start.
	e = cacheEngine(t, dir)
	if m, _ = loadUppercase(t, e, wasm); !m.FromCache() {
		t.Fatalf("after recompiling a damaged entry: not from the cache, stats %+v", e.CacheStats())
	}

	// Foreign: another module's valid entry put in this one's place, and
	// a file nobody wrote through the host.
	om, err := cacheEngine(t, dir).Load(context.Background(), other, ModuleConfig{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	om.Close(context.Background())
	var theirs string
	for _, p := range entries(t, dir) {
		if filepath.Dir(filepath.Dir(p)) != filepath.Dir(filepath.Dir(ents[0])) {
			theirs = p
		}
	}
	if theirs == "" {
		t.Fatalf("no entry for the second module: %v", entries(t, dir))
	}
	b, err = os.ReadFile(theirs)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ents[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	planted := filepath.Join(filepath.Dir(ents[0]), "0123456789abcdef")
	if err := os.WriteFile(planted, []byte("not compiled by this host"), 0o600); err != nil {
		t.Fatal(err)
	}
	e = cacheEngine(t, dir)
	if m, _ := loadUppercase(t, e, wasm); m.FromCache() || e.CacheStats().Rejected != 2 {
		t.Fatalf("foreign entries: from cache %v, stats %+v; want compiled again, 2 rejected", m.FromCache(), e.CacheStats())
	}
	if _, err := os.Stat(planted); !os.IsNotExist(err) {
		t.Fatalf("planted file still there: %v", err)
	}
}

// A cache directory others may write to, or that is not a directory, is
// refused with an error saying why.
func TestCompileCacheRefusesUnsafeDirectories(t *testing.T) {
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := NewEngine(open, nil); err == nil || !strings.Contains(err.Error(), "may be written by other users") {
		t.Fatalf("world-writable directory: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewEngine(file, nil); err == nil {
		t.Fatal("a file accepted as the cache directory")
	}
	if os.Geteuid() == 0 {
		// As root, a directory of another user's can be made.
		theirs := filepath.Join(t.TempDir(), "theirs")
		if err := os.Mkdir(theirs, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if _, err := NewEngine(theirs, nil); err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
			t.Fatalf("another user's directory: %v", err)
		}
	}
}

// Loading the Go uppercase guest: compiled (no cache on disk) against read
// from a warm compile cache on disk (a restart). Report the ratio of the
// two ns/op.
func BenchmarkLoadGoGuest(b *testing.B) {
	wasm := guest(b, "plugins/examples/uppercase")
	dir := filepath.Join(b.TempDir(), "cache")
	for _, c := range []struct {
		name string
		dir  string
	}{{"compiled", ""}, {"from_cache", dir}} {
		b.Run(c.name, func(b *testing.B) {
			if c.dir != "" {
				warm, err := NewEngine(c.dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				m, err := warm.Load(context.Background(), wasm, ModuleConfig{Name: "test"})
				if err != nil {
					b.Fatal(err)
				}
				m.Close(context.Background())
				warm.Close(context.Background())
			}
			b.ReportAllocs()
			for b.Loop() {
				// A new engine each time, as after a restart.
				e, err := NewEngine(c.dir, nil)
				if err != nil {
					b.Fatal(err)
				}
				m, err := e.Load(context.Background(), wasm, ModuleConfig{Name: "test"})
				if err != nil {
					b.Fatal(err)
				}
				if m.FromCache() != (c.dir != "") {
					b.Fatalf("from cache %v", m.FromCache())
				}
				m.Close(context.Background())
				e.Close(context.Background())
			}
		})
	}
}
