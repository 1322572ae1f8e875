package scheduler

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/wasmstream/wasmstream/host"
)

// modVersion is one deployed version of a pipeline's module. Instances hold
// a reference; a version that is no longer current closes its module when
// its last instance is closed.
type modVersion struct {
	m       *host.Module
	refs    atomic.Int64
	retired atomic.Bool
	once    sync.Once
	// records decided on the version, and of those failed (a fault or an
	// error status), by kind and partition in tally: a canary's are
	// compared with the current version's (canarycheck.go).
	records, failed atomic.Int64
	tally           failTally
	// label is the version's label (Runner.SetLabel; nil: none).
	label atomic.Pointer[string]
}

func (v *modVersion) acquire() { v.refs.Add(1) }

func (v *modVersion) release() {
	if v.refs.Add(-1) == 0 && v.retired.Load() {
		v.close()
	}
}

// retire marks v as replaced; it closes once unused.
func (v *modVersion) retire() {
	v.retired.Store(true)
	if v.refs.Load() == 0 {
		v.close()
	}
}

func (v *modVersion) close() { v.once.Do(func() { v.m.Close(context.Background()) }) }

// modules is a pipeline's module versions as its engines see them: the
// pipeline swaps and sets a canary (an admin API goroutine), the workers
// read, each with an atomic load.
type modules struct {
	ver    atomic.Pointer[modVersion]    // the current module version
	swapCh atomic.Pointer[chan struct{}] // closed at a swap, then replaced
	// canary runs another version on a share of the partitions (canary.go).
	canary atomic.Pointer[canary]
	// async is set once any version of the module starts asynchronous
	// operations; a deploy sets it while workers read it.
	async atomic.Bool
}

// current is the version new instances are created from.
func (m *modules) current() *modVersion { return m.ver.Load() }

// Module is the pipeline's current module.
func (p *Pipeline) Module() *host.Module { return p.current().m }

// swapped returns a channel closed at the next swap (read by every worker
// each time it waits: an atomic load, no lock).
func (m *modules) swapped() <-chan struct{} { return *m.swapCh.Load() }

// setModule makes m the pipeline's module: records not yet started run on
// instances of m. Each worker finishes what its instance has in progress
// (asynchronous waits included) on the old version, then replaces its
// instance; the old module is closed when its last instance is. Nothing in
// flight is dropped or repeated by the swap.
func (p *Pipeline) setModule(nv *modVersion) {
	m := nv.m
	old := p.ver.Swap(nv)
	if m.Info().Async {
		p.async.Store(true) // never cleared: instances of an older version may still wait on operations
	}
	next := make(chan struct{})
	close(*p.swapCh.Swap(&next))
	if old != nil && old != nv {
		old.retire()
	}
	p.log.Info("module swapped", "digest", m.Info().Digest[:12])
}
