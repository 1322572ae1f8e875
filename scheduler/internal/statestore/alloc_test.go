package statestore

import (
	"fmt"
	"math"
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
