//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/internal/schemareg/wire"
)

// schemaPipe is one pipeline of the schema tests: the uppercase processor
// from inputs to out, dead letters to dlq, no retry, its input values
// decoded (input_format confluent) and, when output is set, its output
// values encoded with output_format.value = output (a YAML flow mapping).
type schemaPipe struct {
	name        string
	inputs      []string
	out, dlq    string
	outputValue string
}

// schemaPipelineYAML is the config the schema tests run: brokers and
// group, registry (the schema_registry section, its lines indented), and
// pipes.
func schemaPipelineYAML(brokers []string, group, registry string, pipes ...schemaPipe) string {
	var ps strings.Builder
	for _, p := range pipes {
		fmt.Fprintf(&ps, `  - name: %s
    module: %s
    inputs: [%s]
    output: %s
    dead_letter_topic: %s
    retry: {max_attempts: 1}
    input_format: {value: {format: confluent}}
`, p.name, modules["uppercase"], strings.Join(p.inputs, ", "), p.out, p.dlq)
		if p.outputValue != "" {
			fmt.Fprintf(&ps, "    output_format: {value: %s}\n", p.outputValue)
		}
		ps.WriteString("    limits: {record_timeout: 10s, memory_pages: 256}\n")
	}
	return fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  commit_interval: 200ms
  session_timeout: 10s
schema_registry:
%spipelines:
%sshutdown: {drain_timeout: 5s}
metrics: {listen: "127.0.0.1:0"}
admin: {enabled: false}
`, strings.Join(brokers, ","), group, registry, ps.String())
}

// userJSON is user i as the input schema (userAvro) takes it: the union's
// string branch, since the uppercase processor would make a null NULL,
// which is no JSON.
func userJSON(i int) string {
	return fmt.Sprintf(`{"name":"user-%d","id":%d,"email":"u%d@example.com"}`, i, i, i)
}

// produceUsers produces users from to from+k-1, framed by enc, keyed by
// their number, each to topic(i).
func produceUsers(t *testing.T, ctx context.Context, cl *kgo.Client, enc *schemareg.Encoder, from, k int, topic func(i int) string) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < from+k; i++ {
		v, err := enc.AppendFramed(nil, []byte(userJSON(i)))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: topic(i), Key: []byte(fmt.Sprint(i)), Value: v})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// upperOutput decodes rec, an output of the uppercase processor framed by
// the host, fails the test unless its NAME is its input's upper-cased, and
// returns its fields and schema id.
func upperOutput(t *testing.T, ctx context.Context, c *schemareg.Client, rec *kgo.Record) (map[string]any, int) {
	t.Helper()
	js, d, err := c.AppendJSON(ctx, nil, rec.Value, wire.Value, nil, 1<<20)
	if err != nil {
		t.Fatalf("output %s does not decode: %v", rec.Key, err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil || doc["NAME"] != "USER-"+string(rec.Key) {
		t.Fatalf("output %s: %s (%v)", rec.Key, js, err)
	}
	return doc, d.SchemaID
}
