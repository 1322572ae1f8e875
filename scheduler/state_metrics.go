package scheduler

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// registerStateMetrics registers the gauges of stateful pipelines
// (state.enabled): each partition's local store. Their counters are rows
// of counterTable (counters.go).
func (r *Runner) registerStateMetrics(meter metric.Meter) error {
	ob := &observables{meter: meter}
	var (
		storeBytes = ob.gauge("wasmstream.state.store.bytes", "By", "Size of a partition's local state store (bbolt file in use).")
		stateBytes = ob.gauge("wasmstream.state.bytes", "By", "Keys and values in a partition's local state store, which state.max_bytes bounds with the writes of records not yet committed.")
	)
	return ob.register(func(_ context.Context, o metric.Observer) error {
		for _, p := range r.pipes() {
			if p.subs.state == nil {
				continue
			}
			pipe := attribute.String("pipeline", p.pc.Name)
			for part, sz := range p.subs.state.Sizes() {
				pa := metric.WithAttributes(pipe, attribute.Int("partition", int(part)))
				o.ObserveInt64(storeBytes, sz.File, pa)
				o.ObserveInt64(stateBytes, sz.Data, pa)
			}
		}
		return nil
	})
}
