package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// SetCanary runs wasm on percent of the pipeline's partitions (and of its
// retry tier's), replacing a canary already running. A module that does
// not validate is refused and nothing changes.
func (r *Runner) SetCanary(ctx context.Context, pipeline string, wasm []byte, percent int) (host.Info, error) {
	p, rp := r.pipelineByName(pipeline)
	if p == nil {
		return host.Info{}, fmt.Errorf("%w %q", ErrNoPipeline, pipeline)
	}
	if percent < 1 || percent > 99 {
		return host.Info{}, fmt.Errorf("canary share %d%%: want 1 to 99", percent)
	}
	var obs host.Observer
	if r.hooks.Tracer != nil {
		obs = partition.JobObserver{}
	}
	m, err := loadModuleBytes(ctx, r.engine, p.pc, wasm, "canary", r.log, obs)
	if err != nil {
		return host.Info{}, err
	}
	topics := append([]string(nil), p.pc.Inputs...)
	if rp != nil {
		topics = append(topics, rp.pc.Inputs...)
	}
	counts, err := r.partitionCounts(ctx, topics)
	if err != nil {
		m.Close(ctx)
		return host.Info{}, err
	}
	v := &modVersion{M: m}
	if old := p.canaryVersion(); old != nil && old.M.Info().Digest != m.Info().Digest {
		r.retired.add(pipeline, old, true, time.Now())
	}
	c := &canary{Ver: v, Percent: percent, Counts: counts}
	if checkable(p) {
		c.Check = newCanaryCheck(p, v)
	}
	v.Acquire() // held until every pipeline points to v
	for _, q := range []*Pipeline{p, rp} {
		if q != nil {
			q.setCanary(c)
		}
	}
	v.Release()
	return m.Info(), nil
}

// EndCanary ends the pipeline's canary: promote makes its version the
// pipeline's on every partition, otherwise (an abort) every partition goes
// back to the current version. Either is a hot swap: nothing in flight is
// lost or repeated. It reports whether a canary was running.
func (r *Runner) EndCanary(pipeline string, promote bool) bool {
	p, rp := r.pipelineByName(pipeline)
	if p == nil {
		return false
	}
	c := p.mods.Canary.Load()
	if c == nil {
		return false
	}
	if promote {
		r.retired.add(pipeline, p.mods.Current(), false, time.Now())
	} else {
		r.retired.add(pipeline, c.Ver, true, time.Now())
	}
	c.Ver.Acquire()
	for _, q := range []*Pipeline{p, rp} {
		if q == nil {
			continue
		}
		if promote {
			q.mods.Canary.Store(nil)
			if c.Check != nil {
				c.Check.Stop()
			}
			q.setModule(c.Ver)
		} else {
			q.setCanary(nil)
		}
	}
	c.Ver.Release()
	return true
}

// setCanary replaces the pipeline's canary (nil: none) and wakes every
// worker to check its version; the canary replaced is retired.
func (p *Pipeline) setCanary(c *canary) {
	old := p.mods.Canary.Swap(c)
	if old != nil && old != c && old.Check != nil {
		old.Check.Stop() // the primary and its retry tier share it: stop is once
	}
	if c != nil {
		if c.Ver.M.Info().Async {
			p.mods.Async.Store(true)
		}
		p.log.Info("canary started", "digest", c.Ver.M.Info().Digest[:12], "percent", c.Percent)
	} else if old != nil {
		p.log.Info("canary ended", "digest", old.Ver.M.Info().Digest[:12])
	}
	next := make(chan struct{})
	close(*p.mods.SwapCh.Swap(&next))
	if old != nil && (c == nil || old.Ver != c.Ver) && old.Ver != p.mods.Current() {
		old.Ver.Retire()
	}
}

// partitionCounts reads the partition count of each topic.
func (r *Runner) partitionCounts(ctx context.Context, topics []string) (map[string]int32, error) {
	cl, err := r.adminClient()
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	details, err := kadm.NewClient(cl).ListTopics(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("reading the partition counts of %v: %w", topics, err)
	}
	out := map[string]int32{}
	for _, t := range topics {
		d, ok := details[t]
		if !ok || d.Err != nil {
			return nil, fmt.Errorf("topic %s: %v", t, d.Err)
		}
		out[t] = int32(len(d.Partitions))
	}
	return out, nil
}

// VersionStats is what one version of a pipeline decided on this host
// since it was loaded: records, and of those the ones that failed (a
// fault, an error status: sent to retry or dead letter), by kind of
// failure and by input partition ("topic/partition").
type VersionStats struct {
	Digest          string
	Label           string // the version's label (deploy --label), "" for none
	Retired         bool   // no longer running (Runner.RetiredVersions)
	Records, Failed int64
	Kinds           map[string]KindStats
	Partitions      map[string]int64
	Canary          bool
	Percent         int
	// Checks: the canary's failed records are run again on the stable
	// version (canarycheck.go).
	Checks bool
}

// Versions returns the stats of the pipeline's current version and of its
// canary, if any (the retry tier's records included).
func (r *Runner) Versions(pipeline string) []VersionStats {
	p, _ := r.pipelineByName(pipeline)
	if p == nil {
		return nil
	}
	out := []VersionStats{versionStats(p.mods.Current())}
	if c := p.mods.Canary.Load(); c != nil {
		s := versionStats(c.Ver)
		s.Canary, s.Percent, s.Checks = true, c.Percent, c.Check != nil
		out = append(out, s)
	}
	return out
}

// versionStats reads v's counts: the tally first, then failed, then records, so
// that what is read adds up (each is counted before the next).
func versionStats(v *modVersion) VersionStats {
	kinds, parts := v.Tally.Snapshot()
	failed := v.Failed.Load()
	return VersionStats{Digest: v.M.Info().Digest, Label: labelText(v), Failed: failed, Records: v.Records.Load(), Kinds: kinds, Partitions: parts}
}

// CanaryDigest is the digest and share of the pipeline's canary ("" if
// none).
func (r *Runner) CanaryDigest(pipeline string) (string, int) {
	p, _ := r.pipelineByName(pipeline)
	if p == nil {
		return "", 0
	}
	if c := p.mods.Canary.Load(); c != nil {
		return c.Ver.M.Info().Digest, c.Percent
	}
	return "", 0
}
