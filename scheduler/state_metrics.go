package scheduler

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/wasmstream/wasmstream/scheduler/internal/state"
)

// registerStateMetrics registers the counters and gauges of stateful
// pipelines (state.enabled), observed when collected like the others: the
// record path pays one atomic add per record with writes.
func (r *Runner) registerStateMetrics(meter metric.Meter) error {
	var err error
	errs := func(e error) {
		if err == nil {
			err = e
		}
	}
	writes, e := meter.Int64ObservableCounter("wasmstream.state.writes", metric.WithUnit("{write}"), metric.WithDescription("State writes (puts and deletes) of succeeded records: each one changelog record."))
	errs(e)
	restored, e := meter.Int64ObservableCounter("wasmstream.state.restored", metric.WithUnit("{record}"), metric.WithDescription("Changelog records applied to local stores by restores at partition assignment."))
	errs(e)
	restoreTime, e := meter.Float64ObservableCounter("wasmstream.state.restore.duration", metric.WithUnit("s"), metric.WithDescription(fmt.Sprintf("Time spent restoring local stores from the changelog at partition assignment, up to %d partitions at once (no partition of the pipeline is processed meanwhile).", state.RestoreParallel)))
	errs(e)
	skipped, e := meter.Int64ObservableCounter("wasmstream.state.restore.skipped", metric.WithUnit("{record}"), metric.WithDescription("Changelog records restores skipped because the local store cannot hold them (a key over 1024 bytes); each is logged, up to 5 per restore."))
	errs(e)
	flushFailures, e := meter.Int64ObservableCounter("wasmstream.state.flush.failures", metric.WithUnit("{flush}"), metric.WithDescription("Times a local store refused the state writes of committed records: they stayed in memory, to be applied at the next commit (a restart reads them from the changelog)."))
	errs(e)
	storeBytes, e := meter.Int64ObservableGauge("wasmstream.state.store.bytes", metric.WithUnit("By"), metric.WithDescription("Size of a partition's local state store (bbolt file in use)."))
	errs(e)
	stateBytes, e := meter.Int64ObservableGauge("wasmstream.state.bytes", metric.WithUnit("By"), metric.WithDescription("Keys and values in a partition's local state store, which state.max_bytes bounds with the writes of records not yet committed."))
	errs(e)
	refused, e := meter.Int64ObservableCounter("wasmstream.state.refused", metric.WithUnit("{put}"), metric.WithDescription("state_put calls refused (errno 5) because the partition's state was at state.max_bytes."))
	errs(e)
	if err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, p := range r.pipes() {
			if p.state == nil {
				continue
			}
			pipe := attribute.String("pipeline", p.pc.Name)
			at := metric.WithAttributes(pipe)
			o.ObserveInt64(writes, p.stats.StateWrites.Load(), at)
			o.ObserveInt64(restored, p.stats.StateRestored.Load(), at)
			o.ObserveInt64(skipped, p.stats.StateRestoreSkipped.Load(), at)
			o.ObserveInt64(flushFailures, p.stats.StateFlushFailures.Load(), at)
			o.ObserveFloat64(restoreTime, float64(p.stats.StateRestoreNanos.Load())/1e9, at)
			o.ObserveInt64(refused, p.stats.StateRefused.Load(), at)
			for part, sz := range p.state.Sizes() {
				pa := metric.WithAttributes(pipe, attribute.Int("partition", int(part)))
				o.ObserveInt64(storeBytes, sz.File, pa)
				o.ObserveInt64(stateBytes, sz.Data, pa)
			}
		}
		return nil
	}, writes, restored, skipped, flushFailures, restoreTime, storeBytes, stateBytes, refused)
	return err
}
