//go:build !wasip1

package sr_test

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/avro"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/sr"
)

// A 7-field record: a union, an array and a timestamp among them.
const orderSchema = `{"type":"record","name":"Order","namespace":"shop","fields":[
	{"name":"id","type":"long"},
	{"name":"customer","type":"string"},
	{"name":"amount","type":"double"},
	{"name":"placed_at","type":{"type":"long","logicalType":"timestamp-millis"}},
	{"name":"items","type":{"type":"array","items":"string"}},
	{"name":"coupon","type":["null","string"],"default":null},
	{"name":"priority","type":"int"}]}`

type Order struct {
	ID       int64     `avro:"id"`
	Customer string    `avro:"customer"`
	Amount   float64   `avro:"amount"`
	PlacedAt time.Time `avro:"placed_at"`
	Items    []string  `avro:"items"`
	Coupon   *string   `avro:"coupon"`
	Priority int32     `avro:"priority"`
}

func sample() Order {
	c := "SPRING"
	return Order{ID: 42, Customer: "ada", Amount: 12.5, PlacedAt: time.UnixMilli(1700000000123).UTC(), Items: []string{"tea", "cake"}, Coupon: &c, Priority: 3}
}

// frame encodes v with schema (an independent encoder: the codec
// directly, the frame by hand) as a producer's serializer would.
func frame(t testing.TB, id int, schema string, v any) []byte {
	t.Helper()
	b := []byte{0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(id))
	b, err := avro.MustParse(schema).AppendEncode(b, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// unframe checks value's frame names id and decodes its payload.
func unframe(t testing.TB, value []byte, id int, schema string, v any) {
	t.Helper()
	if len(value) < 5 || value[0] != 0 || int(binary.BigEndian.Uint32(value[1:5])) != id {
		t.Fatalf("frame %x, want schema id %d", value[:min(len(value), 5)], id)
	}
	rest, err := avro.MustParse(schema).Decode(value[5:], v)
	if err != nil || len(rest) > 0 {
		t.Fatalf("decode: %v, %d bytes left", err, len(rest))
	}
}

// proc is the processor of the test at hand: a module has one.
var (
	proc func(r *guest.Record, out guest.Emitter) error
	runs int
)

func init() {
	sr.Process(func(r *guest.Record, out guest.Emitter) error {
		runs++
		return proc(r, out)
	})
}

func fresh(t *testing.T) {
	guest.ResetTestSchemas()
	sr.Reset()
	runs = 0
	t.Cleanup(func() { guest.ResetTestSchemas(); sr.Reset() })
}

// The processor decodes a framed Order into its struct, changes it and
// encodes it with another subject's latest schema. The first record runs
// it three times (a lookup by id, then by subject, between the runs) and
// emits once: the outputs of the runs that missed a schema are dropped;
// the next record runs it once, with what the guest holds.
func TestDecodeEncodeThroughLookups(t *testing.T) {
	fresh(t)
	inID, _ := guest.AddTestSchema("orders-value", guest.Schema{Type: guest.SchemaAvro, Schema: orderSchema})
	outID, _ := guest.AddTestSchema("orders-out-value", guest.Schema{Type: guest.SchemaAvro, Schema: orderSchema})
	proc = func(r *guest.Record, out guest.Emitter) error {
		var o Order
		if err := sr.Decode(r.Value, &o); err != nil {
			return err
		}
		if err := out.Emit(guest.Output{Topic: "audit", Value: []byte(o.Customer), Headers: []guest.Header{{Key: "h", Value: []byte("v")}, {Key: "null"}}}); err != nil {
			return err
		}
		o.Customer = strings.ToUpper(o.Customer)
		o.Items = append(o.Items, "receipt")
		v, err := sr.Encode("orders-out-value", &o)
		if err != nil {
			return err
		}
		return out.Emit(guest.Output{Key: r.Key, Value: v})
	}
	in := sample()
	for i, wantRuns := range []int{3, 1} {
		runs = 0
		res := guest.Run(abi.Record{Topic: "orders", Key: []byte("k"), Value: frame(t, inID, orderSchema, &in)})
		if res.Status != abi.StatusOK || len(res.Outputs) != 2 {
			t.Fatalf("record %d: %v %v, %d outputs", i, res.Status, res.Err, len(res.Outputs))
		}
		if runs != wantRuns {
			t.Fatalf("record %d ran the processor %d times, want %d", i, runs, wantRuns)
		}
		audit := res.Outputs[0]
		if audit.Topic != "audit" || string(audit.Value) != "ada" || len(audit.Headers) != 2 || string(audit.Headers[0].Value) != "v" || audit.Headers[1].Value != nil {
			t.Fatalf("record %d: held output %+v", i, audit)
		}
		var got Order
		unframe(t, res.Outputs[1].Value, outID, orderSchema, &got)
		want := sample()
		want.Customer, want.Items = "ADA", []string{"tea", "cake", "receipt"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("record %d: output %+v, want %+v", i, got, want)
		}
	}

	// A null union branch decodes to nil.
	in.Coupon = nil
	res := guest.Run(abi.Record{Topic: "orders", Value: frame(t, inID, orderSchema, &in)})
	var got Order
	if res.Status != abi.StatusOK {
		t.Fatalf("null coupon: %v %v", res.Status, res.Err)
	}
	unframe(t, res.Outputs[1].Value, outID, orderSchema, &got)
	if got.Coupon != nil {
		t.Fatalf("null coupon decoded as %q", *got.Coupon)
	}
}

// What cannot succeed fails the record terminally, saying why: a value
// without a frame, an id the registry does not have, a schema sr does not
// read, a value the schema does not decode, a struct that does not fit
// the output's schema.
func TestTerminalFailures(t *testing.T) {
	fresh(t)
	inID, _ := guest.AddTestSchema("orders-value", guest.Schema{Type: guest.SchemaAvro, Schema: orderSchema})
	protoID, _ := guest.AddTestSchema("p-value", guest.Schema{Type: guest.SchemaProtobuf, Schema: `syntax = "proto3"; message M {}`})
	refID, _ := guest.AddTestSchema("r-value", guest.Schema{Type: guest.SchemaAvro, Schema: `"shop.Order"`, References: []guest.SchemaReference{{Name: "shop.Order", Subject: "orders-value", Version: 1}}})
	guest.AddTestSchema("strings-value", guest.Schema{Type: guest.SchemaAvro, Schema: `"string"`})
	proc = func(r *guest.Record, out guest.Emitter) error {
		var o Order
		if err := sr.Decode(r.Value, &o); err != nil {
			return err
		}
		_, err := sr.Encode(string(r.Key), &o)
		return err
	}
	in := sample()
	good := frame(t, inID, orderSchema, &in)
	for _, tc := range []struct {
		name, subject string
		value         []byte
		want          string
	}{
		{"null", "", nil, "not framed (a Confluent frame is 0x00, a 4-byte big-endian schema id, then the payload): the value is null"},
		{"short", "", []byte{0, 0, 0}, "the value has 3 bytes"},
		{"magic", "", []byte(`{"id":42}`), "the value starts with 0x7b"},
		{"unknown id", "", []byte{0, 0, 0, 0x30, 0x39, 1}, "sr: look up schema 12345: schema registry: schema id 12345: not found"},
		{"protobuf", "", append([]byte{0, 0, 0, 0, byte(protoID)}, 0), "sr: schema 2 is PROTOBUF: sr reads Avro only"},
		{"references", "", append([]byte{0, 0, 0, 0, byte(refID)}, 0), `sr: schema 3 has 1 registry references (the first "shop.Order", subject "orders-value")`},
		{"cut", "", good[:len(good)-2], "sr: decode with schema 1"},
		{"trailing", "", append(good[:len(good):len(good)], 7), "sr: decode with schema 1: 1 bytes after the value"},
		{"no subject", "nobody-value", good, `sr: look up the latest schema of subject "nobody-value"`},
		{"misfit", "strings-value", good, "sr: encode with schema 4"},
	} {
		res := guest.Run(abi.Record{Topic: "t", Key: []byte(tc.subject), Value: tc.value})
		if res.Status != abi.StatusFail || res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) {
			t.Errorf("%s: %v %v, want a terminal failure saying %q", tc.name, res.Status, res.Err, tc.want)
		}
	}
}

// A processor that misses a new schema on every run stops at the bound,
// terminally.
func TestRunsBounded(t *testing.T) {
	fresh(t)
	for i := range 20 {
		guest.AddTestSchema("s-value", guest.Schema{Type: guest.SchemaAvro, Schema: `{"type":"fixed","name":"F` + string(rune('a'+i)) + `","size":1}`})
	}
	proc = func(r *guest.Record, out guest.Emitter) error {
		var b [1]byte
		return sr.Decode([]byte{0, 0, 0, 0, byte(runs), 1}, &b)
	}
	res := guest.Run(abi.Record{Topic: "t"})
	if res.Status != abi.StatusFail || !strings.Contains(res.Err.Error(), "sr: the processor ran 8 times on the record, each time missing a schema") || runs != 8 {
		t.Fatalf("%v %v after %d runs, want a terminal failure after 8", res.Status, res.Err, runs)
	}
}

// A processor that awaits an operation of its own encodes in the
// continuation, and answers a missing schema there with Resolve; what it
// emitted before it waited is the record's.
func TestResolveInContinuation(t *testing.T) {
	fresh(t)
	id, _ := guest.AddTestSchema("strings-value", guest.Schema{Type: guest.SchemaAvro, Schema: `"string"`})
	proc = func(r *guest.Record, out guest.Emitter) error {
		if err := out.Emit(guest.Output{Value: []byte("before")}); err != nil {
			return err
		}
		return guest.Await(guest.Timer(0), func(struct{}, error) error {
			var encode func() error
			encode = func() error {
				v, err := sr.Encode("strings-value", "after")
				if err != nil {
					return sr.Resolve(err, encode)
				}
				return out.Emit(guest.Output{Value: v})
			}
			return encode()
		})
	}
	res := guest.Run(abi.Record{Topic: "t"})
	if res.Status != abi.StatusOK || len(res.Outputs) != 2 || string(res.Outputs[0].Value) != "before" {
		t.Fatalf("%v %v %+v", res.Status, res.Err, res.Outputs)
	}
	var s string
	unframe(t, res.Outputs[1].Value, id, `"string"`, &s)
	if s != "after" || runs != 1 {
		t.Fatalf("encoded %q after %d runs", s, runs)
	}
}

// BenchmarkSerde is the guest-side serde path of one record, native: a
// 7-field Avro record decoded into its struct and encoded again, framed,
// with the schemas in hand (every record but an instance's first), beside
// the same processor's code doing nothing with the record.
func BenchmarkSerde(b *testing.B) {
	guest.ResetTestSchemas()
	sr.Reset()
	id, _ := guest.AddTestSchema("orders-value", guest.Schema{Type: guest.SchemaAvro, Schema: orderSchema})
	in := sample()
	value := frame(b, id, orderSchema, &in)
	proc = func(r *guest.Record, out guest.Emitter) error {
		var o Order
		if err := sr.Decode(r.Value, &o); err != nil {
			return err
		}
		_, err := sr.Encode("orders-value", &o)
		return err
	}
	if res := guest.Run(abi.Record{Topic: "t", Value: value}); res.Status != abi.StatusOK {
		b.Fatalf("%v %v", res.Status, res.Err)
	}
	var o Order
	var buf []byte
	b.Run("nothing", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf = append(buf[:0], value...)
		}
	})
	b.Run("decode+encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := sr.Decode(value, &o); err != nil {
				b.Fatal(err)
			}
			var err error
			if buf, err = sr.AppendEncode(buf[:0], "orders-value", &o); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Decode and Encode find the last schema by id and the last subject
