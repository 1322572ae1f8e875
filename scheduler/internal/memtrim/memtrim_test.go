package memtrim

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestTrimAfterTheLastClose: instances closed in a row make one trim,
// settle after the last of them; instances closed within gap of a trim
// make the next one wait for gap; none closed, none runs.
func TestTrimAfterTheLastClose(t *testing.T) {
	const settle, gap = 100 * time.Millisecond, 600 * time.Millisecond
	var ran atomic.Int64
	var at [8]atomic.Int64 // when each trim ran, ns since start0
	start0 := time.Now()
	tr := start(settle, gap, func() {
		n := ran.Add(1)
		if n <= int64(len(at)) {
			at[n-1].Store(int64(time.Since(start0)))
		}
	})
	defer tr.Stop()

	time.Sleep(3 * settle)
	if ran.Load() != 0 {
		t.Fatal("a trim ran with no instance closed")
	}
	// Five closes 50 ms apart: one trim, settle after the last.
	var lastClose time.Duration
	for range 5 {
		lastClose = time.Since(start0)
		tr.Closed()
		time.Sleep(50 * time.Millisecond)
	}
	waitFor(t, func() bool { return ran.Load() == 1 }, "the first trim")
	if got := time.Duration(at[0].Load()); got < lastClose+settle {
		t.Fatalf("the trim ran %v after the start, before settle (%v) after the last close (%v)", got, settle, lastClose)
	}
	time.Sleep(3 * settle)
	if n := ran.Load(); n != 1 {
		t.Fatalf("%d trims for one run of closes", n)
	}
	// Another close right after: its trim waits for gap since the first.
	tr.Closed()
	waitFor(t, func() bool { return ran.Load() == 2 }, "the second trim")
	if d := time.Duration(at[1].Load() - at[0].Load()); d < gap {
		t.Fatalf("trims %v apart, want at least %v", d, gap)
	}
	if tr.Trims() != 2 {
		t.Fatalf("Trims() = %d, want 2", tr.Trims())
	}
}

// TestStopWhileSettling: Stop returns while a trim is pending, and it
// never runs.
func TestStopWhileSettling(t *testing.T) {
	var ran atomic.Int64
	tr := start(time.Hour, time.Hour, func() { ran.Add(1) })
	tr.Closed()
	done := make(chan struct{})
	go func() { tr.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return while a trim was settling")
	}
	if ran.Load() != 0 {
		t.Fatal("a trim ran after Stop")
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
