//go:build integration

// Package schemareg_test runs internal/schemareg against a real registry:
// Apicurio Registry (tests/schemareg/apicurio.sh start) through its
// Confluent-compatible API. SCHEMA_REGISTRY_URL names it; the test fails
// when it is unset rather than pass without a registry.
package schemareg_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/internal/schemareg/wire"
)

func registry(t *testing.T) (string, *sr.Client, string) {
	t.Helper()
	url := os.Getenv("SCHEMA_REGISTRY_URL")
	if url == "" {
		t.Fatal("SCHEMA_REGISTRY_URL is not set: start a registry with tests/schemareg/apicurio.sh start")
	}
	admin, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	// Subjects unique to this run: the registry may have served others.
	return url, admin, strconv.FormatInt(time.Now().UnixNano(), 36)
}

func create(t *testing.T, admin *sr.Client, subject string, s sr.Schema) sr.SubjectSchema {
	t.Helper()
	ss, err := admin.CreateSchema(context.Background(), subject, s)
	if err != nil {
		t.Fatalf("register %s: %v", subject, err)
	}
	return ss
}

const orderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"customer","type":["null","string"],"default":null},
 {"name":"items","type":{"type":"array","items":"string"}},
 {"name":"placed_at","type":{"type":"long","logicalType":"timestamp-millis"}}]}`

const orderV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"customer","type":["null","string"],"default":null},
 {"name":"items","type":{"type":"array","items":"string"}},
 {"name":"placed_at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"channel","type":"string","default":"web"}]}`

