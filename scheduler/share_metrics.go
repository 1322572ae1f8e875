package scheduler

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// registerShareMetrics registers the counters of consume: share pipelines
// (ShareStats), observed when collected like the others.
func (r *Runner) registerShareMetrics(meter metric.Meter) error {
	var err error
	counter := func(name, desc string) metric.Int64ObservableCounter {
		c, e := meter.Int64ObservableCounter(name, metric.WithUnit("{record}"), metric.WithDescription(desc))
		if err == nil {
			err = e
		}
		return c
	}
	var (
		acquired   = counter("wasmstream.share.acquired", "consume: share: records acquired from the share group (each under a broker lock).")
		accepted   = counter("wasmstream.share.accepted", "consume: share: records accepted, once their outputs or failure copy were acknowledged.")
		released   = counter("wasmstream.share.released", "consume: share: records released for redelivery to another host (shutdown, drain deadline).")
		renewed    = counter("wasmstream.share.renewed", "consume: share: lock renewals sent for records still waiting (async operations, inline retries, produces).")
		lapsed     = counter("wasmstream.share.lock_lapses", "consume: share: locks the host could not keep: the broker may give the record to another host too (at-least-once).")
		ackErrors  = counter("wasmstream.share.ack_errors", "consume: share: partitions whose acknowledgements the broker refused; their records are redelivered.")
		deliveries = counter("wasmstream.share.deliveries", "consume: share: records acquired, by the broker's delivery count (1, 2, 3, 4, 5+).")
	)
	if err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, p := range r.pipes() {
			s := p.ShareStats()
			if s == nil {
				continue
			}
			at := metric.WithAttributes(attribute.String("pipeline", p.pc.Name))
			o.ObserveInt64(acquired, s.Acquired.Load(), at)
			o.ObserveInt64(accepted, s.Accepted.Load(), at)
			o.ObserveInt64(released, s.Released.Load(), at)
			o.ObserveInt64(renewed, s.Renewed.Load(), at)
			o.ObserveInt64(lapsed, s.Lapsed.Load(), at)
			o.ObserveInt64(ackErrors, s.AckErrors.Load(), at)
			for i := range s.Deliveries {
				d := strconv.Itoa(i + 1)
				if i == len(s.Deliveries)-1 {
					d += "+"
				}
				o.ObserveInt64(deliveries, s.Deliveries[i].Load(), metric.WithAttributes(attribute.String("pipeline", p.pc.Name), attribute.String("delivery", d)))
			}
		}
		return nil
	}, acquired, accepted, released, renewed, lapsed, ackErrors, deliveries)
	return err
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
