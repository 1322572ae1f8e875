//go:build integration

package integration

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// upperAvro3 is not backward compatible with upperAvro2: a field without
// a default, which records written with v2 do not have.
const upperAvro3 = `{"type":"record","name":"Upper","namespace":"it","fields":[{"name":"NAME","type":"string"},{"name":"ID","type":"long"},{"name":"EMAIL","type":["null","string"],"default":null},{"name":"SOURCE","type":"string","default":"wasmstream"},{"name":"REGION","type":"string"}]}`

// TestSchemaEvolutionRealRegistry: on the real broker and Apicurio, with
// the output subject's compatibility BACKWARD: a compatible v2 registered
// while the host runs is taken after refresh_period without a restart (the
// outputs after it carry v2's id, and the host's log says so); an
// incompatible v3 is refused by the registry (HTTP 409, its reason in the
// error) and the host keeps writing v2; and one schema registered under
// two subjects (the inputs' two topics) has one id, decoded with one
// cached schema: the registry is asked for it once.
func TestSchemaEvolutionRealRegistry(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	url := registryURL(t)
	n := names(t)
	inA, inB, out, dlq := n+"-in-a", n+"-in-b", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 2, inA, inB, out, dlq)
	admin, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := ctxTimeout(3 * time.Minute)
	defer cancel()
	a, err := admin.CreateSchema(ctx, inA+"-value", sr.Schema{Schema: userAvro, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	b, err := admin.CreateSchema(ctx, inB+"-value", sr.Schema{Schema: userAvro, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != b.ID {
		t.Fatalf("one schema under two subjects: ids %d and %d, want one", a.ID, b.ID)
	}
	v1, err := admin.CreateSchema(ctx, out+"-value", sr.Schema{Schema: upperAvro1, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range admin.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatBackward}, out+"-value") {
		if r.Err != nil {
			t.Fatalf("compatibility BACKWARD on %s: %v", out+"-value", r.Err)
		}
	}

	c, err := schemareg.New(schemareg.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	encA, err := c.NewEncoder(ctx, schemareg.EncoderConfig{Subject: inA + "-value"})
	if err != nil {
		t.Fatal(err)
	}
	defer encA.Close()
	cl := kafkatest.Client(t, brokers)
	next := 0
	// produce writes k records, alternately to the two input topics, all
	// framed with the one id.
	produce := func(k int) {
		produceUsers(t, ctx, cl, encA, next, k, func(i int) string {
			if i%2 == 1 {
				return inB
			}
			return inA
		})
		next += k
	}
	produce(200)

	r, logs := startSchemaHost(t, schemaPipelineYAML(brokers, n, fmt.Sprintf("  url: %s\n  refresh_period: 1s\n", url),
		schemaPipe{name: "p", inputs: []string{inA, inB}, out: out, dlq: dlq, outputValue: "{format: confluent, version: latest}"}))

	rd := kafkatest.NewReader(t, brokers, out)
	idOf := func(rec *kgo.Record) int {
		_, id := upperOutput(t, ctx, c, rec)
		return id
	}
	rd.ReadUntil(t, 2*time.Minute, "the first outputs", func(rs []*kgo.Record) bool { return len(rs) >= 200 })
	for _, rec := range rd.Recs {
		if id := idOf(rec); id != v1.ID {
			t.Fatalf("output %s framed with schema id %d, want v1's %d", rec.Key, id, v1.ID)
		}
	}
	// Both topics' records were decoded with the one cached schema: the
	// host asked the registry its one question at start (schemareg's
	// Check), for the input id once and for the output subject once;
	// every other request is a refresh of the subject's
	// latest version (Refreshes is counted before its request is sent, so
	// read first it leaves a refresh in flight counted in excess only).
	st := r.SchemaStats()
	others := func() uint64 {
		refreshes := st.Refreshes.Load()
		return st.Requests.Load() - refreshes
	}
	kafkatest.Eventually(t, 10*time.Second, "three registry requests besides the refreshes (the start's check, the input id, the output subject)", func() bool { return others() == 3 })

	v2, err := admin.CreateSchema(ctx, out+"-value", sr.Schema{Schema: upperAvro2, Type: sr.TypeAvro})
	if err != nil {
		t.Fatalf("registering the compatible v2: %v", err)
	}
	deadline := time.Now().Add(time.Minute)
	for seen := len(rd.Recs); ; seen = len(rd.Recs) {
		if time.Now().After(deadline) {
			t.Fatalf("no output framed with v2 (id %d) a minute after it was registered (refresh_period 1s)", v2.ID)
		}
		produce(10)
		rd.ReadFor(300 * time.Millisecond)
		if len(rd.Recs) > seen && idOf(rd.Recs[len(rd.Recs)-1]) == v2.ID {
			break
		}
	}
	newVersion := fmt.Sprintf("version=%d schema_id=%d previous_version=%d previous_schema_id=%d", v2.Version, v2.ID, v1.Version, v1.ID)
	if !strings.Contains(logs.String(), newVersion) {
		t.Fatalf("the host's log does not say it writes v2 (%s)", newVersion)
	}

	// v3 is refused by the registry, with its reason.
	_, err = admin.CreateSchema(ctx, out+"-value", sr.Schema{Schema: upperAvro3, Type: sr.TypeAvro})
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 409 || !strings.Contains(strings.ToLower(re.Message), "incompatible") {
		t.Fatalf("registering the incompatible v3: %v, want HTTP 409 naming the incompatibility", err)
	}
	t.Logf("v3 refused: %v", err)
	// The host keeps writing v2: across two more refreshes of the latest
	// version (refresh_period 1s; a refresh is due when an output is
	// encoded), every new output is framed with v2's id.
	from, refreshed := len(rd.Recs), st.Refreshes.Load()
	for deadline := time.Now().Add(time.Minute); st.Refreshes.Load() < refreshed+2; {
		if time.Now().After(deadline) {
			t.Fatalf("%d refreshes in a minute after v3 was refused, want 2 (refresh_period 1s)", st.Refreshes.Load()-refreshed)
		}
		produce(10)
		rd.ReadFor(300 * time.Millisecond)
	}
	rd.ReadUntil(t, time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= next })
	for _, rec := range rd.Recs[from:] {
		if id := idOf(rec); id != v2.ID {
			t.Fatalf("output %s after v3 was refused framed with schema id %d, want v2's %d", rec.Key, id, v2.ID)
		}
	}
	if strings.Count(logs.String(), "new latest version") != 1 {
		t.Fatalf("the host logged more than v2 as a new version:\n%s", logs.String())
	}
	kafkatest.Eventually(t, time.Minute, "committed to the end", func() bool {
		return committedSum(t, brokers, n+".p", inA)+committedSum(t, brokers, n+".p", inB) == int64(next)
	})
	if s := r.Snapshots()[0]; s.DeadLetter != 0 {
		t.Fatalf("%d dead letters", s.DeadLetter)
	}
	// v2 came with its refresh's answer: still no other request.
	kafkatest.Eventually(t, 10*time.Second, "still three registry requests besides the refreshes", func() bool { return others() == 3 })
	t.Logf("%d records from two subjects of one schema id %d; v1 %d, v2 %d; registry requests %d, cache hits %d misses %d, refreshes %d",
		next, a.ID, v1.ID, v2.ID, st.Requests.Load(), st.CacheHits.Load(), st.CacheMisses.Load(), st.Refreshes.Load())
}
