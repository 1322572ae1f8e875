package protocodec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const orderProto = `syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "common/money.proto";

message Order {
  int64 id = 1;
  optional string customer = 2;
  repeated string items = 3;
  google.protobuf.Timestamp placed_at = 4;
  common.Money amount = 5;
  Status status = 6;
  map<string, int32> tags = 7;
  message Line { string sku = 1; uint64 qty = 2; }
}
enum Status { NEW = 0; PAID = 1; SHIPPED = 2; }
message Ping { string s = 1; int32 n = 2; }
`

const moneyProto = `syntax = "proto3";
package common;
message Money { string currency = 1; int64 units = 2; }
`

const orderJSON = `{"id":"42","customer":"ada","items":["book","pen"],"placed_at":"2024-01-15T10:04:05.123Z","amount":{"currency":"EUR","units":"12"},"status":"PAID","tags":{"a":1,"b":2}}`

func compile(t testing.TB, opts Options) *Codec {
	t.Helper()
	c, err := Compile(orderProto, map[string]string{"common/money.proto": moneyProto}, opts, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func same(t *testing.T, got []byte, want string) {
	t.Helper()
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	c := compile(t, Options{})
	bin, err := c.AppendBinary(nil, []byte(orderJSON), []int{0})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.AppendJSON(nil, bin, []int{0}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	same(t, out, orderJSON)
	// JSON names on output; both names on input.
	cj := compile(t, Options{JSONNames: true})
	out, err = cj.AppendJSON(nil, bin, []int{0}, 1<<20)
	if err != nil || !strings.Contains(string(out), `"placedAt":"2024-01-15T10:04:05.123Z"`) {
		t.Fatalf("JSON names: %s %v", out, err)
	}
	again, err := c.AppendBinary(nil, out, []int{0})
	if err != nil || !bytes.Equal(again, bin) {
		t.Fatalf("JSON names read back: %x %v, want %x", again, err, bin)
	}
	// 64-bit integers are taken as numbers too.
	if _, err := c.AppendBinary(nil, []byte(`{"id":42}`), []int{0}); err != nil {
		t.Fatal(err)
	}
}

// The bytes of the anchors' check against a real registry: message index
// [1] (Ping) of a file whose first message is another, s "hello", n 5.
func TestMessageIndexes(t *testing.T) {
	c := compile(t, Options{})
	out, err := c.AppendJSON(nil, []byte{0x0a, 0x05, 'h', 'e', 'l', 'l', 'o', 0x10, 0x05}, []int{1}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	same(t, out, `{"s":"hello","n":5}`)
	// Nested messages are counted as protoc orders them: the map field's
	// entry message (TagsEntry, declared by the field) before Line.
	for name, want := range map[string][]int{"": {0}, "Order": {0}, "shop.Ping": {1}, "Order.Line": {0, 1}, "shop.Order.Line": {0, 1}} {
		got, err := c.Index(name)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Index(%q) = %v %v, want %v", name, got, err, want)
		}
	}
	line, err := c.AppendBinary(nil, []byte(`{"sku":"x","qty":"18446744073709551615"}`), []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	out, err = c.AppendJSON(nil, line, []int{0, 1}, 1<<20)
	if err != nil || string(out) != `{"sku":"x","qty":"18446744073709551615"}` {
		t.Fatalf("nested message: %s %v", out, err)
	}
	if _, err := c.Index("Nope"); err == nil || !strings.Contains(err.Error(), "shop.Order, shop.Ping") {
		t.Errorf("unknown message: %v", err)
	}
	if _, err := c.AppendJSON(nil, nil, []int{2}, 1<<20); err == nil || !strings.Contains(err.Error(), "has 2 messages, no message 2") {
		t.Errorf("index out of range: %v", err)
	}
	if _, err := c.AppendJSON(nil, nil, []int{0, 3}, 1<<20); err == nil || !strings.Contains(err.Error(), "message shop.Order has 2 messages") {
		t.Errorf("nested index out of range: %v", err)
	}
}

func TestErrors(t *testing.T) {
	c := compile(t, Options{})
	for _, tc := range []struct{ in, want string }{
		{`{"id":"x"}`, "id"},
		{`{"nope":1}`, "nope"},
		{`{"status":"LOST"}`, "LOST"},
		{`{"amount":{"units":true}}`, "units"},
		{`[`, "Order"},
	} {
		_, err := c.AppendBinary(nil, []byte(tc.in), nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "shop.Order") {
			t.Errorf("%s: %v, want it to name %q and the message", tc.in, err, tc.want)
		}
	}
	if _, err := c.AppendJSON(nil, []byte{0x0a, 0xff}, nil, 1<<20); err == nil || !strings.Contains(err.Error(), "shop.Order does not decode") {
		t.Errorf("bad payload: %v", err)
	}
	bin, _ := c.AppendBinary(nil, []byte(orderJSON), nil)
	if _, err := c.AppendJSON(nil, bin, nil, 20); err == nil || !strings.Contains(err.Error(), "size limit") {
		t.Errorf("size limit: %v", err)
	}
	if _, err := Compile(orderProto, nil, Options{}, Limits{}); err == nil || !strings.Contains(err.Error(), "common/money.proto") {
		t.Errorf("missing reference: %v", err)
	}
	if _, err := Compile(`syntax = "proto3"; message A { int32 x = 1; int32 x = 2; }`, nil, Options{}, Limits{}); err == nil || !strings.Contains(err.Error(), "does not compile") {
		t.Errorf("bad schema: %v", err)
	}
}

// Hostile schemas and values: refused, never a crash.
func TestBounds(t *testing.T) {
	deep := `syntax = "proto3";` + strings.Repeat("message A {", 200) + strings.Repeat("}", 200)
	if _, err := Compile(deep, nil, Options{}, Limits{}); err == nil || !strings.Contains(err.Error(), "nested deeper than 64") {
		t.Errorf("deep schema: %v", err)
	}
	rec, err := Compile(`syntax = "proto3"; message R { R next = 1; }`, nil, Options{}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// 100 nested messages on the wire.
	var b []byte
	for range 100 {
		b = append(binary.AppendUvarint([]byte{0x0a}, uint64(len(b))), b...)
	}
	if _, err := rec.AppendJSON(nil, b, nil, 1<<20); err == nil {
		t.Errorf("deep value decoded")
	}
	js := strings.Repeat(`{"next":`, 100) + "{}" + strings.Repeat("}", 100)
	if _, err := rec.AppendBinary(nil, []byte(js), nil); err == nil {
		t.Errorf("deep JSON encoded")
	}
}

func FuzzProtoDecode(f *testing.F) {
	c := compile(f, Options{})
	bin, _ := c.AppendBinary(nil, []byte(orderJSON), nil)
	f.Add(bin, uint8(0))
	f.Add([]byte{0x0a, 0x05, 'h', 'e', 'l', 'l', 'o', 0x10, 0x05}, uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, which uint8) {
		index := [][]int{{0}, {1}, {0, 1}}[int(which)%3]
		out, err := c.AppendJSON(nil, b, index, 1<<16)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON %s", out)
		}
		if _, err := c.AppendBinary(nil, out, index); err != nil {
			t.Fatalf("decoded %s does not encode: %v", out, err)
		}
	})
}

func BenchmarkProtoOrder(b *testing.B) {
	c := compile(b, Options{})
	bin, _ := c.AppendBinary(nil, []byte(orderJSON), nil)
	var js, out []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if js, err = c.AppendJSON(js[:0], bin, []int{0}, 1<<20); err != nil {
			b.Fatal(err)
		}
		if out, err = c.AppendBinary(out[:0], js, []int{0}); err != nil {
			b.Fatal(err)
		}
	}
}
