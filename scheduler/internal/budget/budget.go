// Package budget is the host-wide reserve of module instances that
// partition tasks borrow from, and the host-wide bounds on records in
// flight, asynchronous operations and held outputs.
package budget

import (
	"sync"
	"sync/atomic"
)

// Budget is the host-wide reserve that partition tasks borrow instances
// from (the seed's "reserve threads"), and the host-wide bound on records in
// flight. A task's minimum instances are always granted (they may take the
// budget over its limit, which is logged); instances above the minimum are
// borrowed only while the budget has room, and given back after an idle
// period. Memory is accounted by reservation: an instance reserves its
// pipeline's limits.memory_pages and limits.table_elements (8 bytes each).
// Safe for concurrent use.
type Budget struct {
	maxInstances int
	maxBytes     int64
	maxInFlight  int64

	mu        sync.Mutex
	instances int
	bytes     int64

	inFlight atomic.Int64

	// The host's bound on guest asynchronous operations in flight (0: none)
	// and what counts them.
	maxAsync   int64
	asyncCount func() int64
	asyncMu    sync.Mutex
	admitting  int64 // records admitted under the bound whose call has not returned

	// The host's account of emitted outputs held (nil: none).
	outputs OutputAccount

	// retired is told each time a pool retires an instance (nil: none):
	// the runner's memtrim.Trimmer.
	retired func()
}

// OnRetire makes Retire call f, without b's lock, each time a pool gives
// an instance back. Set before the budget is used.
func (b *Budget) OnRetire(f func()) { b.retired = f }

// OutputAccount is the host's account of the bytes of emitted outputs it
// holds (host.Engine): records running or waiting hold theirs, and the
// outputs handed to the producer stay counted until the broker acknowledged
// them.
type OutputAccount interface {
	HeldOutputBytes() (held, max int64)
	ReleaseOutputs(n int64)
}

// LimitHeldOutputs makes admission respect a: no task starts a record while
// the outputs held are at or above half of a's bound (the soft mark), so
// that records already running have the other half to emit into before
// emit refuses outputs (the hard bound).
func (b *Budget) LimitHeldOutputs(a OutputAccount) { b.outputs = a }

// OverHeldOutputs reports whether the held outputs are at the soft mark.
func (b *Budget) OverHeldOutputs() bool {
	if b.outputs == nil {
		return false
	}
	held, max := b.outputs.HeldOutputBytes()
	return max > 0 && held >= max/2
}

// ReleaseOutputs gives back what a record's outputs counted (host.Result's
// HeldBytes) once they are acknowledged or dropped.
func (b *Budget) ReleaseOutputs(n int64) {
	if b.outputs != nil && n != 0 {
		b.outputs.ReleaseOutputs(n)
	}
}

// LimitAsync bounds asynchronous operations in flight across the host to
// max, counted by count: past it, instances with operations outstanding take
// no new record.
func (b *Budget) LimitAsync(max int, count func() int64) {
	b.maxAsync, b.asyncCount = int64(max), count
}

func (b *Budget) OverAsync() bool {
	return b.maxAsync > 0 && b.asyncCount != nil && b.asyncCount() >= b.maxAsync
}

// AdmitAsync reserves room for a record that may start an operation; the
// caller calls Admitted once the record's first call returned (its
// operations are counted then). Reservations make the bound exact for
// records that start one operation each.
func (b *Budget) AdmitAsync() bool {
	if b.maxAsync <= 0 || b.asyncCount == nil {
		return true
	}
	b.asyncMu.Lock()
	defer b.asyncMu.Unlock()
	if b.asyncCount()+b.admitting >= b.maxAsync {
		return false
	}
	b.admitting++
	return true
}

func (b *Budget) Admitted() { b.AdmittedN(1) }

// AdmitAsyncN is AdmitAsync for a run of up to n records taken into one
// call: it reserves room for as many as the bound leaves (at most n) and
// returns how many, 0 when the bound is reached. The caller gives every
// reservation back with AdmittedN once the run's call returned (the
// operations its records started are counted then), and at once those it
// did not use.
func (b *Budget) AdmitAsyncN(n int) int {
	if n <= 0 || b.maxAsync <= 0 || b.asyncCount == nil {
		return max(n, 0)
	}
	b.asyncMu.Lock()
	defer b.asyncMu.Unlock()
	room := b.maxAsync - b.asyncCount() - b.admitting
	if room <= 0 {
		return 0
	}
	k := int(min(room, int64(n)))
	b.admitting += int64(k)
	return k
}

// AdmittedN gives back n reservations of AdmitAsync or AdmitAsyncN.
func (b *Budget) AdmittedN(n int) {
	if n <= 0 || b.maxAsync <= 0 || b.asyncCount == nil {
		return
	}
	b.asyncMu.Lock()
	b.admitting -= int64(n)
	b.asyncMu.Unlock()
}

// New returns a budget of maxInstances instances reserving at most
// maxBytes of memory, and maxInFlight records in flight.
func New(maxInstances int, maxBytes int64, maxInFlight int) *Budget {
	return &Budget{maxInstances: maxInstances, maxBytes: maxBytes, maxInFlight: int64(maxInFlight)}
}

// Borrow takes an instance reserving bytes if the budget has room.
func (b *Budget) Borrow(bytes int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.instances+1 > b.maxInstances || b.bytes+bytes > b.maxBytes {
		return false
	}
	b.instances++
	b.bytes += bytes
	return true
}

// Reserve takes an instance whatever the budget says (a task's minimum) and
// reports whether that went over the budget.
func (b *Budget) Reserve(bytes int64) (over bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.instances++
	b.bytes += bytes
	return b.instances > b.maxInstances || b.bytes > b.maxBytes
}

// Release gives back an instance that reserved bytes, once it is closed.
func (b *Budget) Release(bytes int64) {
	b.mu.Lock()
	b.instances--
	b.bytes -= bytes
	b.mu.Unlock()
}

// Retire is Release for an instance its pool gave back (idle_timeout,
// above an auto pool's target): nothing takes its place, so its memory is
// garbage the collector should take soon (OnRetire).
func (b *Budget) Retire(bytes int64) {
	b.Release(bytes)
	if b.retired != nil {
		b.retired()
	}
}

// Instances returns the instances in use and the budget's maximum.
func (b *Budget) Instances() (used, max int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.instances, b.maxInstances
}

// InFlight returns the records in flight across the host and the maximum.
func (b *Budget) InFlight() (n, max int64) { return b.inFlight.Load(), b.maxInFlight }

func (b *Budget) OverInFlight() bool { return b.inFlight.Load() >= b.maxInFlight }

// AddInFlight counts n records more in flight (negative: fewer).
func (b *Budget) AddInFlight(n int64) { b.inFlight.Add(n) }
