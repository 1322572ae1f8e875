package avrocodec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/avro"
)

// orderSchema is the 7-field record of the benchmarks: a union, an array,
// a timestamp, a decimal, an enum and a map.
const orderSchema = `{"type":"record","name":"Order","namespace":"shop","fields":[
 {"name":"id","type":"long"},
 {"name":"customer","type":["null","string"],"default":null},
 {"name":"items","type":{"type":"array","items":"string"}},
 {"name":"placed_at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID","SHIPPED"]}},
 {"name":"tags","type":{"type":"map","values":"int"}}
]}`

const orderJSON = `{"id":42,"customer":"ada","items":["book","pen"],"placed_at":"2024-01-15T10:04:05.123Z","amount":"12.30","status":"PAID","tags":{"a":1,"b":2}}`

func mustCompile(t testing.TB, text string, opts Options, refs ...string) *Codec {
	t.Helper()
	c, err := Compile(text, refs, opts, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRoundTripDefaultContract(t *testing.T) {
	c := mustCompile(t, orderSchema, Options{})
	bin, err := c.AppendBinary(nil, []byte(orderJSON))
	if err != nil {
		t.Fatal(err)
	}
	// The binary is what the reference encoder writes for the same value.
	ref := avro.MustParse(orderSchema)
	var native any
	if _, err := ref.Decode(bin, &native); err != nil {
		t.Fatalf("reference decoder: %v", err)
	}
	if native.(map[string]any)["customer"] != "ada" {
		t.Fatalf("reference decode: %v", native)
	}
	out, err := c.AppendJSON(nil, bin, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != orderJSON {
		t.Fatalf("decoded\n%s\nwant\n%s", out, orderJSON)
	}
}

func TestContractOptions(t *testing.T) {
	bin, err := mustCompile(t, orderSchema, Options{}).AppendBinary(nil, []byte(orderJSON))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{TaggedUnions: true}, `"customer":{"string":"ada"}`},
		{Options{RawLogicalTypes: true}, `"placed_at":1705313045123,"amount":"BM4="`},
	} {
		c := mustCompile(t, orderSchema, tc.opts)
		out, err := c.AppendJSON(nil, bin, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), tc.want) {
			t.Errorf("%+v: %s does not hold %s", tc.opts, out, tc.want)
		}
		// And what an option writes, it reads back to the same value
		// (compared as decoded: Avro map entries have no fixed order).
		again, err := c.AppendBinary(nil, out)
		if err != nil {
			t.Fatalf("%+v: re-encode: %v", tc.opts, err)
		}
		if back, err := c.AppendJSON(nil, again, 1<<20); err != nil || !bytes.Equal(back, out) {
			t.Errorf("%+v: re-encoded and decoded to %s %v, want %s", tc.opts, back, err, out)
		}
	}
}

