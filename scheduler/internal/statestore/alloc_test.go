package statestore

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// A commit's flush writes each key once (state's lastWrites): what a write
// allocates is Apply's cost per key. bbolt's Bucket.Put copies the key and
// makes a cursor (and its stack) of its own; Apply adds nothing a write:
// its buckets are looked up and its cursor made once a transaction
// (txBuckets). Before, each write looked its bucket up (tx.Bucket: the
// bucket and a copy of its header) and read the old value through
// Bucket.Get (a cursor and its stack): 5.4 allocations and 267 bytes a
// write, then 3.4 and 197 (216 under the race detector). This fails when
// it grows.
func TestApplyAllocs(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "s.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const keys = 256
	ws := make([]Write, keys)
	for i := range ws {
		ws[i] = Write{Key: fmt.Appendf(nil, "user-%05d", i), Value: []byte("12345678")}
	}
	apply := func() {
		if err := s.Apply(ws, 1); err != nil {
			t.Fatal(err)
		}
	}
	apply() // the keys exist: a write replaces a value, as a count's does
	// The least of three counts: another goroutine of the test binary
	// allocating meanwhile only adds to one.
	allocs, bytes := math.Inf(1), math.Inf(1)
	for range 3 {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range 8 {
			apply()
		}
		runtime.ReadMemStats(&m1)
		allocs = min(allocs, float64(m1.Mallocs-m0.Mallocs)/(8*keys))
		bytes = min(bytes, float64(m1.TotalAlloc-m0.TotalAlloc)/(8*keys))
	}
	t.Logf("%.1f allocations, %.0f bytes a write", allocs, bytes)
	if allocs > 4 || bytes > 240 {
		t.Fatalf("Apply allocates %.1f times, %.0f bytes a write; at most 4 and 240 (TestApplyAllocs)", allocs, bytes)
	}
}

// A store growing in one long write transaction maps its file once: a new
// mapping copies every key and value the transaction touched out of the
// old one (bbolt's dereference), thousands of allocations each time the
// file outgrew the map: 48 allocations a write here, 4 since. Its file
// grows by what it needs and a mebibyte, not by bbolt's 16 MiB step for
// files mapped past it: 18 MB here, 34 MB before.
func TestGrowingStoreMapsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 8 MiB of values in one transaction: a file past the 4 MiB a store
	// mapped before, so the old map would have been made anew at least
	// once.
	ws := make([]Write, 8192)
	for i := range ws {
		ws[i] = Write{Key: fmt.Appendf(nil, "user-%05d", i), Value: make([]byte, 1024)}
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	if err := s.Apply(ws, 1); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&m1)
	perWrite := float64(m1.Mallocs-m0.Mallocs) / float64(len(ws))
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f allocations a write; file %d bytes", perWrite, info.Size())
	if perWrite > 12 {
		t.Errorf("a growing store's write allocates %.1f times; at most 12 (a new map copies the transaction's keys and values)", perWrite)
	}
	if info.Size() > 24<<20 {
		t.Errorf("the store's file is %d bytes for 8 MiB of values; at most 24 MiB (33 when it was mapped anew as it grew)", info.Size())
	}
}
