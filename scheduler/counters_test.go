package scheduler

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
)

// Every counter of Stats is one row of counterTable, and every row is
// wired through: a field of Snapshot holding its sum, a metric whose series
// add up to the same count, and, with a status key, that key in GET
// /status. A counter added with a part missing fails here.
func TestCounterTableIsWired(t *testing.T) {
	t.Parallel()
	rows := map[string]int{}
	for i, c := range counterTable {
		if c.name == "" {
			t.Errorf("row %d (%s): its accessor picks no field of Stats", i, c.metric)
			continue
		}
		if _, dup := rows[c.name]; dup {
			t.Errorf("Stats.%s has two rows", c.name)
		}
		rows[c.name] = i
		if c.snapField < 0 {
			t.Errorf("Stats.%s has no int64 field of the same name in Snapshot", c.name)
		}
		if c.metric == "" || c.unit == "" || c.desc == "" {
			t.Errorf("Stats.%s: metric %q, unit %q, description %q: each is needed", c.name, c.metric, c.unit, c.desc)
		}
	}
	st := reflect.TypeOf(Stats{})
	for i := range st.NumField() {
		if _, ok := rows[st.Field(i).Name]; !ok {
			t.Errorf("Stats.%s has no row in counterTable", st.Field(i).Name)
		}
	}
	// Rows sharing a metric are one instrument: the same unit, description,
	// kind and scope, series told apart by their attribute.
	first := map[string]counterRow{}
	for _, c := range counterTable {
		f, ok := first[c.metric]
		if !ok {
			first[c.metric] = c
			continue
		}
		if f.unit != c.unit || f.desc != c.desc || f.nanos != c.nanos || f.scope != c.scope || !c.attr.Valid() || f.attr == c.attr {
			t.Errorf("%s: rows %s and %s share it but differ in unit, description, kind or scope, or are not told apart", c.metric, f.name, c.name)
		}
	}

	// A pipeline with state and schema-registry data (so that every scope
	// is exported), two partitions, and every counter a different count:
	// row i counts 1000*(i+1), split 1:2 over the partitions.
	p := counterPipeline()
	a, b := p.counters.partitionStats("in", 0), p.counters.partitionStats("in", 1)
	want := func(i int) int64 { return 1000 * int64(i+1) }
	for i, c := range counterTable {
		if c.scope == perPartition {
			c.of(a).Store(want(i) / 3)
			c.of(b).Store(want(i) - want(i)/3)
		} else {
			c.of(&p.counters.stats).Store(want(i))
		}
	}

	snap := reflect.ValueOf(p.Snapshot())
	for i, c := range counterTable {
		if c.snapField >= 0 && snap.Field(c.snapField).Int() != want(i) {
			t.Errorf("Snapshot.%s = %d, want %d", c.name, snap.Field(c.snapField).Int(), want(i))
		}
	}

	r := &Runner{pipelines: []*Pipeline{p}}
	reader := sdkmetric.NewManualReader()
	if err := r.registerCounters(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")); err != nil {
		t.Fatal(err)
	}
	m := collect(t, reader)
	for i, c := range counterTable {
		match := func(s attribute.Set) bool {
			if v, ok := s.Value("pipeline"); !ok || v.AsString() != "p" {
				return false
			}
			v, ok := s.Value(c.attr.Key)
			return !c.attr.Valid() || ok && v == c.attr.Value
		}
		got := sumInt(m[c.metric], match)
		if d, ok := m[c.metric].(metricdata.Sum[float64]); ok {
			var secs float64
			for _, dp := range d.DataPoints {
				secs += dp.Value
			}
			got = int64(math.Round(secs * 1e9))
		}
		if m[c.metric] == nil || got != want(i) {
			t.Errorf("Stats.%s: metric %s counts %d, want %d", c.name, c.metric, got, want(i))
		}
	}

	rec := httptest.NewRecorder()
	StatusHandler(counterStatus{p}).ServeHTTP(rec, httptest.NewRequest("GET", "/status", nil))
	var status struct {
		Pipelines []struct {
			Records map[string]int64 `json:"records"`
		} `json:"pipelines"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &status); err != nil || len(status.Pipelines) != 1 {
		t.Fatalf("/status: %v\n%s", err, rec.Body)
	}
	for i, c := range counterTable {
		if got, ok := status.Pipelines[0].Records[c.status]; c.status != "" && (!ok || got != want(i)) {
			t.Errorf("/status records.%s = %d (present: %v), want %d", c.status, got, ok, want(i))
		}
	}
	// Its keys keep their order: the rows', then in_flight.
	order := []string{"fetched", "done", "outputs", "records_dropped", "retried", "dead_lettered", "faults", "skipped", "in_flight"}
	body, last := rec.Body.String(), -1
	for _, k := range order {
		at := strings.Index(body, `"`+k+`":`)
		if at < last {
			t.Errorf("/status records: %q out of order (want %v):\n%s", k, order, body)
		}
		last = at
	}
}

// counterStatus is a StatusSource of one pipeline built without a broker.
type counterStatus struct{ p *Pipeline }

func (s counterStatus) View() []PipelineView {
	return []PipelineView{{Snapshot: s.p.Snapshot(), Module: host.Info{Digest: "aa"}}}
}

func (counterStatus) Versions(string) []VersionStats { return nil }

// counterPipeline is a pipeline that exports every scope of counter (state
// and schema-registry data), built without a broker; its partitions come
// with partitionStats.
func counterPipeline() *Pipeline {
	pc := &config.Pipeline{Name: "p"}
	pc.InputFormat.Value.Format = config.FormatConfluent
	p := &Pipeline{pc: pc, counters: &pipeCounters{}}
	p.subs.state = &state.Stores{}
	p.tasks = partition.NewSet(&p.life.stopped) // none attached: Snapshot's gauges are zero
	return p
}

// What reading the counters costs with 64 partitions: a Snapshot's
// counters (reflection sets its fields), and one collection of the
// counter metrics (no reflection).
func BenchmarkCounters(b *testing.B) {
	p := counterPipeline()
	for i := range 64 {
		p.counters.partitionStats("in", int32(i)).Fetched.Store(int64(i))
	}
	b.Run("Snapshot", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s Snapshot
			p.countersInto(&s)
		}
	})
	b.Run("Collect", func(b *testing.B) {
		r := &Runner{pipelines: []*Pipeline{p}}
		reader := sdkmetric.NewManualReader()
		if err := r.registerCounters(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("bench")); err != nil {
			b.Fatal(err)
		}
		var rm metricdata.ResourceMetrics
		b.ReportAllocs()
		for b.Loop() {
			if err := reader.Collect(context.Background(), &rm); err != nil {
				b.Fatal(err)
			}
		}
	})
}
