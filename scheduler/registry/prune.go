package registry

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// What keeps the registry topics from growing without end (RATIONALE.md,
// "The fleet registry"):
//
//   - modules: a module no deployment names (as deployed, as canary or in
//     a history, which a deploy caps at 50 versions) is deleted with
//     tombstones once its chunks are older than ModuleRetention (a module
//     written a moment ago may be for a deployment not written yet). So the
//     topic holds, per pipeline, at most 52 modules and what was uploaded
//     within the retention. Keys that are not a chunk's are deleted the
//     same way. The host that writes a deployment prunes after it, in the
//     background; compaction then removes the chunks, and the tombstones
//     after the topic's delete.retention.ms.
//   - deploys: one record per pipeline name once compacted; a pipeline
//     that no host runs any more keeps its last deployment (a host
//     cannot tell it is gone for good). Nothing is deleted.
//   - hosts: a clean stop deletes the host's status; a status not heard
//     of for HostRetention (a host that crashed and never came back, under
//     an id that is not reused) is deleted by the next prune.

const (
	// ModuleRetention: a module no deployment names is kept this long
	// after it was written (the local module store keeps its copies as
	// long, admin.Store.Prune).
	ModuleRetention = 24 * time.Hour
	// HostRetention: a status not heard of for this long is deleted.
	HostRetention = 24 * time.Hour
	// pruneTimeout bounds one prune (it reads the modules topic).
	pruneTimeout = 5 * time.Minute
	// pruneEvery: a host prunes at most this often.
	pruneEvery = time.Minute
)

// Referenced is the set of digests the fleet's deployments name: deployed,
// canary, or in a history.
func (r *Registry) Referenced() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]bool{}
	for _, d := range r.deploys {
		out[d.Digest] = true
		if d.Canary != nil {
			out[d.Canary.Digest] = true
		}
		for _, h := range d.History {
			out[h] = true
		}
	}
	return out
}

// Pruned is what a prune deleted.
type Pruned struct {
	Modules int // modules whose chunks were deleted
	Keys    int // records deleted from the modules topic (chunks and junk)
	Bytes   int // their bytes
	Hosts   int // statuses deleted from the hosts topic
}

// Prune deletes, with tombstones, the chunks of modules no deployment
// names that are older than retention, junk keys of the modules topic as
// old, and host statuses not heard of for HostRetention.
func (r *Registry) Prune(ctx context.Context, retention time.Duration) (Pruned, error) {
	var out Pruned
	keep := r.Referenced()
	cutoff := time.Now().Add(-retention)
	type live struct {
		at    time.Time
		bytes int
	}
	latest := map[string]live{} // key -> its latest record, if not a tombstone
	err := r.scanModules(ctx, func(rec *kgo.Record) {
		if rec.Value == nil {
			delete(latest, string(rec.Key))
			return
		}
		latest[string(rec.Key)] = live{rec.Timestamp, len(rec.Value)}
	})
	if err != nil {
		return out, err
	}
	var tombs []*kgo.Record
	modules := map[string]bool{}
	for key, l := range latest {
		d, _, _, ok := parseChunkKey([]byte(key))
		if (ok && keep[d]) || l.at.After(cutoff) {
			continue
		}
		tombs = append(tombs, &kgo.Record{Topic: r.Modules, Key: []byte(key)})
		out.Keys++
		out.Bytes += l.bytes
		if ok {
			modules[d] = true
		}
	}
	out.Modules = len(modules)
	r.mu.Lock()
	stale := time.Now().Add(-HostRetention)
	for id, h := range r.hosts {
		if id != r.host && h.At.Before(stale) {
			tombs = append(tombs, &kgo.Record{Topic: r.Hosts, Key: []byte(id)})
			out.Hosts++
		}
	}
	r.mu.Unlock()
	if len(tombs) == 0 {
		return out, nil
	}
	if err := r.cl.ProduceSync(ctx, tombs...).FirstErr(); err != nil {
		return out, fmt.Errorf("deleting from %s: %w", r.Modules, err)
	}
	return out, nil
}

// pruner runs Prune in the background after a deployment this host wrote,
// one at a time and at most every pruneEvery; Close waits for it.
type pruner struct {
	mu      sync.Mutex
	running bool
	last    time.Time
	wg      sync.WaitGroup
}

// pruneSoon starts a prune unless one runs or ran within pruneEvery.
// appliers.mu is taken under pruner.mu (never the other way round), so
// that Close, which stops the appliers and then takes pruner.mu, knows
// every prune started was added to wg.
func (r *Registry) pruneSoon() {
	p := &r.pruner
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running || time.Since(p.last) < pruneEvery || r.appliers.isStopped() {
		return
	}
	p.running, p.last = true, time.Now()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(r.appliers.ctx, pruneTimeout)
		defer cancel()
		res, err := r.Prune(ctx, ModuleRetention)
		switch {
		case err != nil && ctx.Err() == nil:
			r.log.Warn("admin.registry: pruning the registry", "err", err)
		case res.Keys+res.Hosts > 0:
			r.log.Info("admin.registry: pruned modules no deployment names and statuses of hosts long gone", "modules", res.Modules, "records", res.Keys, "bytes", res.Bytes, "hosts", res.Hosts)
		}
		p.mu.Lock()
		p.running = false
		p.mu.Unlock()
	}()
}
