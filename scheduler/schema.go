package scheduler

// Schema-registry data (RATIONALE.md, "Schema-registry data"): the
// process's one registry client, made with the runner and shared by every
// pipeline, and its counters and the pipelines' in the metrics.

import (
	"context"
	"fmt"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/schemaio"
)

// newSchemaClient makes the registry client of cfg's schema_registry, or
// returns nil when no pipeline uses one. It reads the files the section
// names (a missing file, or a secret file others may read, is an error
// naming its key) and asks the registry one question (schemareg's Check),
// so a registry that cannot be reached or does not answer within
// request_timeout, a certificate not trusted or credentials refused fail
// the start at once, naming the key to fix, as the brokers' do — not the
// first record, or not until a record's retries run out. The pipelines'
// encoders then resolve their subjects (schemaio.New).
func newSchemaClient(ctx context.Context, cfg *config.Config, log *slog.Logger) (*schemareg.Client, error) {
	used := false
	for i := range cfg.Pipelines {
		p := &cfg.Pipelines[i]
		used = used || p.UsesSchemaRegistry() || p.Async.SchemaRegistry.Enabled
	}
	if cfg.SchemaRegistry.URL == "" || !used {
		return nil, nil
	}
	sc := schemaio.ClientConfig(&cfg.SchemaRegistry)
	sc.Log = log // an output subject's new version, a refresh that fails
	logWarnings(log, schemareg.Warnings(sc))
	c, err := schemareg.New(sc)
	if err == nil {
		err = c.Check(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("schema_registry: %w", err)
	}
	return c, nil
}

// registerSchemaMetrics registers the registry client's counters (the
// process's); each pipeline's decode and encode failures are rows of
// counterTable (counters.go).
func (r *Runner) registerSchemaMetrics(meter metric.Meter) error {
	if r.schemaReg == nil {
		return nil
	}
	ob := &observables{meter: meter}
	var (
		cache    = ob.counter("wasmstream.schema.cache.lookups", "{lookup}", "Schema lookups by id (and subject resolutions) by result: hit (answered without a registry request of its own: compiled schema in the cache, or the fetch of the same id already in flight) or miss (fetched from the registry: one per new id per host).")
		requests = ob.counter("wasmstream.schema.registry.requests", "{request}", "HTTP requests to the schema registry, by result: ok or error (no answer, or an error status).")
	)
	return ob.register(func(_ context.Context, o metric.Observer) error {
		s := &r.schemaReg.Stats
		hits, misses := s.CacheHits.Load(), s.CacheMisses.Load()
		reqs, reqErrs := s.Requests.Load(), s.RequestErrors.Load()
		o.ObserveInt64(cache, int64(hits), metric.WithAttributes(attribute.String("result", "hit")))
		o.ObserveInt64(cache, int64(misses), metric.WithAttributes(attribute.String("result", "miss")))
		o.ObserveInt64(requests, int64(reqs-min(reqErrs, reqs)), metric.WithAttributes(attribute.String("result", "ok")))
		o.ObserveInt64(requests, int64(reqErrs), metric.WithAttributes(attribute.String("result", "error")))
		return nil
	})
}

// SchemaStats are the process's schema-registry client's counters; nil
// without a registry.
func (r *Runner) SchemaStats() *schemareg.Stats {
	if r.schemaReg == nil {
		return nil
	}
	return &r.schemaReg.Stats
}

// logWarnings logs each of warnings: what a connection's settings weaken,
// said at every start.
func logWarnings(log *slog.Logger, warnings []string) {
	for _, w := range warnings {
		log.Warn(w)
	}
}
