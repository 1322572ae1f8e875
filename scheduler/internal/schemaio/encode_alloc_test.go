package schemaio

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/internal/schemareg/wire"
)

// TestEncodeAllocatesOnePerOutput: encoding a guest's JSON outputs to the
// output topic costs one allocation per output, the framed bytes' buffer
// (sized to the JSON: appended to nil, a 7-field record's frame grew four
// or five times), and the outputs decode back to what was encoded. (Under
// the race detector, whose instrumentation allocates, the count is not
// asserted.)
func TestEncodeAllocatesOnePerOutput(t *testing.T) {
	for _, tc := range []struct {
		name string
		typ  sr.SchemaType
		text string
		js   string
	}{
		// The timestamp's text included: the Avro encoder parses a view
		// of it, not a copy.
		{"avro", sr.TypeAvro, `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},{"name":"customer","type":"string"},{"name":"amount","type":"double"},
 {"name":"placed_at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"items","type":{"type":"array","items":"string"}},
 {"name":"coupon","type":["null","string"],"default":null},{"name":"priority","type":"int"}]}`,
			`{"id":123456,"customer":"CUSTOMER-123456","amount":456.25,"placed_at":"2026-01-01T00:00:03.039Z","items":["book","pen"],"coupon":"SPRING-3","priority":1}`},
		{"protobuf", sr.TypeProtobuf, `syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1; string customer = 2; double amount = 3; google.protobuf.Timestamp placed_at = 4;
  repeated string items = 5; optional string coupon = 6; int32 priority = 7;
}`, `{"id":"123456","customer":"CUSTOMER-123456","amount":456.25,"placed_at":"2026-01-01T00:00:03.039Z","items":["book","pen"],"coupon":"SPRING-3","priority":1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := srfake.New()
			defer reg.Close()
			if _, _, err := reg.RegisterSchema("out-value", sr.Schema{Schema: tc.text, Type: tc.typ}); err != nil {
				t.Fatal(err)
			}
			c, err := schemareg.New(schemareg.Config{URL: reg.URL()})
			if err != nil {
				t.Fatal(err)
			}
			cfg := load(t, t.TempDir(), reg.URL(), "{format: confluent}")
			p, err := New(context.Background(), c, cfg, &cfg.Pipelines[0])
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			js := []byte(tc.js)
			outs := make([]abi.Output, 2)
			allocs := testing.AllocsPerRun(200, func() {
				outs[0].Value, outs[1].Value = js, js
				if err := p.Encode(outs); err != nil {
					t.Fatal(err)
				}
			})
			if !raceEnabled && allocs != float64(len(outs)) {
				t.Errorf("Encode of %d outputs: %v allocations, want one per output", len(outs), allocs)
			}
			for _, o := range outs {
				back, _, err := c.AppendJSON(context.Background(), nil, o.Value, wire.Value, nil, 1<<20)
				if err != nil || !sameJSON(t, back, js) {
					t.Fatalf("%x decodes to %s (%v), want %s", o.Value, back, err, js)
				}
			}
		})
	}
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}
