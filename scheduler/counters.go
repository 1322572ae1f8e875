package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/wasmstream/wasmstream/scheduler/internal/state"
)

// counterScope is where a counter is counted, which says how it is read
// and which series it has.
type counterScope uint8

const (
	// perPartition: counted on the partition's own Stats only (one atomic
	// add on the record path, pipeCounters.partitionStats); summed for
	// Snapshot, one series per partition (pipeline, topic, partition).
	perPartition counterScope = iota
	// perPipeline: counted on the pipeline's Stats; one series per
	// pipeline.
	perPipeline
	// perStatePipeline: as perPipeline, exported for pipelines with
	// state.enabled only.
	perStatePipeline
	// perSchemaPipeline: as perPipeline, exported for pipelines that read
	// or write schema-registry data only.
	perSchemaPipeline
)

// counterRow is one of the counters of Stats and how it is shown: its
// field in Snapshot (the same name), its OpenTelemetry instrument (an
// observable counter read when collected: the record path pays only its
// atomic add) and its key in GET /status.
type counterRow struct {
	of     counter // the counter in a Stats
	scope  counterScope
	metric string
	unit   string
	desc   string
	// attr is an attribute of the row's series besides its scope's: rows
	// that share one metric tell their series apart by it.
	attr   attribute.KeyValue
	status string // its key in /status "records"; "" for none
	nanos  bool   // counted in nanoseconds, exported in seconds (a float counter)

	name      string // its field in Stats and in Snapshot (set from of at start)
	snapField int    // the index of that field in Snapshot; -1 for none
}

