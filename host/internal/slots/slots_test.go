package slots

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hog keeps k calls of g running, each holding its slot for d, until stop.
func hog(t *testing.T, g *Group, k int, d time.Duration, stop <-chan struct{}, wg *sync.WaitGroup) {
	for i := 0; i < k; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				h, err := g.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				select {
				case <-time.After(d):
				case <-stop:
				}
				h.Release()
			}
		}()
	}
}

// A group whose calls run to their deadline holds every slot; a second
// group making one short call at a time waits for one of those calls to
// return, then keeps its share: it is not queued behind the hog again. With
// a plain FIFO of slots (the engine before groups) each short call waited
// for a hog call: 100 calls took 100 × 150 ms / 2.
func TestShortCallsKeepTheirShare(t *testing.T) {
	p := New(2, Options{})
	a, b := p.Group("a", 1), p.Group("b", 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	const hogCall = 150 * time.Millisecond
	hog(t, a, 6, hogCall, stop, &wg)
	deadline := time.Now().Add(5 * time.Second)
	for a.Running() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the hog never took both slots")
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	const n = 100
	for i := 0; i < n; i++ {
		h, err := b.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Microsecond) // the call
		h.Release()
	}
	took := time.Since(start)
	// At most one hog call of waiting, then n short calls (sleeps of
	// 100 µs, which take longer on a loaded machine).
	if bound := hogCall + n*5*time.Millisecond; took > bound {
		t.Fatalf("%d short calls took %s beside the hog, bound %s", n, took, bound)
	}
	t.Logf("%d short calls took %s beside a group holding its calls %s", n, took, hogCall)
}

// Weighted groups that always have calls waiting share slot time by weight.
func TestWeights(t *testing.T) {
	p := New(4, Options{})
	a, b := p.Group("a", 3), p.Group("b", 1)
	var used [2]atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for gi, g := range []*Group{a, b} {
		for i := 0; i < 8; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					h, err := g.Acquire(context.Background())
					if err != nil {
						t.Error(err)
						return
					}
					s := time.Now()
					time.Sleep(2 * time.Millisecond)
					used[gi].Add(int64(time.Since(s)))
					h.Release()
				}
			}()
		}
	}
	time.Sleep(1500 * time.Millisecond) // the measuring window, not an assertion
	close(stop)
	wg.Wait()
	ratio := float64(used[0].Load()) / float64(used[1].Load())
	if ratio < 2.3 || ratio > 3.7 {
		t.Fatalf("slot time a/b = %.2f, want about 3 (weights 3 and 1)", ratio)
	}
	t.Logf("slot time a/b = %.2f (weights 3:1)", ratio)
}

// A group that stopped making calls does not keep its share: after Linger
// the other group gets every slot.
func TestIdleShareReturns(t *testing.T) {
	p := New(2, Options{Linger: 20 * time.Millisecond})
	a, b := p.Group("a", 1), p.Group("b", 1)
	h, _ := b.Acquire(context.Background())
	h.Release() // b is now in its linger
	stop := make(chan struct{})
	var wg sync.WaitGroup
	hog(t, a, 4, 50*time.Millisecond, stop, &wg)
	defer wg.Wait()
	defer close(stop)
	deadline := time.Now().Add(2 * time.Second)
	for a.Running() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("a holds %d slots long after b went idle", a.Running())
		}
		time.Sleep(time.Millisecond)
	}
}

// Acquire gives up when its context ends; the slot is not lost.
func TestAcquireCanceled(t *testing.T) {
	p := New(1, Options{})
	a, b := p.Group("a", 1), p.Group("b", 1)
	h, err := a.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.Acquire(ctx); err == nil {
		t.Fatal("acquired a slot held by another group")
	}
	h.Release()
	h, err = b.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	if p.used != 0 {
		t.Fatalf("%d slots in use after every call returned", p.used)
	}
}

// Hammer (run with -race): groups of several weights acquire, cancel and
// release at random; never more calls hold a slot than there are slots,
// nobody waits forever, and every slot comes back.
func TestHammer(t *testing.T) {
	const n = 3
	p := New(n, Options{Linger: time.Millisecond})
	var holding, peak atomic.Int64
	var wg sync.WaitGroup
	for gi := 0; gi < 5; gi++ {
		g := p.Group(string(rune('a'+gi)), 1+gi%3)
		for k := 0; k < 6; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(gi), uint64(k)))
				for i := 0; i < 300; i++ {
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					if rng.IntN(4) == 0 {
						ctx, cancel = context.WithTimeout(ctx, time.Duration(rng.IntN(200))*time.Microsecond)
					}
					h, err := g.Acquire(ctx)
					cancel()
					if err != nil {
						continue
					}
					if c := holding.Add(1); c > peak.Load() {
						peak.Store(c) // approximate peak; the bound check is below
					}
					if c := holding.Load(); c > n {
						t.Errorf("%d calls hold a slot, pool of %d", c, n)
					}
					if rng.IntN(3) == 0 {
						time.Sleep(time.Duration(rng.IntN(100)) * time.Microsecond)
					}
					holding.Add(-1)
					h.Release()
				}
			}()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("callers still waiting after 60 s: a slot was lost")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.used != 0 {
		t.Fatalf("%d slots in use after every call returned", p.used)
	}
	for _, g := range p.order {
		if g.running != 0 || len(g.waiters) != 0 {
			t.Fatalf("group %s: %d running, %d waiting at the end", g.name, g.running, len(g.waiters))
		}
	}
	t.Logf("peak %d of %d slots", peak.Load(), n)
}

// Busy integrates the slots in use over time.
func TestBusyIntegratesSlotsInUse(t *testing.T) {
	p := New(2, Options{})
	g := p.Group("a", 1)
	b0 := p.Busy()
	h1, _ := g.Acquire(context.Background())
	h2, _ := g.Acquire(context.Background())
	start := time.Now()
	time.Sleep(40 * time.Millisecond)
	h1.Release()
	one := time.Since(start) // both held until here
	time.Sleep(40 * time.Millisecond)
	h2.Release()
	el := time.Since(start)
	time.Sleep(40 * time.Millisecond) // nothing in use: adds nothing
	got := p.Busy() - b0
	// Two slots until one, one slot for the rest of el.
	want := one + el
	if got < want-5*time.Millisecond || got > want+5*time.Millisecond {
		t.Fatalf("busy %v, want ~%v", got, want)
	}
}
