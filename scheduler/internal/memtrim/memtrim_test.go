package memtrim

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestTrimAfterTheLastClose: instances closed in a row make one trim,
// settle after the last of them; instances closed within gap of a trim
// make the next one wait for gap; none closed, none runs.
func TestTrimAfterTheLastClose(t *testing.T) {
	const settle, gap = 100 * time.Millisecond, 600 * time.Millisecond
	start0 := time.Now()
	var mu sync.Mutex
	var at []time.Duration // when each trim ran, since start0
	ran := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(at)
	}
	tr := start(settle, gap, func() {
		mu.Lock()
		at = append(at, time.Since(start0))
		mu.Unlock()
	})
	defer tr.Stop()

	time.Sleep(3 * settle)
	if ran() != 0 {
		t.Fatal("a trim ran with no instance closed")
	}
	// Five closes 50 ms apart: one trim, settle after the last.
	var lastClose time.Duration
	for range 5 {
		lastClose = time.Since(start0)
		tr.Closed()
		time.Sleep(50 * time.Millisecond)
	}
	kafkatest.Eventually(t, 10*time.Second, "the first trim", func() bool { return ran() == 1 })
	if got := at[0]; got < lastClose+settle {
		t.Fatalf("the trim ran %v after the start, before settle (%v) after the last close (%v)", got, settle, lastClose)
	}
	time.Sleep(3 * settle)
	if n := ran(); n != 1 {
		t.Fatalf("%d trims for one run of closes", n)
	}
	// Another close right after: its trim waits for gap since the first.
	tr.Closed()
	kafkatest.Eventually(t, 10*time.Second, "the second trim", func() bool { return ran() == 2 })
	if d := at[1] - at[0]; d < gap {
		t.Fatalf("trims %v apart, want at least %v", d, gap)
	}
	kafkatest.Eventually(t, 10*time.Second, "Trims() to count both", func() bool { return tr.Trims() == 2 })
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
