package partition

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/background"
	"github.com/wasmstream/wasmstream/scheduler/internal/budget"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/schemaio"
	"github.com/wasmstream/wasmstream/scheduler/internal/sizing"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/scheduler/internal/version"
)

// Deps is everything a partition's engine — its task, workers,
// release order and failure routing — is given by its pipeline, once, when
// the pipeline starts (Pipeline.Start: Deps): the engine holds no
// pointer to the pipeline, and reaches outward only through what is here
// and the seams (sink, ledger). (DESIGN.md, "Seams: source, ledger, sink,
// committer".)
type Deps struct {
	Config *config.Pipeline
	Group  string // the consumer group (trace attributes)
	Log    *slog.Logger

	Budget *budget.Budget
	Inst   InstanceDeps // how a worker's instance is made and sized
	Stats  *hooks.Stats
	// PartStats are a partition's counters, kept across assignments.
	PartStats func(topic string, partition int32) *hooks.Stats

	Role      Role
	Retryable map[string]bool // fault kinds retried
	Sink      Sink
	Ledger    Ledger
	State     *state.Stores // nil: state.enabled is off

	Mods       *version.Modules  // versions, swap signal, canary, async
	Fetch      FetchControl      // the task's say in what the source fetches
	Background *background.Group // work after a backoff, owned by the pipeline

	Hooks hooks.Hooks // tracer, metrics, failure observer: each nil when off

	// Schema decodes input records and encodes outputs framed by a schema
	// registry (input_format, output_format); nil when every format is
	// raw, and the record path is then as without it.
	Schema *schemaio.Pipeline

	// InputTimestamps is Config.OutputTimestamp resolved once (the sink
	// reads it for every output): true for OutputTimeInput, a record's
	// outputs carry its own timestamp; false, the release's clock.
	InputTimestamps bool

	// Timers: the module sets event-time timers (ABI.md §4.2), which the
	// engine fires (timers.go); a version's module that does
	// (host.Module.HasTimers) turns them on too. The package's tests set
	// it for fake instances.
	Timers bool
}

// InstanceDeps is how a worker's instance is made and what bounds it:
// the memory it reserves in the budget, its maker, and the automatic
// sizing of its asynchronous operations.
type InstanceDeps struct {
	Bytes int64 // memory an instance reserves in the budget

	// New makes a worker's instance of a version; nil: the version's
	// module makes it (host.Module.NewInstance). The package's tests set
	// it to run the engine on fakes (fakes_test.go).
	New func(ctx context.Context, v *version.Version) (Instance, error)

	AsyncSize *sizing.Async // async.max_in_flight: auto (nil: fixed)
}

// FetchControl is a task's say in what its source fetches: the poll
// loop's wake-ups (Flow, when records drain below the bounds or demand
// appears) and the pausing of its partition (Pauser, backpressure).
type FetchControl struct {
	Flow   *FlowSignals
	Pauser Pauser
}

// Pauser stops and resumes the fetching of one partition: the task's
// backpressure (Task.Pause, MaybeResume, Stop). The pipeline's source
// adapts its client (source.ClientPauser). Called under task.mu: it must
// not block, nor call into the task.
type Pauser interface {
	PausePartition(topic string, partition int32)
	ResumePartition(topic string, partition int32)
}

// recordInstantiate records the time a new instance took.
func (d *Deps) recordInstantiate(dur time.Duration) {
	if m := d.Hooks.Metrics; m != nil {
		m.Instantiate.Record(context.Background(), dur.Seconds(), metric.WithAttributes(attribute.String("pipeline", d.Config.Name)))
	}
}

// FlowSignals are the wake-ups a pipeline's tasks send its loops: flow
// (flowLoop: paused partitions may resume) and demand (awaitDemand, while
// awaiting: a record finished).
type FlowSignals struct {
	Flow chan struct{}
	// Awaiting is set while the poll loop waits for a task to take records
	// (awaitDemand): finishing records then signals demandCh.
	Awaiting atomic.Bool
	DemandCh chan struct{}
}

func NewFlowSignals() FlowSignals {
	return FlowSignals{Flow: make(chan struct{}, 1), DemandCh: make(chan struct{}, 1)}
}

func (f *FlowSignals) SignalFlow() {
	select {
	case f.Flow <- struct{}{}:
	default:
	}
}

// SignalDemand wakes awaitDemand (a record finished while it waits).
func (f *FlowSignals) SignalDemand() {
	select {
	case f.DemandCh <- struct{}{}:
	default:
	}
}
