package scheduler

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/wasmstream/wasmstream/host"
)

// A canary runs a new version on a share of a pipeline's partitions while
// the others keep the current version. Which partitions is fixed by the
// pipeline's name, the topic and its partition count, so every host of a
// fleet picks the same ones and a partition keeps its version across
// rebalances: partition p of a topic of n is in the canary if
// (p + s) mod n < ceil(percent·n/100), s a hash of pipeline and topic.
type canary struct {
	ver     *modVersion
	percent int
	counts  map[string]int32 // partitions per topic, read when the canary started
	// check runs the records the canary fails on the stable version
	// (canarycheck.go); nil where that cannot be done without side effects.
	check *canaryCheck
}

// in reports whether topic's partition runs the canary.
func (c *canary) in(pipeline, topic string, partition int32) bool {
	n, ok := c.counts[topic]
	if !ok || n <= 0 {
		return false
	}
	k := int32(math.Ceil(float64(c.percent) * float64(n) / 100))
	s := int32(fnv32a(fnv32a(fnv32a(2166136261, pipeline), "/"), topic) % uint32(n))
	return (partition+s)%n < k
}

// fnv32a continues the FNV-1a hash h over str. It is asked for every
// record a worker takes while a canary runs, so it does not allocate.
func fnv32a(h uint32, str string) uint32 {
	for i := 0; i < len(str); i++ {
		h ^= uint32(str[i])
		h *= 16777619
	}
	return h
}

// version is the version the task's records run on: the canary's if its
// partition is in the canary's share, else the pipeline's current one.
func (t *task) version() *modVersion {
	if c := t.d.mods.canary.Load(); c != nil && c.in(t.d.pc.Name, t.topic, t.partition) {
		return c.ver
	}
	return t.d.mods.current()
}

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
	if r.tracer != nil {
		obs = jobObserver{}
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
	v := &modVersion{m: m}
	if old := p.canaryVersion(); old != nil && old.m.Info().Digest != m.Info().Digest {
		r.retired.add(pipeline, old, true, time.Now())
	}
	c := &canary{ver: v, percent: percent, counts: counts}
	if checkable(p) {
		c.check = newCanaryCheck(p, v)
	}
	v.acquire() // held until every pipeline points to v
	for _, q := range []*Pipeline{p, rp} {
		if q != nil {
			q.setCanary(c)
		}
	}
	v.release()
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
	c := p.canary.Load()
	if c == nil {
		return false
	}
	if promote {
		r.retired.add(pipeline, p.current(), false, time.Now())
	} else {
		r.retired.add(pipeline, c.ver, true, time.Now())
	}
	c.ver.acquire()
	for _, q := range []*Pipeline{p, rp} {
		if q == nil {
			continue
		}
		if promote {
			q.canary.Store(nil)
			if c.check != nil {
				c.check.stop()
			}
			q.setModule(c.ver)
		} else {
			q.setCanary(nil)
		}
	}
	c.ver.release()
	return true
}

// setCanary replaces the pipeline's canary (nil: none) and wakes every
// worker to check its version; the canary replaced is retired.
func (p *Pipeline) setCanary(c *canary) {
	old := p.canary.Swap(c)
	if old != nil && old != c && old.check != nil {
		old.check.stop() // the primary and its retry tier share it: stop is once
	}
	if c != nil {
		if c.ver.m.Info().Async {
			p.async.Store(true)
		}
		p.log.Info("canary started", "digest", c.ver.m.Info().Digest[:12], "percent", c.percent)
	} else if old != nil {
		p.log.Info("canary ended", "digest", old.ver.m.Info().Digest[:12])
	}
	next := make(chan struct{})
	close(*p.swapCh.Swap(&next))
	if old != nil && (c == nil || old.ver != c.ver) && old.ver != p.current() {
		old.ver.retire()
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
	out := []VersionStats{p.current().stats()}
	if c := p.canary.Load(); c != nil {
		s := c.ver.stats()
		s.Canary, s.Percent, s.Checks = true, c.percent, c.check != nil
		out = append(out, s)
	}
	return out
}

// stats reads v's counts: the tally first, then failed, then records, so
// that what is read adds up (each is counted before the next).
func (v *modVersion) stats() VersionStats {
	kinds, parts := v.tally.snapshot()
	failed := v.failed.Load()
	return VersionStats{Digest: v.m.Info().Digest, Label: v.labelText(), Failed: failed, Records: v.records.Load(), Kinds: kinds, Partitions: parts}
}

// CanaryDigest is the digest and share of the pipeline's canary ("" if
// none).
func (r *Runner) CanaryDigest(pipeline string) (string, int) {
	p, _ := r.pipelineByName(pipeline)
	if p == nil {
		return "", 0
	}
	if c := p.canary.Load(); c != nil {
		return c.ver.m.Info().Digest, c.percent
	}
	return "", 0
}