func TestLogicalTypes(t *testing.T) {
	const schema = `{"type":"record","name":"L","fields":[
	 {"name":"d","type":{"type":"int","logicalType":"date"}},
	 {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
	 {"name":"tu","type":{"type":"long","logicalType":"timestamp-micros"}},
	 {"name":"lt","type":{"type":"long","logicalType":"local-timestamp-millis"}},
	 {"name":"u","type":{"type":"string","logicalType":"uuid"}},
	 {"name":"neg","type":{"type":"fixed","name":"F","size":4,"logicalType":"decimal","precision":8,"scale":3}},
	 {"name":"b","type":"bytes"},
	 {"name":"f","type":"double"},
	 {"name":"opt","type":["null",{"type":"long","logicalType":"timestamp-millis"},"string"]}
	]}`
	in := `{"d":"2024-02-29","tm":"10:04:05.123","tu":"2024-01-15T10:04:05.000123Z","lt":"2024-01-15T10:04:05.5","u":"6ba7b810-9dad-11d1-80b4-00c04fd430c8","neg":"-1.250","b":"AP8=","f":"NaN","opt":"2024-01-15T10:04:05Z"}`
	c := mustCompile(t, schema, Options{})
	bin, err := c.AppendBinary(nil, []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.AppendJSON(nil, bin, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// A bare string in the union is taken by the first branch it fits:
	// here the timestamp, whose text it is.
	if string(out) != in {
		t.Fatalf("decoded\n%s\nwant\n%s", out, in)
	}
	raw, err := mustCompile(t, schema, Options{RawLogicalTypes: true, TaggedUnions: true}).AppendJSON(nil, bin, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"d":19782`, `"tm":36245123`, `"tu":1705313045000123`, `"neg":"///7Hg=="`, `"opt":{"long":1705313045000}`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("raw %s does not hold %s", raw, want)
		}
	}
}

// A JSON value that does not fit is refused with the field named.
func TestEncodeErrorsNameTheField(t *testing.T) {
	c := mustCompile(t, orderSchema, Options{})
	base := map[string]any{}
	if err := json.Unmarshal([]byte(orderJSON), &base); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		field string
		value any
		want  []string
	}{
		{"id", "forty-two", []string{"field id:", "want an integer"}},
		{"id", 1.5, []string{"field id:", "not an integer"}},
		{"items", []any{"a", 7}, []string{"field items[1]:", "want a string"}},
		{"status", "LOST", []string{"field status:", `"LOST" is not a symbol of enum shop.Status`, "NEW, PAID, SHIPPED"}},
		{"placed_at", "yesterday", []string{"field placed_at:", "RFC 3339"}},
		{"amount", "1.234", []string{"field amount:", "more than 2 decimal places"}},
		{"amount", "123456789.00", []string{"field amount:", "precision"}},
		{"tags", map[string]any{"x": "y"}, []string{`field tags["x"]:`, "want an integer"}},
		{"customer", 5, []string{"field customer:", "fits no branch", "null, string"}},
		{"nope", 1, []string{"field nope:", "not a field of record shop.Order"}},
		{"status", nil, []string{"field status:", "want one of the symbols"}},
	} {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		m[tc.field] = tc.value
		js, _ := json.Marshal(m)
		_, err := c.AppendBinary(nil, js)
		var ee *EncodeError
		if !errors.As(err, &ee) {
			t.Errorf("%s=%v: err %v, want an EncodeError", tc.field, tc.value, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s=%v: %q does not say %q", tc.field, tc.value, err, w)
			}
		}
	}
	delete(base, "items")
	js, _ := json.Marshal(base)
	if _, err := c.AppendBinary(nil, js); err == nil || !strings.Contains(err.Error(), "field items: missing, and the schema gives it no default") {
		t.Errorf("missing field: %v", err)
	}
	delete(base, "customer") // nullable with a default: fine
	base["items"] = []any{}
	js, _ = json.Marshal(base)
	if _, err := c.AppendBinary(nil, js); err != nil {
		t.Errorf("missing nullable field: %v", err)
	}
}

// Tagged and bare union values; records in unions; references.
func TestUnionsAndReferences(t *testing.T) {
	const addr = `{"type":"record","name":"Addr","namespace":"x","fields":[{"name":"city","type":"string"}]}`
	const user = `{"type":"record","name":"User","namespace":"x","fields":[
	 {"name":"home","type":["null","Addr",{"type":"map","values":"string"}]},
	 {"name":"next","type":["null","User"],"default":null},
	 {"name":"n","type":["int","long","double"]}]}`
	c := mustCompile(t, user, Options{}, addr)
	for _, tc := range []struct{ in, bare, tagged string }{
		{`{"home":{"city":"Oslo"},"n":1}`, `{"home":{"city":"Oslo"},"next":null,"n":1}`, `{"home":{"x.Addr":{"city":"Oslo"}},"next":null,"n":{"int":1}}`},
		{`{"home":{"map":{"city":"Oslo"}},"n":{"long":1}}`, `{"home":{"city":"Oslo"},"next":null,"n":1}`, `{"home":{"map":{"city":"Oslo"}},"next":null,"n":{"long":1}}`},
		{`{"home":{"k":"v","j":"w"},"n":1.5,"next":{"home":null,"n":5000000000}}`, `{"home":{"j":"w","k":"v"},"next":{"home":null,"next":null,"n":5000000000},"n":1.5}`, `{"home":{"map":{"j":"w","k":"v"}},"next":{"x.User":{"home":null,"next":null,"n":{"long":5000000000}}},"n":{"double":1.5}}`},
	} {
		bin, err := c.AppendBinary(nil, []byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		bare, err := c.AppendJSON(nil, bin, 1<<20)
		if err != nil || string(bare) != tc.bare {
			t.Errorf("%s: bare %s %v, want %s", tc.in, bare, err, tc.bare)
		}
		tagged, err := mustCompile(t, user, Options{TaggedUnions: true}, addr).AppendJSON(nil, bin, 1<<20)
		if err != nil || string(tagged) != tc.tagged {
			t.Errorf("%s: tagged %s %v, want %s", tc.in, tagged, err, tc.tagged)
		}
	}
	if _, err := Compile(user, nil, Options{}, Limits{}); err == nil || !strings.Contains(err.Error(), "Addr") {
		t.Errorf("missing reference: %v", err)
	}
}

func TestBounds(t *testing.T) {
	c := mustCompile(t, orderSchema, Options{})
	bin, _ := c.AppendBinary(nil, []byte(orderJSON))
	if _, err := c.AppendJSON(nil, bin, 50); !errors.Is(err, ErrTooLarge) {
		t.Errorf("size limit: %v", err)
	}
	if _, err := c.AppendJSON(nil, append(bin, 0), 1<<20); err == nil || !strings.Contains(err.Error(), "1 bytes left") {
		t.Errorf("trailing bytes: %v", err)
	}
	if _, err := c.AppendJSON(nil, bin[:len(bin)-3], 1<<20); err == nil {
		t.Errorf("truncated payload decoded")
	}
	// A recursive schema and a value nested past the depth limit.
	list := mustCompile(t, `{"type":"record","name":"L","fields":[{"name":"next","type":["null","L"]}]}`, Options{})
	deep := strings.Repeat(`{"next":`, 100) + "null" + strings.Repeat("}", 100)
	if _, err := list.AppendBinary(nil, []byte(deep)); err == nil || !strings.Contains(err.Error(), "nested deeper than 64") {
		t.Errorf("deep JSON: %v", err)
	}
	deepBin := append(bytes.Repeat([]byte{2}, 100), 0)
	if _, err := list.AppendJSON(nil, deepBin, 1<<20); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("deep binary: %v", err)
	}
	// Hostile schemas: nested past the limit; a huge enum is only as big
	// as its text (bounded by the caller's schema size).
	nested := strings.Repeat(`{"type":"array","items":`, 300) + `"int"` + strings.Repeat("}", 300)
	if _, err := Compile(nested, nil, Options{}, Limits{}); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("deep schema: %v", err)
	}
	syms := make([]string, 100000)
	for i := range syms {
		syms[i] = fmt.Sprintf(`"S%d"`, i)
	}
	big := `{"type":"enum","name":"E","symbols":[` + strings.Join(syms, ",") + `]}`
	e, err := Compile(big, nil, Options{}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.AppendBinary(nil, []byte(`"S99999x"`)); err == nil || !strings.Contains(err.Error(), "and 99990 more") {
		t.Errorf("enum error: %v", err)
	}
}

func FuzzAvroDecode(f *testing.F) {
	c := mustCompile(f, orderSchema, Options{})
	bin, _ := c.AppendBinary(nil, []byte(orderJSON))
	f.Add(bin)
	f.Add([]byte{})
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x08})
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := c.AppendJSON(nil, b, 1<<16)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON %s", out)
		}
		// What decodes encodes back to the same bytes.
		again, err := c.AppendBinary(nil, out)
		if err != nil {
			t.Fatalf("re-encode %s: %v", out, err)
		}
		// (The same value: invalid UTF-8 in a string became U+FFFD,
		// escaped the first time, written as it is the second.)
		back, err := c.AppendJSON(nil, again, 1<<16)
		var v1, v2 any
		if err != nil || json.Unmarshal(out, &v1) != nil || json.Unmarshal(back, &v2) != nil || !reflect.DeepEqual(v1, v2) {
			t.Fatalf("round trip %s -> %s (%v)", out, back, err)
		}
	})
}

func FuzzAvroEncode(f *testing.F) {
	c := mustCompile(f, orderSchema, Options{})
	f.Add([]byte(orderJSON))
	f.Add([]byte(`{"id":"1"}`))
	f.Add([]byte(`[[[[`))
	f.Fuzz(func(t *testing.T, js []byte) {
		bin, err := c.AppendBinary(nil, js)
		if err != nil {
			return
		}
		if _, err := c.AppendJSON(nil, bin, 1<<20); err != nil {
			t.Fatalf("%s encoded to %x, which does not decode: %v", js, bin, err)
		}
	})
}

func BenchmarkAvroOrderDecode(b *testing.B) {
	c := mustCompile(b, orderSchema, Options{})
	bin, _ := c.AppendBinary(nil, []byte(orderJSON))
	var js []byte
	b.ReportAllocs()
	for b.Loop() {
		js, _ = c.AppendJSON(js[:0], bin, 1<<20)
	}
}

func BenchmarkAvroOrderEncode(b *testing.B) {
	c := mustCompile(b, orderSchema, Options{})
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		out, _ = c.AppendBinary(out[:0], []byte(orderJSON))
	}
}

func BenchmarkAvroOrder(b *testing.B) {
	c := mustCompile(b, orderSchema, Options{})
	bin, _ := c.AppendBinary(nil, []byte(orderJSON))
	var js, out []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if js, err = c.AppendJSON(js[:0], bin, 1<<20); err != nil {
			b.Fatal(err)
		}
		if out, err = c.AppendBinary(out[:0], js); err != nil {
			b.Fatal(err)
		}
	}
}
