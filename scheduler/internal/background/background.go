// Package background owns the goroutines a pipeline starts on the side of
// its loops, so that every one of them is waited for.
package background

import "sync"

// Group owns the goroutines a pipeline starts on the side of its
// loops — a failure copy produced again after a backoff, a failed output's
// record routed to its retry, cut-off tasks retired — so that every one of
// them has an owner that waits for it. Once closed it starts none: work
// arriving then is left undone, and its record uncommitted.
type Group struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs f on a goroutine of its own and reports true, or reports false
// when the pipeline is shutting down.
func (b *Group) Go(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
	return true
}

// Close stops new goroutines and waits for the running ones.
func (b *Group) Close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wg.Wait()
}