const orderBreaking = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"sku","type":"string"}]}`

func TestApicurioAvro(t *testing.T) {
	url, admin, run := registry(t)
	ctx := context.Background()
	subject := "orders-" + run + "-value"
	v1 := create(t, admin, subject, sr.Schema{Schema: orderV1, Type: sr.TypeAvro})
	for _, r := range admin.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatBackward}, subject) {
		if r.Err != nil {
			t.Fatalf("set BACKWARD: %v", r.Err)
		}
	}
	// The same schema under another subject has the same id.
	again := create(t, admin, "copy-"+run+"-value", sr.Schema{Schema: orderV1, Type: sr.TypeAvro})
	if again.ID != v1.ID {
		t.Errorf("same schema, two subjects: ids %d and %d, want one", v1.ID, again.ID)
	}

	c, err := schemareg.New(schemareg.Config{URL: url, RefreshPeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := c.NewEncoder(ctx, schemareg.EncoderConfig{Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	in := `{"id":42,"customer":"ada","items":["book","pen"],"placed_at":"2024-01-15T10:04:05.123Z"}`
	framed, err := enc.AppendFramed(nil, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	js, d, err := c.AppendJSON(ctx, nil, framed, wire.Value, nil, 1<<16)
	if err != nil || string(js) != in || d.SchemaID != v1.ID {
		t.Fatalf("round trip: %s %+v %v", js, d, err)
	}
	// Decoding a record framed with the copy's id: the same schema, no
	// new request (cached by id).
	reqs := c.Stats.Requests.Load()
	if _, _, err := c.AppendJSON(ctx, nil, framed, wire.Value, nil, 1<<16); err != nil || c.Stats.Requests.Load() != reqs {
		t.Errorf("a cached id cost a request (%v)", err)
	}

	// An incompatible version is refused by the registry.
	_, err = admin.CreateSchema(ctx, subject, sr.Schema{Schema: orderBreaking, Type: sr.TypeAvro})
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 409 {
		t.Fatalf("incompatible schema: %v, want HTTP 409", err)
	}
	// A compatible v2 is picked up by the running encoder.
	v2 := create(t, admin, subject, sr.Schema{Schema: orderV2, Type: sr.TypeAvro})
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := enc.AppendFramed(nil, []byte(`{"id":1,"items":[],"placed_at":0,"channel":"app"}`))
		if err == nil {
			if id, _, _ := wire.ParseHeader(b, wire.Value, nil); id != v2.ID {
				t.Fatalf("framed with id %d, want v2's %d", id, v2.ID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("v2 not picked up within 10s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// An unknown id: terminal, with the id in the error.
	_, _, err = c.AppendJSON(ctx, nil, wire.AppendHeader(nil, 987654321), wire.Value, nil, 1<<16)
	var e *schemareg.Error
	if !errors.As(err, &e) || e.Kind != schemareg.NotFound || e.Retryable() || e.SchemaID != 987654321 || !strings.Contains(err.Error(), "987654321") {
		t.Fatalf("unknown id: %v", err)
	}
}

const ordersProto = `syntax = "proto3";
package shop;
message Ping { string s = 1; int32 n = 2; }
message Order {
  int64 id = 1;
  repeated Line lines = 2;
  message Line { string sku = 1; uint32 qty = 2; }
}
`

func TestApicurioProtobuf(t *testing.T) {
	url, admin, run := registry(t)
	ctx := context.Background()
	subject := "pb-" + run + "-value"
	ss := create(t, admin, subject, sr.Schema{Schema: ordersProto, Type: sr.TypeProtobuf})
	c, err := schemareg.New(schemareg.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		message, in string
		index       []int
	}{
		{"", `{"s":"hello","n":5}`, []int{0}},
		{"Order", `{"id":"7","lines":[{"sku":"a","qty":2}]}`, []int{1}},
		{"shop.Order.Line", `{"sku":"b","qty":3}`, []int{1, 0}},
	} {
		enc, err := c.NewEncoder(ctx, schemareg.EncoderConfig{Subject: subject, Message: tc.message})
		if err != nil {
			t.Fatal(err)
		}
		framed, err := enc.AppendFramed(nil, []byte(tc.in))
		enc.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.message, err)
		}
		js, d, err := c.AppendJSON(ctx, nil, framed, wire.Value, nil, 1<<16)
		if err != nil || string(js) != tc.in || d.SchemaID != ss.ID || !slices.Equal(d.Index, tc.index) {
			t.Errorf("%s: %s %+v %v, want %s at %v", tc.message, js, d, err, tc.in, tc.index)
		}
	}
	// The anchors' bytes: Ping, index [1] in a file whose first message is
	// another one, is 02 02 then the payload; here Ping is first: [0] is
	// the single byte 0.
	enc, _ := c.NewEncoder(ctx, schemareg.EncoderConfig{Subject: subject})
	b, _ := enc.AppendFramed(nil, []byte(`{"s":"hello","n":5}`))
	enc.Close()
	if want := "000a0568656c6c6f1005"; !bytes.Equal(b[5:], mustHex(want)) {
		t.Errorf("frame after the id: %x, want %s", b[5:], want)
	}
}

func mustHex(s string) []byte {
	out := make([]byte, len(s)/2)
	for i := range out {
		v, _ := strconv.ParseUint(s[2*i:2*i+2], 16, 8)
		out[i] = byte(v)
	}
	return out
}

func TestApicurioJSONSchema(t *testing.T) {
	url, admin, run := registry(t)
	ctx := context.Background()
	subject := "js-" + run + "-value"
	create(t, admin, subject, sr.Schema{Schema: `{"type":"object","properties":{"id":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["id"]}`, Type: sr.TypeJSON})
	c, err := schemareg.New(schemareg.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := c.NewEncoder(ctx, schemareg.EncoderConfig{Subject: subject})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	in := `{"id":1,"tags":["a"]}`
	framed, err := enc.AppendFramed(nil, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if js, _, err := c.AppendJSON(ctx, nil, framed, wire.Value, nil, 1<<16); err != nil || string(js) != in {
		t.Fatalf("round trip: %s %v", js, err)
	}
	_, err = enc.AppendFramed(nil, []byte(`{"id":1,"tags":[2]}`))
	var e *schemareg.Error
	if !errors.As(err, &e) || e.Kind != schemareg.Encode || !strings.Contains(err.Error(), "/tags/0") {
		t.Fatalf("invalid output: %v", err)
	}
}
