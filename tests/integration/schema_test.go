//go:build integration

package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

const (
	userAvro   = `{"type":"record","name":"User","namespace":"it","fields":[{"name":"name","type":"string"},{"name":"id","type":"long"},{"name":"email","type":["null","string"],"default":null}]}`
	upperAvro1 = `{"type":"record","name":"Upper","namespace":"it","fields":[{"name":"NAME","type":"string"},{"name":"ID","type":"long"},{"name":"EMAIL","type":["null","string"],"default":null}]}`
	// upperAvro2 is a compatible (backward) evolution: a field with a default.
	upperAvro2 = `{"type":"record","name":"Upper","namespace":"it","fields":[{"name":"NAME","type":"string"},{"name":"ID","type":"long"},{"name":"EMAIL","type":["null","string"],"default":null},{"name":"SOURCE","type":"string","default":"wasmstream"}]}`
)

// TestSchemaRegistryAvroRealRegistry: on the real broker and the real
// registry (Apicurio, its Confluent-compatible API): Avro records framed
// as Confluent's serializer frames them are decoded for the uppercase
// processor and its outputs encoded with the output subject's latest
// version; a compatible v2 of the output schema registered while the host
// runs is taken after schema_registry.refresh_period, without a restart
// (outputs framed with v2's id from then on); every output decodes, none
// is dead-lettered, and offsets are committed to the end.
func TestSchemaRegistryAvroRealRegistry(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	url := registryURL(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 2, in, out, dlq)
	admin, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := ctxTimeout(3 * time.Minute)
	defer cancel()
	if _, err := admin.CreateSchema(ctx, in+"-value", sr.Schema{Schema: userAvro, Type: sr.TypeAvro}); err != nil {
		t.Fatal(err)
	}
	v1, err := admin.CreateSchema(ctx, out+"-value", sr.Schema{Schema: upperAvro1, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	c, err := schemareg.New(schemareg.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := c.NewEncoder(ctx, schemareg.EncoderConfig{Subject: in + "-value"})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	cl := kafkatest.Client(t, brokers)
	next := 0
	produce := func(k int) {
		produceUsers(t, ctx, cl, enc, next, k, func(int) string { return in })
		next += k
	}
	produce(500)

	r, _ := startSchemaHost(t, schemaPipelineYAML(brokers, n, fmt.Sprintf("  url: %s\n  refresh_period: 1s\n", url),
		schemaPipe{name: "p", inputs: []string{in}, out: out, dlq: dlq, outputValue: "{format: confluent, version: latest}"}))

	rd := kafkatest.NewReader(t, brokers, out)
	check := func(rec *kgo.Record) int {
		doc, id := upperOutput(t, ctx, c, rec)
		if fmt.Sprint(doc["ID"]) != string(rec.Key) {
			t.Fatalf("output %s: %v", rec.Key, doc)
		}
		return id
	}
	rd.ReadUntil(t, 2*time.Minute, "the first outputs", func(rs []*kgo.Record) bool { return len(rs) >= 500 })
	for _, rec := range rd.Recs {
		if id := check(rec); id != v1.ID {
			t.Fatalf("output %s framed with schema id %d, want v1's %d", rec.Key, id, v1.ID)
		}
	}

	v2, err := admin.CreateSchema(ctx, out+"-value", sr.Schema{Schema: upperAvro2, Type: sr.TypeAvro})
	if err != nil {
		t.Fatalf("registering the compatible v2: %v", err)
	}
	if v2.ID == v1.ID || v2.Version != v1.Version+1 {
		t.Fatalf("v2 %+v after v1 %+v", v2, v1)
	}
	// Records keep coming; within a few refresh periods the outputs are
	// framed with v2.
	deadline := time.Now().Add(time.Minute)
	sawV2 := -1
	for sawV2 < 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no output framed with v2 (id %d) a minute after it was registered (refresh_period 1s)", v2.ID)
		}
		produce(20)
		rd.ReadFor(300 * time.Millisecond)
		for i, rec := range rd.Recs {
			if check(rec) == v2.ID && sawV2 < 0 {
				sawV2 = i
			}
		}
	}
	produce(200)
	rd.ReadUntil(t, time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= next })
	seen := map[string]bool{}
	for _, rec := range rd.Recs {
		id := check(rec)
		seen[string(rec.Key)] = true
		switch id {
		case v1.ID, v2.ID:
		default:
			t.Fatalf("output %s framed with schema id %d: neither v1's %d nor v2's %d", rec.Key, id, v1.ID, v2.ID)
		}
	}
	if len(seen) != next {
		t.Fatalf("%d distinct outputs of %d records", len(seen), next)
	}
	last := rd.Recs[len(rd.Recs)-1]
	if check(last) != v2.ID {
		t.Fatalf("the last output (%s) is still framed with v1", last.Key)
	}
	kafkatest.Eventually(t, time.Minute, "committed to the end", func() bool {
		return committedSum(t, brokers, n+".p", in) == int64(next)
	})
	if s := r.Snapshots()[0]; s.DeadLetter != 0 {
		t.Fatalf("%d dead letters", s.DeadLetter)
	}
	st := r.SchemaStats()
	t.Logf("%d records; v2 first at output %d; registry requests %d (errors %d), cache hits %d misses %d, refreshes %d",
		next, sawV2, st.Requests.Load(), st.RequestErrors.Load(), st.CacheHits.Load(), st.CacheMisses.Load(), st.Refreshes.Load())
	if st.Requests.Load() > 200 {
		t.Fatalf("%d registry requests for %d records: schemas are fetched per record", st.Requests.Load(), next)
	}
}
