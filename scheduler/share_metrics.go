package scheduler

import (
	"context"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// shareCounter is a counter of ShareStats and its metric, one series per
// pipeline.
type shareCounter struct {
	of           func(*ShareStats) *atomic.Int64
	metric, desc string
}

// shareCounterTable are the counters of ShareStats exported (besides
// Deliveries, by delivery count): adding one is its field, its row here and
// the line that counts it.
var shareCounterTable = []shareCounter{
	{func(s *ShareStats) *atomic.Int64 { return &s.Acquired }, "wasmstream.share.acquired", "consume: share: records acquired from the share group (each under a broker lock)."},
	{func(s *ShareStats) *atomic.Int64 { return &s.Accepted }, "wasmstream.share.accepted", "consume: share: records accepted, once their outputs or failure copy were acknowledged."},
	{func(s *ShareStats) *atomic.Int64 { return &s.Released }, "wasmstream.share.released", "consume: share: records released for redelivery to another host (shutdown, drain deadline)."},
	{func(s *ShareStats) *atomic.Int64 { return &s.Renewed }, "wasmstream.share.renewed", "consume: share: lock renewals sent for records still waiting (async operations, inline retries, produces)."},
	{func(s *ShareStats) *atomic.Int64 { return &s.Lapsed }, "wasmstream.share.lock_lapses", "consume: share: locks the host could not keep: the broker may give the record to another host too (at-least-once)."},
	{func(s *ShareStats) *atomic.Int64 { return &s.AckErrors }, "wasmstream.share.ack_errors", "consume: share: partitions whose acknowledgements the broker refused; their records are redelivered."},
}

// registerShareMetrics registers the counters of consume: share pipelines
// (ShareStats), observed when collected like the others.
func (r *Runner) registerShareMetrics(meter metric.Meter) error {
	ob := &observables{meter: meter}
	counters := make([]metric.Int64ObservableCounter, len(shareCounterTable))
	for i, c := range shareCounterTable {
		counters[i] = ob.counter(c.metric, "{record}", c.desc)
	}
	deliveries := ob.counter("wasmstream.share.deliveries", "{record}", "consume: share: records acquired, by the broker's delivery count (1, 2, 3, 4, 5+).")
	return ob.register(func(_ context.Context, o metric.Observer) error {
		for _, p := range r.pipes() {
			s := p.ShareStats()
			if s == nil {
				continue
			}
			at := metric.WithAttributes(attribute.String("pipeline", p.pc.Name))
			for i, c := range shareCounterTable {
				o.ObserveInt64(counters[i], c.of(s).Load(), at)
			}
			for i := range s.Deliveries {
				d := strconv.Itoa(i + 1)
				if i == len(s.Deliveries)-1 {
					d += "+"
				}
				o.ObserveInt64(deliveries, s.Deliveries[i].Load(), metric.WithAttributes(attribute.String("pipeline", p.pc.Name), attribute.String("delivery", d)))
			}
		}
		return nil
	})
}

// ShareStats are the share-group counters of the pipeline named name; nil
// when it does not consume through a share group.
func (r *Runner) ShareStats(name string) *ShareStats {
	for _, p := range r.pipes() {
		if p.pc.Name == name && !p.role.IsRetry() {
			return p.ShareStats()
		}
	}
	return nil
}