// counterTable is every counter of Stats, once: adding a counter is its
// field in hooks.Stats, its row here and its field of the same name in
// Snapshot (TestCounterTableIsWired fails on a part missing); the metrics,
// Snapshot and /status are read from the rows. Rows with a status key are
// in the order /status shows them.
var counterTable = []counterRow{
	{of: func(s *Stats) *atomic.Int64 { return &s.Fetched }, scope: perPartition, status: "fetched",
		metric: "wasmstream.records.fetched", unit: "{record}", desc: "Records handed to partition tasks."},
	{of: func(s *Stats) *atomic.Int64 { return &s.Done }, scope: perPartition, status: "done",
		metric: "wasmstream.records.done", unit: "{record}", desc: "Records whose outcome is durable (outputs or failure copy acknowledged)."},
	{of: func(s *Stats) *atomic.Int64 { return &s.Outputs }, scope: perPartition, status: "outputs",
		metric: "wasmstream.records.outputs", unit: "{record}", desc: "Output records acknowledged by the broker."},
	{of: func(s *Stats) *atomic.Int64 { return &s.Dropped }, scope: perPartition, status: "records_dropped",
		metric: "wasmstream.records.dropped", unit: "{record}", desc: "Records the module decided ok with no output (filtered), counted when done."},
	{of: func(s *Stats) *atomic.Int64 { return &s.Retried }, scope: perPartition, status: "retried",
		metric: "wasmstream.records.retried", unit: "{record}", desc: "Records sent to a retry topic or retried inline."},
	{of: func(s *Stats) *atomic.Int64 { return &s.DeadLetter }, scope: perPartition, status: "dead_lettered",
		metric: "wasmstream.records.dead_lettered", unit: "{record}", desc: "Records acknowledged on the dead-letter topic."},
	{of: func(s *Stats) *atomic.Int64 { return &s.Faults }, scope: perPartition, status: "faults",
		metric: "wasmstream.guest.faults", unit: "{fault}", desc: "Guest faults (traps, panics, deadlines, out of memory, bad pointers...)."},
	{of: func(s *Stats) *atomic.Int64 { return &s.Skipped }, scope: perPartition, status: "skipped",
		metric: "wasmstream.records.skipped", unit: "{record}", desc: "Records skipped because a previous owner recorded them done."},
	{of: func(s *Stats) *atomic.Int64 { return &s.Restarted }, scope: perPartition,
		metric: "wasmstream.records.restarted", unit: "{record}", desc: "Records restarted because their instance was discarded while they waited."},
	{of: func(s *Stats) *atomic.Int64 { return &s.Borrowed }, scope: perPartition,
		metric: "wasmstream.instances.borrowed", unit: "{instance}", desc: "Instances a task borrowed above its minimum because records waited."},
	{of: func(s *Stats) *atomic.Int64 { return &s.Released }, scope: perPartition,
		metric: "wasmstream.instances.released", unit: "{instance}", desc: "Borrowed instances a task gave back after instances.idle_timeout without a record."},

	{of: func(s *Stats) *atomic.Int64 { return &s.Commits }, scope: perPipeline,
		metric: "wasmstream.commits", unit: "{commit}", desc: "Successful offset commits."},
	{of: func(s *Stats) *atomic.Int64 { return &s.Read }, scope: perPipeline,
		metric: "wasmstream.fetch.records_read", unit: "{record}", desc: "Records the client decoded from fetch responses; beyond wasmstream.records.fetched, records read again (a batch begun before the fetch offset, a paused partition's share of a fetch dropped)."},
	{of: func(s *Stats) *atomic.Int64 { return &s.Pauses }, scope: perPipeline,
		metric: "wasmstream.fetch.pauses", unit: "{pause}", desc: "Times a partition's fetching was paused for backpressure (a task at twice its bounds while others took records)."},
	{of: func(s *Stats) *atomic.Int64 { return &s.HeldBack }, scope: perPipeline,
		metric: "wasmstream.fetch.held_back", unit: "{wait}", desc: "Times the poll loop waited because no task took more records (backpressure)."},
	{of: func(s *Stats) *atomic.Int64 { return &s.ForgedHeaders }, scope: perPipeline,
		metric: "wasmstream.forged_headers", unit: "{header}", desc: "wasmstream.* headers not believed: any on an input record (a producer set them), malformed ones on a retry record."},
	{of: func(s *Stats) *atomic.Int64 { return &s.Runs }, scope: perPipeline,
		metric: "wasmstream.runs", unit: "{call}", desc: "Calls into instances that carried more than one record (batch_records)."},
	{of: func(s *Stats) *atomic.Int64 { return &s.RunRecords }, scope: perPipeline,
		metric: "wasmstream.runs.records", unit: "{record}", desc: "Records carried by the calls of wasmstream.runs."},
	{of: func(s *Stats) *atomic.Int64 { return &s.HandedBack }, scope: perPipeline,
		metric: "wasmstream.runs.handed_back", unit: "{record}", desc: "Records a call of several gave back to the queues, not yet run, for other instances (a slow record in it)."},
	{of: func(s *Stats) *atomic.Int64 { return &s.TxnCommitted }, scope: perPipeline,
		metric: "wasmstream.transactions.committed", unit: "{transaction}", desc: "guarantee: exactly_once: transactions committed."},
	{of: func(s *Stats) *atomic.Int64 { return &s.TxnAborted }, scope: perPipeline,
		metric: "wasmstream.transactions.aborted", unit: "{transaction}", desc: "guarantee: exactly_once: transactions aborted; their records are processed again."},
	{of: func(s *Stats) *atomic.Int64 { return &s.TxnSettled }, scope: perPipeline,
		metric: "wasmstream.transactions.settled", unit: "{transaction}", desc: "Of wasmstream.transactions.aborted, those whose end was unconfirmed, settled (the offsets read back from the broker) before the tasks restarted."},
	{of: func(s *Stats) *atomic.Int64 { return &s.Rebuilds }, scope: perPipeline,
		metric: "wasmstream.pipeline.rebuilds", unit: "{rebuild}", desc: "Times the pipeline was rebuilt with a new client because its group member could not go on."},

	{of: func(s *Stats) *atomic.Int64 { return &s.StateWrites }, scope: perStatePipeline,
		metric: "wasmstream.state.writes", unit: "{write}", desc: "Changelog records of succeeded records: their state writes (puts and deletes), and the stream time of those that put nothing."},
	{of: func(s *Stats) *atomic.Int64 { return &s.StateRestored }, scope: perStatePipeline,
		metric: "wasmstream.state.restored", unit: "{record}", desc: "Changelog records applied to local stores by restores at partition assignment."},
	{of: func(s *Stats) *atomic.Int64 { return &s.StateRestoreNanos }, scope: perStatePipeline, nanos: true,
		metric: "wasmstream.state.restore.duration", unit: "s", desc: fmt.Sprintf("Time spent restoring local stores from the changelog at partition assignment, up to %d partitions at once (no partition of the pipeline is processed meanwhile).", state.RestoreParallel)},
	{of: func(s *Stats) *atomic.Int64 { return &s.StateRestoreSkipped }, scope: perStatePipeline,
		metric: "wasmstream.state.restore.skipped", unit: "{record}", desc: "Changelog records restores skipped because the local store cannot hold them (a key over 1024 bytes); each is logged, up to 5 per restore."},
	{of: func(s *Stats) *atomic.Int64 { return &s.StateFlushFailures }, scope: perStatePipeline,
		metric: "wasmstream.state.flush.failures", unit: "{flush}", desc: "Times a local store refused the state writes of committed records: they stayed in memory, to be applied at the next commit (a restart reads them from the changelog)."},
	{of: func(s *Stats) *atomic.Int64 { return &s.StateRefused }, scope: perStatePipeline,
		metric: "wasmstream.state.refused", unit: "{put}", desc: "state_put calls refused (errno 5) because the partition's state was at state.max_bytes."},
	{of: func(s *Stats) *atomic.Int64 { return &s.TimersSet }, scope: perStatePipeline,
		metric: "wasmstream.timers.set", unit: "{timer}", desc: "Event-time timers set by committed records and firings (timer_set)."},
	{of: func(s *Stats) *atomic.Int64 { return &s.TimersFired }, scope: perStatePipeline,
		metric: "wasmstream.timers.fired", unit: "{firing}", desc: "Timer firings (wasmstream_on_timer) that succeeded."},
	{of: func(s *Stats) *atomic.Int64 { return &s.TimersFailed }, scope: perStatePipeline,
		metric: "wasmstream.timers.failed", unit: "{firing}", desc: "Timer firings that failed terminally: their timer deleted, a dead-letter record written."},
	{of: func(s *Stats) *atomic.Int64 { return &s.TimersIdleRounds }, scope: perStatePipeline,
		metric: "wasmstream.timers.idle_advances", unit: "{advance}", desc: "Stream-time advances of idle partitions by the wall clock (timers.idle_advance)."},

	{of: func(s *Stats) *atomic.Int64 { return &s.SchemaDecodeFailures }, scope: perSchemaPipeline, attr: attribute.String("direction", "decode"),
		metric: "wasmstream.schema.failures", unit: "{record}", desc: schemaFailuresDesc},
	{of: func(s *Stats) *atomic.Int64 { return &s.SchemaEncodeFailures }, scope: perSchemaPipeline, attr: attribute.String("direction", "encode"),
		metric: "wasmstream.schema.failures", unit: "{record}", desc: schemaFailuresDesc},
}

