package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// Records the module decides ok with no output (the filter example drops
// what lacks "keep") are counted as dropped, per partition, in the
// snapshot and in wasmstream.records.dropped, and nowhere else: they are
// done, not dead-lettered or failed. A version's label is its metrics
// label.
func TestDroppedRecordsCounted(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq")
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var recs []*kgo.Record
	for i := range 30 {
		v := fmt.Sprint("drop-", i)
		if i%3 == 0 {
			v = fmt.Sprint("keep-", i)
		}
		recs = append(recs, &kgo.Record{Topic: "in", Partition: int32(i % 2), Value: []byte(v)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "filter"), "in", "out", "dlq", "", "")
	r := newRunner(t, cfg)
	reader := metricsOf(t, r)
	r.SetLabel("p", r.View()[0].Module.Digest, "v1.0")
	r.Start()
	defer r.Stop(context.Background())
	kafkatest.Eventually(t, time.Minute, "every record done", func() bool { return r.Snapshots()[0].Done == 30 })
	s := r.Snapshots()[0]
	if s.Dropped != 20 || s.Outputs != 10 || s.DeadLetter != 0 {
		t.Fatalf("dropped %d, outputs %d, dead-lettered %d; want 20, 10, 0", s.Dropped, s.Outputs, s.DeadLetter)
	}
	m := collect(t, reader)
	for p := range int64(2) {
		got := sumInt(m["wasmstream.records.dropped"], func(s attribute.Set) bool { v, _ := s.Value("partition"); return v.AsInt64() == p })
		if got != 10 {
			t.Errorf("partition %d: wasmstream.records.dropped %d, want 10", p, got)
		}
	}
	labelled := sumInt(m["wasmstream.version.records"], func(s attribute.Set) bool { v, _ := s.Value("label"); return v.AsString() == "v1.0" })
	if labelled != 30 || r.View()[0].Label != "v1.0" {
		t.Errorf("wasmstream.version.records{label=v1.0} %d, want 30; view label %q", labelled, r.View()[0].Label)
	}
}
