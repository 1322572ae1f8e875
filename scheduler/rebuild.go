package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/internal/background"
)

// Rebuilding a pipeline whose Kafka member cannot go on (RATIONALE.md,
// "A fenced pipeline is rebuilt, not the host stopped").
//
// An exactly_once pipeline's transactional producer can reach a state
// franz-go does not recover from: fenced by a newer producer with the
// same transactional id, or its epoch bumped by the coordinator while the
// host was paused past transactions.timeout (PRODUCER_FENCED,
// INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE…). Its client must then be
// closed and a new one made; nothing else about the host is wrong. So the
// pipeline does not fail: it says it broke (broke), its poll loop ends,
// and the runner rebuilds it on a goroutine of its own:
//
//  1. the broken pipeline stops as at shutdown (Pipeline.Stop: its tasks
//     drained and retired, nothing committed — its last transaction is
//     not attempted —, its state stores closed as on a revoke, the group
//     left, its client closed);
//  2. a new pipeline is built from the same config, role and client
//     options (newPipeline with from: the same transactional id, whose
//     InitProducerID fences the old epoch), sharing the old one's module
//     versions (a deploy or canary set meanwhile reaches it) and counters;
//  3. it replaces the old one in the runner's list and starts: its member
//     joins the group, and every partition goes on from its committed
//     offset, its state restored from the store and the changelog.
//
// Everything outside the scheduler reads pipelines through the runner, so
// nothing else holds the old one. The rebuilds are bounded: a pipeline
// that broke more than maxRebuilds times within rebuildWindow fails the
// host as before (two hosts with one host.id fence each other forever;
// a rebuild that cannot help should not hide it).

const (
	// maxRebuilds is how many times a pipeline is rebuilt within
	// rebuildWindow; the next break fails the host.
	maxRebuilds = 3
	// rebuildWindow is the window maxRebuilds counts in.
	rebuildWindow = 10 * time.Minute
	// rebuildStopGrace bounds the broken pipeline's stop beyond its drain
	// (leaving the group).
	rebuildStopGrace = 30 * time.Second
)

// rebuilds owns the runner's rebuilds in progress (bg, closed by
// Runner.Stop) and remembers when each pipeline was rebuilt. Safe for
// concurrent use; mu is a leaf.
type rebuilds struct {
	bg background.Group
	mu sync.Mutex
	at map[string][]time.Time // by pipeline name: rebuilds within the window
}

// allow records a rebuild of pipeline at now and reports true, or reports
// false when pipeline was rebuilt maxRebuilds times within rebuildWindow.
func (b *rebuilds) allow(pipeline string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	var recent []time.Time
	for _, t := range b.at[pipeline] {
		if now.Sub(t) < rebuildWindow {
			recent = append(recent, t)
		}
	}
	if b.at == nil {
		b.at = map[string][]time.Time{}
	}
	if len(recent) >= maxRebuilds {
		b.at[pipeline] = recent
		return false
	}
	b.at[pipeline] = append(recent, now)
	return true
}

// broke reports that the pipeline's Kafka member cannot go on while a new
// one can (see above). Like fail, it ends the pipeline: nothing more is
// committed, and its poll loop returns. Without a runner to rebuild it,
// it fails.
func (p *Pipeline) broke(err error) {
	if p.life.onBroken == nil {
		p.fail(fmt.Errorf("pipeline %s: %w", p.pc.Name, err))
		return
	}
	if p.life.failed.CompareAndSwap(false, true) {
		p.life.onBroken(p, err)
	}
}

// broken is every pipeline's onBroken: p is rebuilt on a goroutine of the
// runner's (p's poll loop, which calls it, returns first: the rebuild's
// Stop waits for it). When the runner is stopping, its Stop stops p.
func (r *Runner) broken(p *Pipeline, err error) {
	r.rebuilds.bg.Go(func() { r.rebuild(p, err) })
}

// rebuild stops old and puts a new pipeline built the same way in its
// place, or fails the host when old's pipeline broke too often.
func (r *Runner) rebuild(old *Pipeline, cause error) {
	name := old.pc.Name
	if !r.rebuilds.allow(name, time.Now()) {
		r.fail(fmt.Errorf("pipeline %s: its Kafka member could not go on %d times within %v, each time rebuilt; the host stops: %w", name, maxRebuilds+1, rebuildWindow, cause))
		return
	}
	r.log.Warn("rebuilding the pipeline: its Kafka client cannot go on, so a new client and group member replace it; every partition goes on from its committed offset",
		"pipeline", name, "cause", cause)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Shutdown.DrainTimeout+rebuildStopGrace)
	defer cancel()
	old.Stop(ctx)
	if r.isStopping() {
		return
	}
	d := r.pipelineDeps(old.role)
	d.from = old
	p, err := newPipeline(old.pc, d, r.clientOpts...)
	if err != nil {
		r.fail(fmt.Errorf("pipeline %s: rebuilding it after its Kafka client could not go on (%v): %w", name, cause, err))
		return
	}
	if !r.replace(old, p) {
		p.commit.Close() // the runner is stopping: never started
		return
	}
	p.counters.stats.Rebuilds.Add(1)
	r.log.Info("pipeline rebuilt; its new member joins the group", "pipeline", name, "took", time.Since(start).Round(time.Millisecond))
}

// isStopping reports whether Stop has begun.
func (r *Runner) isStopping() bool {
	r.pipesMu.RLock()
	defer r.pipesMu.RUnlock()
	return r.stopping
}

// replace puts p in old's place and starts it, unless the runner is
// stopping (false). Under pipesMu, so that Stop sees either old, stopped,
// or p, started.
func (r *Runner) replace(old, p *Pipeline) bool {
	r.pipesMu.Lock()
	defer r.pipesMu.Unlock()
	i := slices.Index(r.pipelines, old)
	if r.stopping || i < 0 {
		return false
	}
	pipes := slices.Clone(r.pipelines)
	pipes[i] = p
	r.pipelines = pipes
	p.Start()
	return true
}
