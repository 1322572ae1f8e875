package scheduler

import (
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/internal/version"
)

// A pipeline's module versions (scheduler/internal/version): the current
// one and the swap signal, each version's references and failure tally,
// the canary.
type (
	modVersion = version.Version
	modules    = version.Modules
	canary     = version.Canary
	// KindStats is one kind of failure of one version on this host:
	// failures, and for a canary the ones run again on the stable version
	// (Checked) and of those the ones it failed too (Shared).
	KindStats = version.KindStats
)

// Module is the pipeline's current module.
func (p *Pipeline) Module() *host.Module { return p.mods.Current().M }

// setModule makes m the pipeline's module: records not yet started run on
// instances of m. Each worker finishes what its instance has in progress
// (asynchronous waits included) on the old version, then replaces its
// instance; the old module is closed when its last instance is. Nothing in
// flight is dropped or repeated by the swap.
func (p *Pipeline) setModule(nv *modVersion) {
	m := nv.M
	old := p.mods.Ver.Swap(nv)
	if m.Info().Async {
		p.mods.Async.Store(true) // never cleared: instances of an older version may still wait on operations
	}
	next := make(chan struct{})
	close(*p.mods.SwapCh.Swap(&next))
	if old != nil && old != nv {
		old.Retire()
	}
	p.log.Info("module swapped", "digest", m.Info().Digest[:12])
}