// without the maps; Reset forgets those too: after it, the same id and
// subject are looked up again (a registry that starts over may give the
// same ids to other schemas).
func TestResetForgetsLastFound(t *testing.T) {
	fresh(t)
	proc = func(r *guest.Record, out guest.Emitter) error {
		var o Order
		if err := sr.Decode(r.Value, &o); err != nil {
			return err
		}
		v, err := sr.Encode("orders-out-value", &o)
		if err != nil {
			return err
		}
		return out.Emit(guest.Output{Value: v})
	}
	in := sample()
	inID, _ := guest.AddTestSchema("orders-value", guest.Schema{Type: guest.SchemaAvro, Schema: orderSchema})
	guest.AddTestSchema("orders-out-value", guest.Schema{Type: guest.SchemaAvro, Schema: orderSchema})
	if res := guest.Run(abi.Record{Value: frame(t, inID, orderSchema, &in)}); res.Status != abi.StatusOK || runs != 3 {
		t.Fatalf("first instance: %v %v, %d runs", res.Status, res.Err, runs)
	}

	guest.ResetTestSchemas()
	sr.Reset()
	runs = 0
	inID2, _ := guest.AddTestSchema("orders-value", guest.Schema{Type: guest.SchemaAvro, Schema: orderSchema})
	outID2, _ := guest.AddTestSchema("orders-out-value", guest.Schema{Type: guest.SchemaAvro, Schema: orderSchema})
	res := guest.Run(abi.Record{Value: frame(t, inID2, orderSchema, &in)})
	if res.Status != abi.StatusOK || runs != 3 || len(res.Outputs) != 1 {
		t.Fatalf("after Reset: %v %v, %d runs (want 3: both schemas looked up again)", res.Status, res.Err, runs)
	}
	var got Order
	unframe(t, res.Outputs[0].Value, outID2, orderSchema, &got)
}