const schemaFailuresDesc = "Records failed by schema-registry data, by direction: decode (an input key or value) or encode (an output)."

// The rows' names and Snapshot fields, found once (reflection at start,
// never when collected).
func init() {
	var probe Stats
	fields := reflect.ValueOf(&probe).Elem()
	snap := reflect.TypeOf(Snapshot{})
	for i := range counterTable {
		c := &counterTable[i]
		c.snapField = -1
		for f := range fields.NumField() {
			if fields.Field(f).Addr().Interface() == any(c.of(&probe)) {
				c.name = fields.Type().Field(f).Name
			}
		}
		if sf, ok := snap.FieldByName(c.name); ok && len(sf.Index) == 1 && sf.Type.Kind() == reflect.Int64 {
			c.snapField = sf.Index[0]
		}
	}
}

// countersInto sets s's counter fields from the table: the per-partition
// counters summed, the pipeline's own read (psMu held for the partitions'
// map only).
func (p *Pipeline) countersInto(s *Snapshot) {
	v := reflect.ValueOf(s).Elem()
	p.counters.psMu.Lock()
	defer p.counters.psMu.Unlock()
	for _, c := range counterTable {
		if c.snapField < 0 {
			continue
		}
		n := c.of(&p.counters.stats).Load()
		if c.scope == perPartition {
			n = 0
			for _, ps := range p.counters.parts {
				n += c.of(ps).Load()
			}
		}
		v.Field(c.snapField).SetInt(n)
	}
}

