package rollout

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/registry"
)

// CanaryMinRecords is how many records the canary must have decided across
// the fleet before its failure rate is judged.
const CanaryMinRecords = 50

// Guard is a host's canary auto-abort policy: on each heartbeat it judges
// every canary of the registry's deployments (verdict.go) and writes the
// abort of one that fails on its own to the registry. Safe for concurrent
// use.
type Guard struct {
	reg *registry.Registry
	log *slog.Logger

	mu    sync.Mutex
	noted map[string]bool // canaries logged as failing on their input
}

// NewGuard returns the policy of the host of reg.
func NewGuard(reg *registry.Registry, log *slog.Logger) *Guard {
	return &Guard{reg: reg, log: log, noted: map[string]bool{}}
}

// Check aborts a canary of pipelines whose own failures (verdict.go: the
// ones the stable version does not have on the same records) exceed margin
// (a share of its records; 0: never), once it decided CanaryMinRecords. It
// judges this host's own counts first, which need no trust in what others
// write to the hosts topic, then the counts of every live host: forged
// successes in another status cannot keep a canary that fails here alive.
// Run on each heartbeat; several hosts may abort the same canary, to the
// same effect.
func (g *Guard) Check(ctx context.Context, pipelines []string, margin float64) {
	if margin <= 0 {
		return
	}
	now := time.Now()
	own := g.reg.OwnStatus()
	for _, name := range pipelines {
		d, ok := g.reg.Deployment(name)
		if !ok || d.Canary == nil {
			continue
		}
		reason, abort := g.judgeCanary(name, d, own, now, margin)
		if !abort {
			continue
		}
		g.log.Warn("admin: aborting the canary", "pipeline", name, "digest", short(d.Canary.Digest), "reason", reason)
		next := d
		next.Canary, next.Aborted, next.Rollback = nil, reason, false
		if _, err := g.reg.Publish(ctx, next, nil); err != nil {
			g.log.Error("admin: aborting the canary", "pipeline", name, "err", err)
		}
	}
}

// judgeCanary judges pipeline name's canary d.Canary against its stable
// version, on this host's counts (own) and then on every live host's; it
// returns the abort's reason, or notes a canary failing on its input.
func (g *Guard) judgeCanary(name string, d registry.Deployment, own registry.HostStatus, now time.Time, margin float64) (reason string, abort bool) {
	self := g.reg.HostID()
	var ownStable, ownCanary evidence
	ownStable.add(self, own.Versions[name][d.Digest])
	ownCanary.add(self, own.Versions[name][d.Canary.Digest])
	stable, canary, hosts := g.fleetEvidence(name, d, own, now)
	v, c, where := judge(ownStable, ownCanary, margin), ownCanary, fmt.Sprintf("on this host (%.64q)", self)
	if !v.abort {
		v, c, where = judge(stable, canary, margin), canary, fmt.Sprintf("on %d live hosts", hosts)
	}
	if !v.abort {
		g.noteSharedFailures(name, d, stable, canary, v, margin)
		return "", false
	}
	return fmt.Sprintf("automatic: %s the canary failed %d of %d records, an estimated %.0f (%.1f%%) of them ones the stable version does not have on the same records, over the margin of %.1f points: %s",
		where, c.failed, c.records, v.own, 100*v.own/float64(c.records), 100*margin, v.detail), true
}

// fleetEvidence sums what the stable version and the canary of d decided
// on this host (own) and on every other live host, and counts those hosts.
func (g *Guard) fleetEvidence(name string, d registry.Deployment, own registry.HostStatus, now time.Time) (stable, canary evidence, hosts int) {
	self := g.reg.HostID()
	stable.add(self, own.Versions[name][d.Digest])
	canary.add(self, own.Versions[name][d.Canary.Digest])
	hosts = 1
	for _, h := range g.reg.HostsStatus() {
		if h.Host == self || !h.Live(now) {
			continue // this host's own counts are taken from itself
		}
		stable.add(h.Host, h.Versions[name][d.Digest])
		canary.add(h.Host, h.Versions[name][d.Canary.Digest])
		hosts++
	}
	return stable, canary, hosts
}

// noteSharedFailures logs, once per canary, a canary that fails more often
// than the stable version by the margin but is not aborted: its failures
// are ones the stable version has on the same records (its input's, not
// its code's), or their checks are still to come.
func (g *Guard) noteSharedFailures(name string, d registry.Deployment, stable, canary evidence, v verdict, margin float64) {
	if canary.records < CanaryMinRecords || v.pending {
		return
	}
	cr := float64(canary.failed) / float64(canary.records)
	sr := 0.0
	if stable.records > 0 {
		sr = float64(stable.failed) / float64(stable.records)
	}
	if cr <= sr+margin {
		return
	}
	key := name + "/" + d.Canary.Digest + "/" + d.Canary.At.String()
	g.mu.Lock()
	seen := g.noted[key]
	g.noted[key] = true
	g.mu.Unlock()
	if seen {
		return
	}
	g.log.Warn("admin: the canary fails more often than the stable version, on records the stable version fails too (its input, not its code): not aborted",
		"pipeline", name, "digest", short(d.Canary.Digest), "canary_failed", canary.failed, "canary_records", canary.records,
		"stable_failed", stable.failed, "stable_records", stable.records, "detail", v.detail)
}
