package scheduler

import (
	"sync"
	"time"

	"github.com/wasmstream/wasmstream/internal/verlabel"
)

// A version's label (`deploy --label`) and what is kept of a version once
// it stops running. RATIONALE.md, "Version labels and retired versions",
// says why.

const (
	// RetiredVersionRetention is how long a version that stopped running
	// (replaced by a deploy, rollback or promotion, or an aborted or
	// replaced canary) is still reported by Runner.RetiredVersions, and so
	// keeps its wasmstream.version.* series: an aborted canary's figures
	// stay in Prometheus for several scrapes instead of vanishing with it.
	RetiredVersionRetention = 15 * time.Minute
	// MaxRetiredVersions bounds the retired versions kept per pipeline
	// (the oldest go first): a burst of deploys adds at most this many
	// series per pipeline.
	MaxRetiredVersions = 8
)

// labelText is v's label ("" for none).
func labelText(v *modVersion) string {
	if l := v.Label.Load(); l != nil {
		return *l
	}
	return ""
}

// SetLabel gives the versions of pipeline whose digest is digest (the
// current one, the canary) the label; a label that is not one
// (verlabel.Check) is dropped. The admin API calls it after a switch and
// at start, from the module store, which is where labels are kept.
func (r *Runner) SetLabel(pipeline, digest, label string) {
	p, _ := r.pipelineByName(pipeline)
	if p == nil {
		return
	}
	label = verlabel.Clean(label)
	for _, v := range []*modVersion{p.mods.Current(), p.canaryVersion()} {
		if v != nil && v.M.Info().Digest == digest {
			v.Label.Store(&label)
		}
	}
}

// canaryVersion is the canary's version, nil without one.
func (p *Pipeline) canaryVersion() *modVersion {
	if c := p.mods.Canary.Load(); c != nil {
		return c.Ver
	}
	return nil
}

// retiredVersions keeps, per pipeline, the versions that stopped running
// in the last RetiredVersionRetention, at most MaxRetiredVersions each.
// Safe for concurrent use; its lock is a leaf.
type retiredVersions struct {
	mu sync.Mutex
	m  map[string][]retired
}

type retired struct {
	v      *modVersion // its counters: records still finishing on it count
	digest string
	canary bool
	label  string
	until  time.Time
}

// add keeps v (which stopped running on pipeline) until now+retention.
func (rv *retiredVersions) add(pipeline string, v *modVersion, canary bool, now time.Time) {
	if v != nil {
		rv.keep(pipeline, v, v.M.Info().Digest, canary, now)
	}
}

func (rv *retiredVersions) keep(pipeline string, v *modVersion, digest string, canary bool, now time.Time) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if rv.m == nil {
		rv.m = map[string][]retired{}
	}
	l := rv.pruneLocked(pipeline, now)
	l = append(l, retired{v: v, digest: digest, canary: canary, label: labelText(v), until: now.Add(RetiredVersionRetention)})
	if len(l) > MaxRetiredVersions {
		l = append(l[:0:0], l[len(l)-MaxRetiredVersions:]...)
	}
	rv.m[pipeline] = l
}

// pruneLocked drops pipeline's versions kept past their time.
func (rv *retiredVersions) pruneLocked(pipeline string, now time.Time) []retired {
	l := rv.m[pipeline]
	i := 0
	for i < len(l) && !now.Before(l[i].until) {
		i++
	}
	if i > 0 {
		l = append(l[:0:0], l[i:]...)
		rv.m[pipeline] = l
	}
	return l
}

// stats lists pipeline's retired versions still kept at now, oldest
// first: their records and failures (not by kind: only the running
// versions are judged).
func (rv *retiredVersions) stats(pipeline string, now time.Time) []VersionStats {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	var out []VersionStats
	for _, r := range rv.pruneLocked(pipeline, now) {
		failed := r.v.Failed.Load()
		out = append(out, VersionStats{Digest: r.digest, Label: r.label, Canary: r.canary, Retired: true, Records: r.v.Records.Load(), Failed: failed})
	}
	return out
}

// RetiredVersions lists the versions of pipeline that stopped running in
// the last RetiredVersionRetention (at most MaxRetiredVersions), oldest
// first, with Retired set; their counts still grow while records begun on
// them finish.
func (r *Runner) RetiredVersions(pipeline string) []VersionStats {
	return r.retired.stats(pipeline, time.Now())
}
