package scheduler

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/wasmstream/wasmstream/scheduler/admin"
	"github.com/wasmstream/wasmstream/scheduler/internal/sizing"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// metricsOf registers r's metrics on a manual reader of their own and
// returns it, for collect.
func metricsOf(t testing.TB, r *Runner) *sdkmetric.ManualReader {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	if err := r.RegisterMetrics(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test")); err != nil {
		t.Fatal(err)
	}
	return reader
}

// servedMetricsOf registers r's metrics on an exporter of their own as
// the host serves them (admin.NewMeter) and returns its /metrics handler;
// the exporter is shut down when the test ends.
func servedMetricsOf(t testing.TB, r *Runner) http.Handler {
	t.Helper()
	meter, handler, mp, err := admin.NewMeter()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	if err := r.RegisterMetrics(meter); err != nil {
		t.Fatal(err)
	}
	return handler
}

// collect reads every metric as name -> data points.
func collect(t *testing.T, rd *sdkmetric.ManualReader) map[string]metricdata.Aggregation {
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

func sumInt(a metricdata.Aggregation, match func(attribute.Set) bool) (total int64) {
	switch d := a.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				total += p.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				total += p.Value
			}
		}
	}
	return
}

func all(attribute.Set) bool { return true }

// Under a known load, the metrics count records exactly, per partition, and
// the instance states add up to the instances running; labels stay bounded.
func TestMetricsUnderKnownLoad(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 3, "in", "out", "dlq")
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	perPartition := []int{500, 300, 100}
	var recs []*kgo.Record
	for p, n := range perPartition {
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: "in", Partition: int32(p), Value: []byte(fmt.Sprint("v", i))})
		}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq", "    ordering: none\n    instances: {min: 1, max: 3}", "")
	r := newRunner(t, cfg)
	reader := metricsOf(t, r)
	r.Start()
	defer r.Stop(context.Background())
	kafkatest.Eventually(t, time.Minute, "every record done", func() bool { return r.Snapshots()[0].Done == 900 })
	m := collect(t, reader)
	for _, name := range []string{"wasmstream.records.fetched", "wasmstream.records.done", "wasmstream.records.outputs", "wasmstream.task.in_flight",
		"wasmstream.task.lag", "wasmstream.task.committed_offset", "wasmstream.instances", "wasmstream.instance.records", "wasmstream.instance.memory.pages",
		"wasmstream.host.instances", "wasmstream.host.instances.limit", "wasmstream.host.async.in_flight", "wasmstream.record.processing.duration",
		"wasmstream.module.compile.duration", "wasmstream.module.instantiate.duration"} {
		if m[name] == nil {
			t.Errorf("metric %s missing", name)
		}
	}
	for p, n := range perPartition {
		part := func(s attribute.Set) bool {
			v, _ := s.Value("partition")
			return v.AsInt64() == int64(p)
		}
		if got := sumInt(m["wasmstream.records.done"], part); got != int64(n) {
			t.Errorf("partition %d: records.done %d, want %d", p, got, n)
		}
		if got := sumInt(m["wasmstream.records.outputs"], part); got != int64(n) {
			t.Errorf("partition %d: records.outputs %d, want %d", p, got, n)
		}
	}
	if got := sumInt(m["wasmstream.records.fetched"], all); got != 900 {
		t.Errorf("records.fetched %d, want 900", got)
	}
	// Every record read once (no backpressure here, nothing read again).
	if got := sumInt(m["wasmstream.fetch.records_read"], all); got != 900 {
		t.Errorf("fetch.records_read %d, want 900", got)
	}
	if m["wasmstream.fetch.pauses"] == nil {
		t.Error("metric wasmstream.fetch.pauses missing")
	}
	// Histogram: one latency per record.
	if h, ok := m["wasmstream.record.processing.duration"].(metricdata.Histogram[float64]); ok {
		var c uint64
		for _, p := range h.DataPoints {
			c += p.Count
		}
		if c != 900 {
			t.Errorf("latency histogram counted %d records, want 900", c)
		}
	} else {
		t.Error("processing duration is not a histogram")
	}
	// Instance states add up to the instances running.
	snap := r.Snapshots()[0]
	if got := sumInt(m["wasmstream.instances"], all); got != int64(snap.Instances) {
		t.Errorf("instances by state add up to %d, the pipeline runs %d", got, snap.Instances)
	}
	// Every output acknowledged: the host holds no output bytes any more.
	if got, lim := sumInt(m["wasmstream.host.held_output_bytes"], all), sumInt(m["wasmstream.host.held_output_bytes.limit"], all); got != 0 || lim <= 0 {
		t.Errorf("host.held_output_bytes %d (limit %d) after every output was acknowledged, want 0 (limit > 0)", got, lim)
	}
	if used, _ := r.Budget().Instances(); sumInt(m["wasmstream.host.instances"], all) != int64(used) {
		t.Errorf("host.instances %d, budget %d", sumInt(m["wasmstream.host.instances"], all), used)
	}
	// Bounded labels: no key, offset or instance id.
	// digest: at most the current version and a canary's, 12 digits, and
	// the retired ones kept (versions.go); label: a version's (verlabel).
	// reason: fetching, producing or processing; broker and address: a node
	// id and its address; kind:
	// a broker error's kind (scheduler/health.go).
	allowed := map[attribute.Key]bool{"pipeline": true, "topic": true, "partition": true, "state": true, "slot": true,
		"from_compile_cache": true, "digest": true, "label": true, "canary": true, "reason": true, "broker": true, "address": true, "kind": true}
	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			check := func(s attribute.Set) {
				for _, kv := range s.ToSlice() {
					if !allowed[kv.Key] {
						t.Errorf("%s has label %s", mt.Name, kv.Key)
					}
				}
			}
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					check(p.Attributes)
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					check(p.Attributes)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					check(p.Attributes)
				}
			}
		}
	}
}

