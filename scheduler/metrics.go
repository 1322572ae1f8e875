package scheduler

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
	"github.com/wasmstream/wasmstream/scheduler/internal/sizing"
)

// RegisterMetrics registers the runner's instruments with meter.
func (r *Runner) RegisterMetrics(meter metric.Meter) error {
	m := &Metrics{}
	var err error
	errs := func(e error) {
		if err == nil {
			err = e
		}
	}
	hist := func(name, unit, desc string, bounds ...float64) metric.Float64Histogram {
		h, e := meter.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(bounds...))
		errs(e)
		return h
	}
	m.Latency = hist("wasmstream.record.processing.duration", "s", "Time from a record's first call into its instance to its outcome (asynchronous waits included), per attempt.",
		0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
	m.Compile = hist("wasmstream.module.compile.duration", "s", "Time to validate and compile a module (from_compile_cache: read from the compile cache on disk instead).", 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
	m.Instantiate = hist("wasmstream.module.instantiate.duration", "s", "Time to create a module instance (initialiser included).", 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1)

	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, e := meter.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs(e)
		return c
	}
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, e := meter.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs(e)
		return g
	}
	var (
		fetched   = counter("wasmstream.records.fetched", "{record}", "Records handed to partition tasks.")
		done      = counter("wasmstream.records.done", "{record}", "Records whose outcome is durable (outputs or failure copy acknowledged).")
		outputs   = counter("wasmstream.records.outputs", "{record}", "Output records acknowledged by the broker.")
		dropped   = counter("wasmstream.records.dropped", "{record}", "Records the module decided ok with no output (filtered), counted when done.")
		dead      = counter("wasmstream.records.dead_lettered", "{record}", "Records acknowledged on the dead-letter topic.")
		retried   = counter("wasmstream.records.retried", "{record}", "Records sent to a retry topic or retried inline.")
		skipped   = counter("wasmstream.records.skipped", "{record}", "Records skipped because a previous owner recorded them done.")
		faults    = counter("wasmstream.guest.faults", "{fault}", "Guest faults (traps, panics, deadlines, out of memory, bad pointers...).")
		restarted = counter("wasmstream.records.restarted", "{record}", "Records restarted because their instance was discarded while they waited.")
		commits   = counter("wasmstream.commits", "{commit}", "Successful offset commits.")
		read      = counter("wasmstream.fetch.records_read", "{record}", "Records the client decoded from fetch responses; beyond wasmstream.records.fetched, records read again (a batch begun before the fetch offset, a paused partition's share of a fetch dropped).")
		pauses    = counter("wasmstream.fetch.pauses", "{pause}", "Times a partition's fetching was paused for backpressure (a task at twice its bounds while others took records).")
		verRecs   = counter("wasmstream.version.records", "{record}", "Records decided per module version (digest, its label from deploy --label; canary true for a canary's), on this host since the version was loaded; a version that stopped running keeps its series for 15 minutes (scheduler.RetiredVersionRetention).")
		verFailed = counter("wasmstream.version.failed", "{record}", "Of wasmstream.version.records, those that failed (a fault or an error status).")
		logDrop   = counter("wasmstream.guest.log.dropped", "{line}", "Guest log lines dropped over limits.log_bytes_per_second and limits.log_burst_bytes.")
		logDropB  = counter("wasmstream.guest.log.dropped_bytes", "By", "Message bytes of the guest log lines dropped.")
		borrowed  = counter("wasmstream.instances.borrowed", "{instance}", "Instances a task borrowed above its minimum because records waited.")
		released  = counter("wasmstream.instances.released", "{instance}", "Borrowed instances a task gave back after instances.idle_timeout without a record.")
		spansLost = counter("wasmstream.trace.spans.lost", "{span}", "Spans the trace exporter failed to deliver (a collector down or refusing); none are dropped otherwise.")
		forged    = counter("wasmstream.forged_headers", "{header}", "wasmstream.* headers not believed: any on an input record (a producer set them), malformed ones on a retry record.")

		inFlight  = gauge("wasmstream.task.in_flight", "{record}", "Records fetched and not yet done, per partition task.")
		queued    = gauge("wasmstream.task.queued", "{record}", "Records waiting to start, per partition task.")
		committed = gauge("wasmstream.task.committed_offset", "{offset}", "The task's last committed offset (the next record to consume).")
		watermark = gauge("wasmstream.task.watermark", "{offset}", "One past the highest offset below which every record is done.")
		lag       = gauge("wasmstream.task.lag", "{record}", "Records behind the partition's high watermark.")
		paused    = gauge("wasmstream.task.paused", "1", "1 while the partition's fetching is paused (backpressure).")
		instances = gauge("wasmstream.instances", "{instance}", "Module instances per task, by state (idle, busy, awaiting_async).")

		instRecords = counter("wasmstream.instance.records", "{record}", "Records decided on an instance slot of a task.")
		instFaults  = counter("wasmstream.instance.faults", "{fault}", "Faults on an instance slot of a task.")
		instPages   = gauge("wasmstream.instance.memory.pages", "{page}", "Linear memory of the instance in a slot, in 64 KiB pages.")

		hostInst      = gauge("wasmstream.host.instances", "{instance}", "Instances in use host-wide.")
		hostInstLimit = gauge("wasmstream.host.instances.limit", "{instance}", "host.max_instances.")
		hostInFlight  = gauge("wasmstream.host.records.in_flight", "{record}", "Records in flight host-wide.")
		hostAsync     = gauge("wasmstream.host.async.in_flight", "{operation}", "Guest asynchronous operations in flight host-wide.")
		hostHeld      = gauge("wasmstream.host.held_output_bytes", "By", "Bytes of emitted outputs the host holds (records running or waiting, outputs not yet acknowledged).")
		hostHeldLimit = gauge("wasmstream.host.held_output_bytes.limit", "By", "host.max_held_output_bytes.")
		poolTarget    = gauge("wasmstream.pool.target_instances", "{instance}", "instances: auto: the most instances the host lets the task have now.")
		poolReason    = gauge("wasmstream.pool.target_reason", "1", "instances: auto: why the target last changed, as a state set: 1 for the current reason, 0 for the others (start, queueing, core_contention, idle).")
		asyncLimit    = gauge("wasmstream.async.limit", "{operation}", "Asynchronous operations in flight allowed per instance (async.max_in_flight, or what auto chose).")
		asyncReason   = gauge("wasmstream.async.limit_reason", "1", "Why the async limit last changed, as a state set: 1 for the current reason, 0 for the others (start, throughput_gain, no_gain, latency_rise, fewer_suffice, needed, baseline_reset; fixed for a fixed bound).")
		brokerErrs    = counter("wasmstream.kafka.broker.errors", "{error}", "Errors of the pipeline's Kafka client per broker (node id, or seed address): kind connect (a connection not opened) or request (a request failed on its connection: reset, timed out).")
		stalled       = gauge("wasmstream.task.stalled", "1", "A state set per partition: 1 for where its records wait (fetching: on the broker; producing: outputs not acknowledged; processing: in the module) while none was done for 10 s; all 0 while it moves.")
		retryBacklog  = gauge("wasmstream.retry.backlog", "{record}", "Records waiting on a retry tier topic (its retry workers' lag).")
	)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	_, err = meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		if r.hooks.Tracer != nil {
			o.ObserveInt64(spansLost, r.hooks.Tracer.SpansLost())
		}
		for _, p := range r.pipes() {
			pipe := attribute.String("pipeline", p.pc.Name)
			p.psMu.Lock()
			for k, s := range p.parts {
				at := metric.WithAttributes(pipe, attribute.String("topic", k.Topic), attribute.Int("partition", int(k.Partition)))
				o.ObserveInt64(fetched, s.Fetched.Load(), at)
				o.ObserveInt64(done, s.Done.Load(), at)
				o.ObserveInt64(outputs, s.Outputs.Load(), at)
				o.ObserveInt64(dropped, s.Dropped.Load(), at)
				o.ObserveInt64(dead, s.DeadLetter.Load(), at)
				o.ObserveInt64(retried, s.Retried.Load(), at)
				o.ObserveInt64(skipped, s.Skipped.Load(), at)
				o.ObserveInt64(faults, s.Faults.Load(), at)
				o.ObserveInt64(restarted, s.Restarted.Load(), at)
				o.ObserveInt64(borrowed, s.Borrowed.Load(), at)
				o.ObserveInt64(released, s.Released.Load(), at)
			}
			p.psMu.Unlock()
			o.ObserveInt64(commits, p.stats.Commits.Load(), metric.WithAttributes(pipe))
			o.ObserveInt64(read, p.stats.Read.Load(), metric.WithAttributes(pipe))
			o.ObserveInt64(pauses, p.stats.Pauses.Load(), metric.WithAttributes(pipe))
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
			o.ObserveInt64(forged, p.stats.ForgedHeaders.Load(), metric.WithAttributes(pipe))
			// The reasons are state sets beside the values, so that a value's
			// series keeps its identity when the reason changes.
			retryAttr := attribute.Bool("retry", p.role.IsRetry())
			if a := p.asyncSize; a != nil {
				limit, reason, _ := a.State()
				o.ObserveInt64(asyncLimit, int64(limit), metric.WithAttributes(pipe, retryAttr))
				observeStateSet(o, asyncReason, sizing.AsyncReasons, reason, pipe, retryAttr)
			} else if p.mods.Async.Load() {
				o.ObserveInt64(asyncLimit, int64(p.pc.Async.MaxInFlight), metric.WithAttributes(pipe, retryAttr))
				observeStateSet(o, asyncReason, sizing.AsyncReasons, sizing.ReasonFixed, pipe, retryAttr)
			}
			for _, b := range p.health.snapshot() {
				ba := []attribute.KeyValue{pipe, attribute.String("broker", b.Broker), attribute.String("address", b.Address)}
				o.ObserveInt64(brokerErrs, b.Connect, metric.WithAttributes(append(ba, attribute.String("kind", "connect"))...))
				o.ObserveInt64(brokerErrs, b.Request, metric.WithAttributes(append(ba, attribute.String("kind", "request"))...))
			}
			backlog := map[string]int64{}
			gs := p.taskGauges(true)
			stalls := map[tp]string{}
			for _, st := range p.stalls(gs) {
				stalls[tp{Topic: st.Topic, Partition: st.Partition}] = st.Reason
			}
			for _, g := range gs {
				base := []attribute.KeyValue{pipe, attribute.String("topic", g.Topic), attribute.Int("partition", int(g.Partition))}
				at := metric.WithAttributes(base...)
				observeStateSet(o, stalled, stallReasons, stalls[tp{Topic: g.Topic, Partition: g.Partition}], base...)
				o.ObserveInt64(committed, g.Committed, at)
				if g.HasWatermark {
					o.ObserveInt64(watermark, g.Watermark, at)
				}
				o.ObserveInt64(lag, g.Lag, at)
				if g.Sized {
					o.ObserveInt64(poolTarget, int64(g.Target), at)
					observeStateSet(o, poolReason, sizing.PoolReasons, g.Reason, base...)
				}
				if p.role.IsRetry() {
					backlog[g.Topic] += g.Lag
				}
				o.ObserveInt64(inFlight, int64(g.InFlight), at)
				o.ObserveInt64(queued, int64(g.Queued), at)
				pz := int64(0)
				if g.Paused {
					pz = 1
				}
				o.ObserveInt64(paused, pz, at)
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
				o.ObserveInt64(retryBacklog, n, metric.WithAttributes(attribute.String("pipeline", p.pc.Name), attribute.String("topic", topic)))
			}
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
	}, fetched, done, outputs, dropped, dead, retried, skipped, faults, restarted, borrowed, released, commits, read, pauses, verRecs, verFailed, forged, spansLost, logDrop, logDropB, inFlight, queued, committed, watermark, lag, paused, instances,
		instRecords, instFaults, instPages, hostInst, hostInstLimit, hostInFlight, hostAsync, hostHeld, hostHeldLimit, retryBacklog, brokerErrs, stalled, poolTarget, poolReason, asyncLimit, asyncReason)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	for _, register := range []func(metric.Meter) error{r.registerShareMetrics, r.registerStateMetrics, r.registerSchemaMetrics} {
		if err := register(meter); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
	}
	r.hooks.Metrics = m
	for _, p := range r.pipes() {
		p.hooks.Metrics = m
	}
	for _, d := range r.loadTimes {
		m.Compile.Record(context.Background(), d.Seconds(), metric.WithAttributes(attribute.String("pipeline", d.pipeline), attribute.Bool("from_compile_cache", d.fromCache)))
	}
	return nil
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
