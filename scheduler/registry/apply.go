package registry

import (
	"context"
	"sync"
)

// Applying a deployment reads its module (when the host lacks it) and
// compiles it: seconds, and longer on a slow broker. It runs off the
// registry's goroutine, which must keep writing the host's status every
// HeartbeatInterval and reading what the other hosts write: one goroutine
// per pipeline with a deployment to apply, started when the first one
// arrives and ended when none waits. A deployment read while its
// pipeline's previous one is applied replaces any other waiting: applying
// makes the host run the latest deployment, so the ones in between need
// not be applied one by one.

// appliers are the goroutines applying deployments, by pipeline.
type appliers struct {
	mu      sync.Mutex
	waiting map[string]*Deployment // the next deployment of each pipeline with a goroutine; nil: none waits
	stopped bool
	ctx     context.Context // ends at stop
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func (a *appliers) init() {
	a.waiting = map[string]*Deployment{}
	a.ctx, a.cancel = context.WithCancel(context.Background())
}

// enqueue hands d to its pipeline's goroutine, starting one if none runs.
func (a *appliers) enqueue(r *Registry, d Deployment) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return
	}
	if _, running := a.waiting[d.Pipeline]; running {
		a.waiting[d.Pipeline] = &d
		return
	}
	a.waiting[d.Pipeline] = nil
	a.wg.Add(1)
	go a.run(r, d)
}

// run applies d, then each deployment of its pipeline that arrived
// meanwhile, until none waits.
func (a *appliers) run(r *Registry, d Deployment) {
	defer a.wg.Done()
	for {
		r.mu.Lock()
		apply := r.apply
		if cur, ok := r.deploys[d.Pipeline]; ok {
			d = cur // the latest read: one superseded meanwhile is not applied
		}
		r.mu.Unlock()
		apply(a.ctx, d)
		a.mu.Lock()
		next := a.waiting[d.Pipeline]
		if next == nil || a.stopped {
			delete(a.waiting, d.Pipeline)
			a.mu.Unlock()
			return
		}
		a.waiting[d.Pipeline] = nil
		a.mu.Unlock()
		d = *next
	}
}

// stop ends the applies in progress (their ctx) and starts no more.
func (a *appliers) stop() {
	a.mu.Lock()
	a.stopped = true
	a.mu.Unlock()
	a.cancel()
}

func (a *appliers) isStopped() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stopped
}

// wait waits for the goroutines to end.
func (a *appliers) wait() { a.wg.Wait() }
