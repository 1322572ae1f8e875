// Package version holds a pipeline's module versions as its partitions'
// engines see them: the current version and the swap signal (Modules), a
// version's references and failure tally (Version), and the canary that
// runs a new version on a share of the partitions (Canary). It knows no
// task or pipeline: a canary's checks are behind Checker.
package version

import (
	"context"
	"math"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
)

// Checker runs a canary's failed records again on the stable version
// (scheduler's canaryCheck): Offer is called by a worker with no lock held,
// Stop once when the canary ends.
type Checker interface {
	Offer(rec *abi.Record, kind string)
	Stop()
}

// part is an input partition.
type part struct {
	topic     string
	partition int32
}

// Version is one deployed version of a pipeline's module. Instances hold
// a reference; a version that is no longer current closes its module when
// its last instance is closed.
type Version struct {
	M       *host.Module
	refs    atomic.Int64
	retired atomic.Bool
	once    sync.Once
	// Records decided on the version, and of those Failed (a fault or an
	// error status), by kind and partition in Tally: a canary's are
	// compared with the current version's (scheduler/canarycheck.go).
	Records, Failed atomic.Int64
	Tally           FailTally
	// Label is the version's label (Runner.SetLabel; nil: none).
	Label atomic.Pointer[string]
}

// LabelText is v's label, "" for none.
func (v *Version) LabelText() string {
	if l := v.Label.Load(); l != nil {
		return *l
	}
	return ""
}

// Acquire takes a reference to v (an instance made from it).
func (v *Version) Acquire() { v.refs.Add(1) }

// Refs is the number of references to v.
func (v *Version) Refs() int64 { return v.refs.Load() }

// Release gives a reference back; the last one closes a retired v.
func (v *Version) Release() {
	if v.refs.Add(-1) == 0 && v.retired.Load() {
		v.Close()
	}
}

// Retire marks v as replaced; it closes once unused.
func (v *Version) Retire() {
	v.retired.Store(true)
	if v.refs.Load() == 0 {
		v.Close()
	}
}

// Close closes v's module, once.
func (v *Version) Close() { v.once.Do(func() { v.M.Close(context.Background()) }) }

// Modules is a pipeline's module versions as its engines see them: the
// pipeline swaps and sets a Canary (an admin API goroutine), the workers
// read, each with an atomic load.
type Modules struct {
	Ver    atomic.Pointer[Version]       // the current module version
	SwapCh atomic.Pointer[chan struct{}] // closed at a swap, then replaced
	// Canary runs another version on a share of the partitions (scheduler/canary.go).
	Canary atomic.Pointer[Canary]
	// Async is set once any version of the module starts asynchronous
	// operations; a deploy sets it while workers read it.
	Async atomic.Bool
}

// Current is the version new instances are created from.
func (m *Modules) Current() *Version { return m.Ver.Load() }

// Swapped returns a channel closed at the next swap (read by every worker
// each time it waits: an atomic load, no lock).
func (m *Modules) Swapped() <-chan struct{} { return *m.SwapCh.Load() }

// Canary runs a new version on a share of a pipeline's partitions while
// the others keep the current version. Which partitions is fixed by the
// pipeline's name, the topic and its partition count, so every host of a
// fleet picks the same ones and a partition keeps its version across
// rebalances: partition p of a topic of n is in the canary if
// (p + s) mod n < ceil(percent·n/100), s a hash of pipeline and topic.
type Canary struct {
	Ver     *Version
	Percent int
	Counts  map[string]int32 // partitions per topic, read when the canary started
	// Check runs the records the canary fails on the stable version
	// (scheduler/canarycheck.go); nil where that cannot be done without side effects.
	Check Checker
}

// In reports whether topic's partition runs the canary.
func (c *Canary) In(pipeline, topic string, partition int32) bool {
	n, ok := c.Counts[topic]
	if !ok || n <= 0 {
		return false
	}
	k := int32(math.Ceil(float64(c.Percent) * float64(n) / 100))
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

// FailTally counts a version's failures by kind and by input partition,
// and a canary's checks. Safe for concurrent use; only failures take its
// lock.
type FailTally struct {
	mu    sync.Mutex
	kinds map[string]*KindStats
	parts map[part]int64
}

// KindStats is one kind of failure of one version on this host: failures,
// and for a canary the ones run again on the stable version (Checked) and
// of those the ones it failed too (Shared).
type KindStats struct {
	Failed, Checked, Shared int64
}

func (f *FailTally) Fail(kind, topic string, partition int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.kinds == nil {
		f.kinds, f.parts = map[string]*KindStats{}, map[part]int64{}
	}
	k := f.kinds[kind]
	if k == nil {
		k = &KindStats{}
		f.kinds[kind] = k
	}
	k.Failed++
	f.parts[part{topic, partition}]++
}

func (f *FailTally) Checked(kind string, shared bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if k := f.kinds[kind]; k != nil && k.Checked < k.Failed {
		k.Checked++
		if shared {
			k.Shared++
		}
	}
}

// Snapshot copies the tally: kinds, and failures by "topic/partition".
func (f *FailTally) Snapshot() (map[string]KindStats, map[string]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.kinds) == 0 {
		return nil, nil
	}
	kinds := make(map[string]KindStats, len(f.kinds))
	for k, s := range f.kinds {
		kinds[k] = *s
	}
	parts := make(map[string]int64, len(f.parts))
	for p, n := range f.parts {
		parts[p.topic+"/"+strconv.Itoa(int(p.partition))] = n
	}
	return kinds, parts
}