// Decode into the same variable record after record keeps nothing of
// the earlier record: a field the next record's schema lacks is zero.
func TestDecodeKeepsNothingOfTheLastRecord(t *testing.T) {
	fresh(t)
	const v2 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"customer","type":"string"}]}`
	id1, _ := guest.AddTestSchema("orders-value", guest.Schema{Type: guest.SchemaAvro, Schema: orderSchema})
	id2, _ := guest.AddTestSchema("orders2-value", guest.Schema{Type: guest.SchemaAvro, Schema: v2})
	var o Order
	proc = func(r *guest.Record, _ guest.Emitter) error { return sr.Decode(r.Value, &o) }
	s := sample()
	if res := guest.Run(abi.Record{Topic: "t", Value: frame(t, id1, orderSchema, &s)}); res.Status != abi.StatusOK || !reflect.DeepEqual(o, s) {
		t.Fatalf("%v %v: decoded %+v, want %+v", res.Status, res.Err, o, s)
	}
	short := struct {
		ID       int64  `avro:"id"`
		Customer string `avro:"customer"`
	}{7, "bo"}
	if res := guest.Run(abi.Record{Topic: "t", Value: frame(t, id2, v2, &short)}); res.Status != abi.StatusOK || !reflect.DeepEqual(o, Order{ID: 7, Customer: "bo"}) {
		t.Fatalf("%v %v: decoded %+v after a record with every field, want only id and customer", res.Status, res.Err, o)
	}
}
