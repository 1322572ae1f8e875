package partition

import (
	"context"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/internal/version"
)

// Instance is exactly what a worker calls on its module instance: the
// seam between the engine and the Wasm runtime. In production it is a
// *host.Instance (host/instance.go holds its contract: one goroutine at a
// time, the worker's); the package's tests run the engine on a fake of it
// (fakes_test.go), without wasm. Every argument of the record path is a
// pointer or a slice already (the record, its job as the tag, the run's
// records and outcomes), so calling through the interface boxes nothing.
type Instance interface {
	ID() uint64
	Dead() bool
	MemoryPages() uint32
	Pending() int       // records waiting on asynchronous operations
	AsyncInFlight() int // operations in flight
	Ready() <-chan struct{}
	NextDeadline() time.Time
	CallTimes() (wait, run time.Duration)
	LastCall() (start, end time.Time)

	Process(ctx context.Context, rec *abi.Record, tag any) host.Result
	ProcessState(ctx context.Context, rec *abi.Record, tag any, st host.State) host.Result
	ProcessTimer(ctx context.Context, f *abi.TimerFiring, tag any, st host.State) host.Result
	ProcessBatch(ctx context.Context, recs []host.BatchRecord, out []host.Outcome) (ran int)
	LimitBatchInFlight(n int)
	StopBatchAfterFailure(on bool)
	GateBatch(take func(i int) bool)
	Poll(ctx context.Context, now time.Time) []host.Done

	KeepSlot()
	Yield()
	Close(ctx context.Context)
}

var _ Instance = (*host.Instance)(nil)

// newInstance makes an instance of v: Deps.Inst.New when set (tests),
// else v's module's.
func (d *Deps) newInstance(ctx context.Context, v *version.Version) (Instance, error) {
	if d.Inst.New != nil {
		return d.Inst.New(ctx, v)
	}
	in, err := v.M.NewInstance(ctx)
	if err != nil {
		return nil, err // not a nil *host.Instance in a non-nil Instance
	}
	return in, nil
}
