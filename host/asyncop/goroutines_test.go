package asyncop

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The pool runs every function once, as many at once as are given, reuses
// a goroutine that waits, and ends its goroutines once they have been idle.
func TestGoroutinePool(t *testing.T) {
	p := &goroutinePool{work: make(chan func()), idle: 2 * time.Second}
	base := runtime.NumGoroutine()
	var ran atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	const n = 20
	wg.Add(n)
	for range n {
		p.Go(func() { defer wg.Done(); <-release; ran.Add(1) })
	}
	// All n run at once: none waits for another to end.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() < base+n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines, want %d running at once", runtime.NumGoroutine()-base, n)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	// Now idle (once back at their wait), they take more work without new
	// goroutines.
	time.Sleep(100 * time.Millisecond)
	wg.Add(n)
	for range n {
		p.Go(func() { defer wg.Done(); ran.Add(1) })
	}
	wg.Wait()
	if got := runtime.NumGoroutine() - base; got > n {
		t.Fatalf("%d goroutines after reuse, want at most %d", got, n)
	}
	if ran.Load() != 2*n {
		t.Fatalf("ran %d, want %d", ran.Load(), 2*n)
	}
	deadline = time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines still there after idle", runtime.NumGoroutine()-base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
