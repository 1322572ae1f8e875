package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
	"github.com/wasmstream/wasmstream/scheduler/internal/sizing"
)

// RegisterMetrics registers the runner's instruments with meter: the
// histograms recorded per record, and observable instruments read when
// collected — the counters of Stats (counterTable, counters.go), each
// pipeline's, each task's and the host's gauges, and those of share
// groups, state and the schema registry.
func (r *Runner) RegisterMetrics(meter metric.Meter) error {
	m, err := newRecordMetrics(meter)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	for _, register := range []func(metric.Meter) error{r.registerCounters, r.registerPipelineMetrics, r.registerTaskMetrics, r.registerHostMetrics,
		r.registerShareMetrics, r.registerStateMetrics, r.registerSchemaMetrics} {
		if err := register(meter); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	r.hooks.Metrics = m
	for _, p := range r.pipes() {
		p.shared.hooks.Metrics = m
	}
	for _, d := range r.loadTimes {
		m.Compile.Record(context.Background(), d.Seconds(), metric.WithAttributes(attribute.String("pipeline", d.pipeline), attribute.Bool("from_compile_cache", d.fromCache)))
	}
	return nil
}

// newRecordMetrics makes the histograms recorded as things happen.
func newRecordMetrics(meter metric.Meter) (*Metrics, error) {
	var err error
	hist := func(name, unit, desc string, bounds ...float64) metric.Float64Histogram {
		h, e := meter.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
		err = cmp.Or(err, e)
		return h
	}
	m := &Metrics{
		Latency: hist("wasmstream.record.processing.duration", "s", "Time from a record's first call into its instance to its outcome (asynchronous waits included), per attempt.",
			0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
		Compile: hist("wasmstream.module.compile.duration", "s", "Time to validate and compile a module (from_compile_cache: read from the compile cache on disk instead).",
			0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
		Instantiate: hist("wasmstream.module.instantiate.duration", "s", "Time to create a module instance (initialiser included).",
			0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
	}
	return m, err
}

// observables makes the observable instruments of one callback, keeping
// the first error, and registers the callback over them all.
type observables struct {
	meter metric.Meter
	err   error
	all   []metric.Observable
}

func (ob *observables) counter(name, unit, desc string) metric.Int64ObservableCounter {
	c, err := ob.meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	ob.keep(c, err)
	return c
}

func (ob *observables) gauge(name, unit, desc string) metric.Int64ObservableGauge {
	g, err := ob.meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
	ob.keep(g, err)
	return g
}

func (ob *observables) keep(o metric.Observable, err error) {
	ob.err = cmp.Or(ob.err, err)
	ob.all = append(ob.all, o)
}

// register registers f over every instrument made (none if one failed).
func (ob *observables) register(f metric.Callback) error {
	if ob.err != nil {
		return ob.err
	}
	_, err := ob.meter.RegisterCallback(f, ob.all...)
	return err
}

// registerHostMetrics registers the host-wide gauges and the spans lost.
func (r *Runner) registerHostMetrics(meter metric.Meter) error {
	ob := &observables{meter: meter}
	var (
		hostInst      = ob.gauge("wasmstream.host.instances", "{instance}", "Instances in use host-wide.")
		hostInstLimit = ob.gauge("wasmstream.host.instances.limit", "{instance}", "host.max_instances.")
		hostInFlight  = ob.gauge("wasmstream.host.records.in_flight", "{record}", "Records in flight host-wide.")
		hostAsync     = ob.gauge("wasmstream.host.async.in_flight", "{operation}", "Guest asynchronous operations in flight host-wide.")
		hostHeld      = ob.gauge("wasmstream.host.held_output_bytes", "By", "Bytes of emitted outputs the host holds (records running or waiting, outputs not yet acknowledged).")
		hostHeldLimit = ob.gauge("wasmstream.host.held_output_bytes.limit", "By", "host.max_held_output_bytes.")
		spansLost     = ob.counter("wasmstream.trace.spans.lost", "{span}", "Spans the trace exporter failed to deliver (a collector down or refusing); none are dropped otherwise.")
	)
	return ob.register(func(_ context.Context, o metric.Observer) error {
		if r.hooks.Tracer != nil {
			o.ObserveInt64(spansLost, r.hooks.Tracer.SpansLost())
		}
		used, limit := r.budget.Instances()
		o.ObserveInt64(hostInst, int64(used))
		o.ObserveInt64(hostInstLimit, int64(limit))
		n, _ := r.budget.InFlight()
		o.ObserveInt64(hostInFlight, n)
		o.ObserveInt64(hostAsync, r.engine.AsyncInFlight())
		held, heldMax := r.engine.HeldOutputBytes()
		o.ObserveInt64(hostHeld, held)
		o.ObserveInt64(hostHeldLimit, heldMax)
		return nil
	})
}

// registerPipelineMetrics registers what each pipeline reports besides its
// counters: its versions' records, guest log lines dropped, the async
// limit and its broker errors.
func (r *Runner) registerPipelineMetrics(meter metric.Meter) error {
	ob := &observables{meter: meter}
	var (
		verRecs     = ob.counter("wasmstream.version.records", "{record}", "Records decided per module version (digest, its label from deploy --label; canary true for a canary's), on this host since the version was loaded; a version that stopped running keeps its series for 15 minutes (scheduler.RetiredVersionRetention).")
		verFailed   = ob.counter("wasmstream.version.failed", "{record}", "Of wasmstream.version.records, those that failed (a fault or an error status).")
		logDrop     = ob.counter("wasmstream.guest.log.dropped", "{line}", "Guest log lines dropped over limits.log_bytes_per_second and limits.log_burst_bytes.")
		logDropB    = ob.counter("wasmstream.guest.log.dropped_bytes", "By", "Message bytes of the guest log lines dropped.")
		asyncLimit  = ob.gauge("wasmstream.async.limit", "{operation}", "Asynchronous operations in flight allowed per instance (async.max_in_flight, or what auto chose).")
		asyncReason = ob.gauge("wasmstream.async.limit_reason", "1", "Why the async limit last changed, as a state set: 1 for the current reason, 0 for the others (start, throughput_gain, no_gain, latency_rise, fewer_suffice, needed, baseline_reset; fixed for a fixed bound).")
		brokerErrs  = ob.counter("wasmstream.kafka.broker.errors", "{error}", "Errors of the pipeline's Kafka client per broker (node id, or seed address): kind connect (a connection not opened) or request (a request failed on its connection: reset, timed out).")
	)
	return ob.register(func(_ context.Context, o metric.Observer) error {
		for _, p := range r.pipes() {
			pipe := attribute.String("pipeline", p.pc.Name)
			if !p.role.IsRetry() {
				for k, c := range versionSeries(r.Versions(p.pc.Name), r.RetiredVersions(p.pc.Name)) {
					at := metric.WithAttributes(pipe, attribute.String("digest", k.digest), attribute.String("label", k.label), attribute.Bool("canary", k.canary))
					o.ObserveInt64(verRecs, c[0], at)
					o.ObserveInt64(verFailed, c[1], at)
				}
			}
			dl, db := r.engine.GuestLogDropped(p.pc.Name)
			o.ObserveInt64(logDrop, dl, metric.WithAttributes(pipe))
			o.ObserveInt64(logDropB, db, metric.WithAttributes(pipe))
			// The reasons are state sets beside the values, so that a value's
			// series keeps its identity when the reason changes.
			retryAttr := attribute.Bool("retry", p.role.IsRetry())
			if a := p.shared.asyncSize; a != nil {
				limit, reason, _ := a.State()
				o.ObserveInt64(asyncLimit, int64(limit), metric.WithAttributes(pipe, retryAttr))
				observeStateSet(o, asyncReason, sizing.AsyncReasons, reason, pipe, retryAttr)
			} else if p.mods.Async.Load() {
				o.ObserveInt64(asyncLimit, int64(p.pc.Async.MaxInFlight), metric.WithAttributes(pipe, retryAttr))
				observeStateSet(o, asyncReason, sizing.AsyncReasons, sizing.ReasonFixed, pipe, retryAttr)
			}
			for _, b := range p.counters.health.snapshot() {
				ba := []attribute.KeyValue{pipe, attribute.String("broker", b.Broker), attribute.String("address", b.Address)}
				o.ObserveInt64(brokerErrs, b.Connect, metric.WithAttributes(append(ba, attribute.String("kind", "connect"))...))
				o.ObserveInt64(brokerErrs, b.Request, metric.WithAttributes(append(ba, attribute.String("kind", "request"))...))
			}
		}
		return nil
	})
}

// taskGauge is a gauge of a task's partition.TaskGauges, one series per
// task; of says its value and whether the task has one.
type taskGauge struct {
	name, unit, desc string
	of               func(*partition.TaskGauges) (int64, bool)
}

var taskGaugeTable = []taskGauge{
	{"wasmstream.task.in_flight", "{record}", "Records fetched and not yet done, per partition task.",
		func(g *partition.TaskGauges) (int64, bool) { return int64(g.InFlight), true }},
	{"wasmstream.task.queued", "{record}", "Records waiting to start, per partition task.",
		func(g *partition.TaskGauges) (int64, bool) { return int64(g.Queued), true }},
	{"wasmstream.task.committed_offset", "{offset}", "The task's last committed offset (the next record to consume).",
		func(g *partition.TaskGauges) (int64, bool) { return g.Committed, true }},
	{"wasmstream.task.watermark", "{offset}", "One past the highest offset below which every record is done.",
		func(g *partition.TaskGauges) (int64, bool) { return g.Watermark, g.HasWatermark }},
	{"wasmstream.task.lag", "{record}", "Records behind the partition's high watermark.",
		func(g *partition.TaskGauges) (int64, bool) { return g.Lag, true }},
	{"wasmstream.task.paused", "1", "1 while the partition's fetching is paused (backpressure).",
		func(g *partition.TaskGauges) (int64, bool) { return int64(boolInt(g.Paused)), true }},
	{"wasmstream.pool.target_instances", "{instance}", "instances: auto: the most instances the host lets the task have now.",
		func(g *partition.TaskGauges) (int64, bool) { return int64(g.Target), g.Sized }},
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// registerTaskMetrics registers the gauges of each partition task, of its
// instance slots, and the retry tiers' backlog.
func (r *Runner) registerTaskMetrics(meter metric.Meter) error {
	ob := &observables{meter: meter}
	gauges := make([]metric.Int64ObservableGauge, len(taskGaugeTable))
	for i, g := range taskGaugeTable {
		gauges[i] = ob.gauge(g.name, g.unit, g.desc)
	}
	var (
		instances    = ob.gauge("wasmstream.instances", "{instance}", "Module instances per task, by state (idle, busy, awaiting_async).")
		instRecords  = ob.counter("wasmstream.instance.records", "{record}", "Records decided on an instance slot of a task.")
		instFaults   = ob.counter("wasmstream.instance.faults", "{fault}", "Faults on an instance slot of a task.")
		instPages    = ob.gauge("wasmstream.instance.memory.pages", "{page}", "Linear memory of the instance in a slot, in 64 KiB pages.")
		poolReason   = ob.gauge("wasmstream.pool.target_reason", "1", "instances: auto: why the target last changed, as a state set: 1 for the current reason, 0 for the others (start, queueing, core_contention, idle).")
		stalled      = ob.gauge("wasmstream.task.stalled", "1", "A state set per partition: 1 for where its records wait (fetching: on the broker; producing: outputs not acknowledged; processing: in the module) while none was done for 10 s; all 0 while it moves.")
		retryBacklog = ob.gauge("wasmstream.retry.backlog", "{record}", "Records waiting on a retry tier topic (its retry workers' lag).")
	)
	return ob.register(func(_ context.Context, o metric.Observer) error {
		for _, p := range r.pipes() {
			pipe := attribute.String("pipeline", p.pc.Name)
			backlog := map[string]int64{}
			gs := p.taskGauges(true)
			stalls := map[tp]string{}
			for _, st := range p.stalls(gs) {
				stalls[tp{Topic: st.Topic, Partition: st.Partition}] = st.Reason
			}
			for _, g := range gs {
				base := []attribute.KeyValue{pipe, attribute.String("topic", g.Topic), attribute.Int("partition", int(g.Partition))}
				at := metric.WithAttributes(base...)
				for i, tg := range taskGaugeTable {
					if v, ok := tg.of(&g); ok {
						o.ObserveInt64(gauges[i], v, at)
					}
				}
				observeStateSet(o, stalled, stallReasons, stalls[tp{Topic: g.Topic, Partition: g.Partition}], base...)
				if g.Sized {
					observeStateSet(o, poolReason, sizing.PoolReasons, g.Reason, base...)
				}
				if p.role.IsRetry() {
					backlog[g.Topic] += g.Lag
				}
				for _, sg := range g.Slots {
					wa := metric.WithAttributes(append(base, attribute.Int("slot", sg.Slot))...)
					o.ObserveInt64(instRecords, sg.Handled, wa)
					o.ObserveInt64(instFaults, sg.Faults, wa)
					o.ObserveInt64(instPages, sg.Pages, wa)
				}
				for i, n := range g.States {
					o.ObserveInt64(instances, n, metric.WithAttributes(append(base, attribute.String("state", partition.WorkerStates[i]))...))
				}
			}
			for topic, n := range backlog {
				o.ObserveInt64(retryBacklog, n, metric.WithAttributes(pipe, attribute.String("topic", topic)))
			}
		}
		return nil
	})
}

type loadTime struct {
	pipeline string
	time.Duration
	fromCache bool // read from the compile cache on disk, not compiled
}

// observeStateSet observes a state set (OpenMetrics): one series per state,
// 1 for current and 0 for the others, each with the state attribute
// "reason" beside attrs.
func observeStateSet(o metric.Observer, g metric.Int64ObservableGauge, states []string, current string, attrs ...attribute.KeyValue) {
	for _, st := range states {
		v := int64(0)
		if st == current {
			v = 1
		}
		o.ObserveInt64(g, v, metric.WithAttributes(append(attrs[:len(attrs):len(attrs)], attribute.String("reason", st))...))
	}
}

// seriesKey is one wasmstream.version.* series of a pipeline.
type seriesKey struct {
	digest, label string
	canary        bool
}

// versionSeries sums the records and failures of the running and the
// retired versions per series: a version deployed again while its earlier
// run is still kept (a rollback and forth) is one series, not two
// observations of the same attributes.
func versionSeries(running, retired []VersionStats) map[seriesKey][2]int64 {
	out := map[seriesKey][2]int64{}
	for _, v := range append(retired, running...) {
		k := seriesKey{digest: v.Digest[:min(12, len(v.Digest))], label: v.Label, canary: v.Canary}
		c := out[k]
		out[k] = [2]int64{c[0] + v.Records, c[1] + v.Failed}
	}
	return out
}