// A controller's reason is a state set beside its value: when the reason
// changes, the value's series and the set of reason series stay the same
// (only which one is 1 moves), so a dashboard's series keep their identity.
func TestReasonIsAStateSet(t *testing.T) {
	rd := sdkmetric.NewManualReader()
	meter := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd)).Meter("test")
	value, err := meter.Int64ObservableGauge("target")
	if err != nil {
		t.Fatal(err)
	}
	reason, err := meter.Int64ObservableGauge("reason")
	if err != nil {
		t.Fatal(err)
	}
	current := sizing.ReasonStart
	pipe := attribute.String("pipeline", "p")
	if _, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(value, 3, metric.WithAttributes(pipe))
		observeStateSet(o, reason, sizing.PoolReasons, current, pipe)
		return nil
	}, value, reason); err != nil {
		t.Fatal(err)
	}
	series := func() (ids []string, ones []string) {
		for name, a := range collect(t, rd) {
			for _, p := range a.(metricdata.Gauge[int64]).DataPoints {
				id := name + "{" + p.Attributes.Encoded(attribute.DefaultEncoder()) + "}"
				ids = append(ids, id)
				if name == "reason" && p.Value == 1 {
					ones = append(ones, id)
				}
			}
		}
		slices.Sort(ids)
		return ids, ones
	}
	before, ones := series()
	if len(before) != 1+len(sizing.PoolReasons) || len(ones) != 1 || !strings.Contains(ones[0], "reason="+sizing.ReasonStart) {
		t.Fatalf("series %v, at 1 %v", before, ones)
	}
	current = sizing.ReasonCores
	after, ones := series()
	if !slices.Equal(before, after) {
		t.Fatalf("the series changed with the reason: %v, then %v", before, after)
	}
	if len(ones) != 1 || !strings.Contains(ones[0], "reason="+sizing.ReasonCores) {
		t.Fatalf("at 1 after the change: %v", ones)
	}
}

// An instances: auto pipeline exports its target without a reason attribute
// and, per task, the reason state set: every reason a series, exactly one
// of them 1.
func TestAutoPoolMetricsCarryTheReasonApart(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq")
	kafkatest.Produce(t, brokers, "in", 200, func(i int) string { return fmt.Sprint("k", i) })
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq", "    ordering: none\n    instances: auto", "")
	r := newRunner(t, cfg)
	reader := metricsOf(t, r)
	r.Start()
	defer r.Stop(context.Background())
	kafkatest.Eventually(t, time.Minute, "every record done", func() bool { return r.Snapshots()[0].Done == 200 })
	m := collect(t, reader)
	target, ok := m["wasmstream.pool.target_instances"].(metricdata.Gauge[int64])
	if !ok || len(target.DataPoints) != 2 {
		t.Fatalf("target_instances: %+v, want one point per task", m["wasmstream.pool.target_instances"])
	}
	for _, p := range target.DataPoints {
		if _, has := p.Attributes.Value("reason"); has {
			t.Fatalf("target_instances carries a reason attribute: %v", p.Attributes.ToSlice())
		}
	}
	reason, ok := m["wasmstream.pool.target_reason"].(metricdata.Gauge[int64])
	if !ok || len(reason.DataPoints) != 2*len(sizing.PoolReasons) {
		t.Fatalf("target_reason: %+v, want %d series per task", m["wasmstream.pool.target_reason"], len(sizing.PoolReasons))
	}
	for part := int64(0); part < 2; part++ {
		ones := sumInt(reason, func(s attribute.Set) bool { v, _ := s.Value("partition"); return v.AsInt64() == part })
		if ones != 1 {
			t.Errorf("partition %d: %d reasons at 1, want exactly one", part, ones)
		}
	}
}