// exports says whether p has the counters of scope (a perPartition row is
// exported per partition, not here).
func (sc counterScope) exports(p *Pipeline) bool {
	switch sc {
	case perPipeline:
		return true
	case perStatePipeline:
		return p.subs.state != nil
	case perSchemaPipeline:
		return p.pc.UsesSchemaRegistry()
	}
	return false
}

// registerCounters registers one instrument per metric of the table and
// the callback that observes every row when collected: no reflection, one
// atomic load per row and series.
func (r *Runner) registerCounters(meter metric.Meter) error {
	observe := make([]func(metric.Observer, int64, ...metric.ObserveOption), len(counterTable))
	byName := map[string]func(metric.Observer, int64, ...metric.ObserveOption){}
	var instruments []metric.Observable
	for i, c := range counterTable {
		if f := byName[c.metric]; f != nil {
			observe[i] = f
			continue
		}
		if c.nanos {
			inst, err := meter.Float64ObservableCounter(c.metric, metric.WithUnit(c.unit), metric.WithDescription(c.desc))
			if err != nil {
				return err
			}
			instruments = append(instruments, inst)
			observe[i] = func(o metric.Observer, n int64, at ...metric.ObserveOption) {
				o.ObserveFloat64(inst, float64(n)/1e9, at...)
			}
		} else {
			inst, err := meter.Int64ObservableCounter(c.metric, metric.WithUnit(c.unit), metric.WithDescription(c.desc))
			if err != nil {
				return err
			}
			instruments = append(instruments, inst)
			observe[i] = func(o metric.Observer, n int64, at ...metric.ObserveOption) { o.ObserveInt64(inst, n, at...) }
		}
		byName[c.metric] = observe[i]
	}
	_, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for _, p := range r.pipes() {
			pipe := attribute.String("pipeline", p.pc.Name)
			p.counters.psMu.Lock()
			for k, s := range p.counters.parts {
				at := metric.WithAttributes(pipe, attribute.String("topic", k.Topic), attribute.Int("partition", int(k.Partition)))
				for i, c := range counterTable {
					if c.scope == perPartition {
						observe[i](o, c.of(s).Load(), at)
					}
				}
			}
			p.counters.psMu.Unlock()
			for i, c := range counterTable {
				if !c.scope.exports(p) {
					continue
				}
				at := metric.WithAttributes(pipe)
				if c.attr.Valid() {
					at = metric.WithAttributes(pipe, c.attr)
				}
				observe[i](o, c.of(&p.counters.stats).Load(), at)
			}
		}
		return nil
	}, instruments...)
	return err
}

// statusKeys are the keys of /status "records", in the order shown: the
// rows with a status key, then in_flight (a gauge, not a counter).
var statusKeys = func() []string {
	var keys []string
	for _, c := range counterTable {
		if c.status != "" {
			keys = append(keys, c.status)
		}
	}
	return append(keys, "in_flight")
}()

// statusCounts are the /status "records" of a snapshot.
func statusCounts(s *Snapshot) RecordCounts {
	v := reflect.ValueOf(s).Elem()
	rc := RecordCounts{"in_flight": s.InFlight}
	for _, c := range counterTable {
		if c.status != "" && c.snapField >= 0 {
			rc[c.status] = v.Field(c.snapField).Int()
		}
	}
	return rc
}

// MarshalJSON writes the counts in the order of statusKeys (a map's keys
// would come sorted), any other key after them, sorted.
func (rc RecordCounts) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	add := func(k string, n int64) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		q, _ := json.Marshal(k) // a string always marshals
		b = append(b, q...)
		b = append(b, ':')
		b = strconv.AppendInt(b, n, 10)
	}
	known := map[string]bool{}
	for _, k := range statusKeys {
		known[k] = true
		if n, ok := rc[k]; ok {
			add(k, n)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(rc)) {
		if !known[k] {
			add(k, rc[k])
		}
	}
	return append(b, '}'), nil
}
