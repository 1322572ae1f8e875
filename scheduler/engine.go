package scheduler

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/background"
	"github.com/wasmstream/wasmstream/scheduler/internal/sizing"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/tracing"
)

// engineDeps is everything a partition's engine — its task, workers,
// release order and failure routing — is given by its pipeline, once, when
// the pipeline starts (Pipeline.Start: engineDeps): the engine holds no
// pointer to the pipeline, and reaches outward only through what is here
// and the seams (sink, ledger). (DESIGN.md, "Seams: source, ledger, sink,
// committer".)
type engineDeps struct {
	pc    *config.Pipeline
	group string // the consumer group (trace attributes)
	log   *slog.Logger

	budget        *Budget
	instanceBytes int64 // memory an instance reserves in the budget
	stats         *Stats
	// partStats are a partition's counters, kept across assignments.
	partStats func(topic string, partition int32) *Stats

	role      role
	retryable map[string]bool // fault kinds retried
	sink      sink
	ledger    ledger
	state     *state.Stores // nil: state.enabled is off

	mods      *modules      // versions, swap signal, canary, async
	flow      *flowSignals  // the poll loop's wake-ups
	asyncSize *sizing.Async // async.max_in_flight: auto (nil: fixed)
	// cl pauses and resumes a partition's fetching (backpressure).
	cl *kgo.Client
	bg *background.Group // work after a backoff, owned by the pipeline

	tracer  *tracing.Tracer // nil: tracing off
	metrics *Metrics        // nil: no metrics
	failObs FailureObserver // nil: none
}

// engineDeps makes what p's engines are given. Called by Start, after
// everything the runner sets before it (metrics, the failure observer).
func (p *Pipeline) engineDeps() *engineDeps {
	return &engineDeps{
		pc: p.pc, group: p.group, log: p.log,
		budget: p.budget, instanceBytes: p.instanceBytes, stats: &p.stats, partStats: p.partitionStats,
		role: p.role, retryable: p.retryable, sink: p.sink, ledger: p.ledger, state: p.state,
		mods: p.modules, flow: &p.flowSignals, asyncSize: p.asyncSize, cl: p.cl, bg: &p.bg,
		tracer: p.tracer, metrics: p.metrics, failObs: p.failObs,
	}
}

// recordInstantiate records the time a new instance took.
func (d *engineDeps) recordInstantiate(dur time.Duration) {
	if m := d.metrics; m != nil {
		m.Instantiate.Record(context.Background(), dur.Seconds(), metric.WithAttributes(attribute.String("pipeline", d.pc.Name)))
	}
}
