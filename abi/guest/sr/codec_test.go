//go:build !wasip1

package sr_test

//go:generate go run ../../../cmd/wasmstream gen avro --lang go --package sr_test --out all_avro_test.go testdata/all.avsc

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/avro"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/sr"
)

func allSchema(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("testdata/all.avsc")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func ptr[T any](v T) *T { return &v }

// allValues are values of every generated type: nulls and non-nulls of
// each union (the null branch first and second), empty and filled arrays,
// times before and after the epoch, multi-byte strings and varints.
func allValues() []All {
	at := time.UnixMilli(1700000000123).UTC()
	return []All{
		{ID: 1, Name: "ada", Raw: []byte{}, Tags: []string{}, Lines: []Line{}, AtMs: at, AtUs: time.UnixMicro(1700000000123456).UTC(), Address: Address{Street: "x"}, Price: []byte{}},
		{
			ID: -1 << 62, Count: -300, Flag: true, Ratio: 1.5, Amount: -0.1, Name: "Grüße 世界", Raw: []byte{0, 1, 255},
			RefID: "2c7b3f54-8b55-4a1e-9d5f-2f1c3c1b6d6e", AtMs: time.UnixMilli(-1500).UTC(), AtUs: time.UnixMicro(-1).UTC(),
			Coupon: ptr("SPRING"), Score: ptr(int64(1 << 40)), Tags: []string{"a", "", strings.Repeat("z", 200)},
			Address: Address{Street: "Main", Zip: ptr(int32(12345))}, Previous: &Address{Street: "Old"},
			Lines:     []Line{{Sku: "tea", Qty: 2, At: &at}, {Sku: "cake", Qty: 1}},
			MaybeTags: &[]*string{ptr("x"), nil},
			Price:     []byte{0xff, 0x85, 0xee}, // -12345.06: -1234506 unscaled
		},
	}
}

// The generated codec writes the bytes twmb/avro's resolving path writes
// for every value, and reads them (its own and the resolving path's) to
// the same value.
func TestGeneratedCodecMatchesResolvingPath(t *testing.T) {
	schema := avro.MustParse(allSchema(t))
	for i, v := range allValues() {
		want, err := schema.AppendEncode(nil, &v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.AppendAvro(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("value %d: the codec wrote %x (%v), the resolving path %x", i, got, err, want)
		}
		var viaCodec, viaResolving All
		if rest, err := viaCodec.DecodeAvro(want); err != nil || len(rest) > 0 {
			t.Fatalf("value %d: the codec read %v, %d bytes left", i, err, len(rest))
		}
		if rest, err := schema.Decode(want, &viaResolving); err != nil || len(rest) > 0 {
			t.Fatalf("value %d: the resolving path read %v, %d bytes left", i, err, len(rest))
		}
		if !reflect.DeepEqual(viaCodec, viaResolving) {
			t.Fatalf("value %d: the codec read %+v, the resolving path %+v", i, viaCodec, viaResolving)
		}
	}
}

// A payload cut anywhere, or with a block count past its bytes, is an
// error from the codec, as from the resolving path, and allocates no more
// than its bytes.
func TestGeneratedCodecTruncated(t *testing.T) {
	v := allValues()[1]
	full, err := v.AppendAvro(nil)
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(full) {
		var got All
		if _, err := got.DecodeAvro(full[:n]); err == nil {
			t.Fatalf("%d of %d bytes decoded without an error", n, len(full))
		}
	}
	// tags: a block of 2^40 items in the few bytes left.
	huge := binary.AppendVarint(nil, 1<<40)
	var got All
	if _, err := got.DecodeAvro(append(full[:bytes.Index(full, []byte{6, 2, 'a'})], huge...)); err == nil || !strings.Contains(err.Error(), "array block of 1099511627776 items") {
		t.Fatalf("a hostile block count: %v", err)
	}
}

// cases frames each value with id as a producer would (twmb/avro).
func framedAll(t *testing.T, id int, schema string, v *All) []byte {
	return frame(t, id, schema, v)
}

// reordered is all.avsc with its first two fields swapped: another
// canonical form, so the generated codec must not read or write it.
func reordered(t *testing.T) string {
	s := allSchema(t)
	id := `{"name": "id", "type": "long"},`
	count := `{"name": "count", "type": "int"},`
	s = strings.Replace(s, id, "@ID@", 1)
	s = strings.Replace(s, count, id, 1)
	return strings.Replace(s, "@ID@", count, 1)
}

// Through sr: a record whose writer schema is the generated one decodes
// and encodes with the codec (the codec is called, the bytes are the
// resolving path's); one framed with a schema that differs (fields
// reordered) decodes and encodes through the resolving path, to the same
// values and the writer schema's bytes.
func TestDecodeEncodeUseCodecOnlyForItsSchema(t *testing.T) {
	fresh(t)
	same, _ := guest.AddTestSchema("all-value", guest.Schema{Type: guest.SchemaAvro, Schema: allSchema(t)})
	other, _ := guest.AddTestSchema("all2-value", guest.Schema{Type: guest.SchemaAvro, Schema: reordered(t)})
	for _, tc := range []struct {
		id      int
		subject string
		schema  string
		codec   bool
	}{{same, "all-value", allSchema(t), true}, {other, "all2-value", reordered(t), false}} {
		for i, v := range allValues() {
			var c counting
			var out []byte
			proc = func(r *guest.Record, emit guest.Emitter) error {
				c = counting{}
				if err := sr.Decode(r.Value, &c); err != nil {
					return err
				}
				var err error
				if out, err = sr.AppendEncode(out[:0], tc.subject, &c); err != nil {
					return err
				}
				return nil
			}
			res := guest.Run(abi.Record{Topic: "t", Value: framedAll(t, tc.id, tc.schema, &v)})
			if res.Status != abi.StatusOK {
				t.Fatalf("schema %d value %d: %v %v", tc.id, i, res.Status, res.Err)
			}
			if used := c.decodes == 1 && c.encodes == 1; used != tc.codec || c.decodes != c.encodes {
				t.Fatalf("schema %d value %d: the codec decoded %d and encoded %d times, want it used: %v", tc.id, i, c.decodes, c.encodes, tc.codec)
			}
			want := framedAll(t, tc.id, tc.schema, &v)
			if !bytes.Equal(out, want) {
				t.Fatalf("schema %d value %d: encoded %x, want %x", tc.id, i, out, want)
			}
			var back All
			unframe(t, out, tc.id, tc.schema, &back)
			if !reflect.DeepEqual(back, c.All) {
				t.Fatalf("schema %d value %d: read %+v, wrote what reads as %+v", tc.id, i, c.All, back)
			}
		}
	}
}

// counting is All with its codec's calls counted (its fields are All's:
// the resolving path reads and writes the embedded struct's).
type counting struct {
	All
	decodes, encodes int
}

func (c *counting) DecodeAvro(b []byte) ([]byte, error) {
	c.decodes++
	return c.All.DecodeAvro(b)
}

func (c *counting) AppendAvro(b []byte) ([]byte, error) {
	c.encodes++
	return c.All.AppendAvro(b)
}

// FuzzGeneratedCodec: on any payload the generated decoder returns an
// error or a value, never panics; a value it reads, the resolving path
// reads from the same bytes too, to the same value, and the two write it
// back to the same bytes.
func FuzzGeneratedCodec(f *testing.F) {
	for _, v := range allValues() {
		b, err := v.AppendAvro(nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	schema := avro.MustParse(allSchema(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		var viaCodec All
		rest, err := viaCodec.DecodeAvro(b)
		if err != nil {
			return
		}
		var viaResolving All
		rest2, err := schema.Decode(b, &viaResolving)
		if err != nil || len(rest2) != len(rest) {
			t.Fatalf("the codec read %x (%d bytes left), the resolving path: %v (%d bytes left)", b, len(rest), err, len(rest2))
		}
		// NaN is not equal to itself: equal bits are the same value.
		a, r := viaCodec, viaResolving
		if math.Float32bits(a.Ratio) == math.Float32bits(r.Ratio) {
			a.Ratio, r.Ratio = 0, 0
		}
		if math.Float64bits(a.Amount) == math.Float64bits(r.Amount) {
			a.Amount, r.Amount = 0, 0
		}
		if !reflect.DeepEqual(a, r) {
			t.Fatalf("%x: the codec read %+v, the resolving path %+v", b, viaCodec, viaResolving)
		}
		want, err := schema.AppendEncode(nil, &viaCodec)
		got, err2 := viaCodec.AppendAvro(nil)
		if (err == nil) != (err2 == nil) || !bytes.Equal(got, want) {
			t.Fatalf("%x: the codec wrote %x (%v), the resolving path %x (%v)", b, got, err2, want, err)
		}
	})
}

// After records that took the hot path (the last schema found, a codec
// generated for it), a record with the same frame that does not decode,
// and a value that does not encode, still fail terminally saying why,
// through the general path.
func TestHotPathFailuresSayWhy(t *testing.T) {
	fresh(t)
	id, _ := guest.AddTestSchema("all-value", guest.Schema{Type: guest.SchemaAvro, Schema: allSchema(t)})
	v := allValues()[1]
	good := framedAll(t, id, allSchema(t), &v)
	var enc All
	proc = func(r *guest.Record, emit guest.Emitter) error {
		var got All
		if err := sr.Decode(r.Value, &got); err != nil {
			return err
		}
		_, err := sr.AppendEncode(nil, "all-value", &enc)
		return err
	}
	enc = v
	for range 3 {
		if res := guest.Run(abi.Record{Topic: "t", Value: good}); res.Status != abi.StatusOK {
			t.Fatalf("%v %v", res.Status, res.Err)
		}
	}
	res := guest.Run(abi.Record{Topic: "t", Value: good[:len(good)-3]})
	if res.Status != abi.StatusFail || !strings.Contains(res.Err.Error(), "decode with schema") || !strings.Contains(res.Err.Error(), "test.All") {
		t.Fatalf("a truncated payload: %v %v, want a terminal failure naming the schema and the record", res.Status, res.Err)
	}
	enc.AtMs = time.Unix(math.MaxInt64/1000, 0)
	res = guest.Run(abi.Record{Topic: "t", Value: good})
	if res.Status != abi.StatusFail || !strings.Contains(res.Err.Error(), "encode with schema") || !strings.Contains(res.Err.Error(), "field at_ms") {
		t.Fatalf("a time past the int64: %v %v, want a terminal failure naming the field", res.Status, res.Err)
	}
}

// plain is All without its codec: the resolving path's.
type plain All

// The hot path knows a value again by its type and its pointer: a value
// of another type (one without a codec) decoded and encoded between two
// codec values with the same schema takes the resolving path, and the
// codec values theirs, each to the right value.
func TestHotPathKnowsItsValue(t *testing.T) {
	fresh(t)
	id, _ := guest.AddTestSchema("all-value", guest.Schema{Type: guest.SchemaAvro, Schema: allSchema(t)})
	vals := allValues()
	var c counting
	var p plain
	for i, into := range []any{&c, &p, &c, &p} {
		v := vals[i%2]
		proc = func(r *guest.Record, emit guest.Emitter) error {
			if err := sr.Decode(r.Value, into); err != nil {
				return err
			}
			out, err := sr.AppendEncode(nil, "all-value", into)
			if err == nil && !bytes.Equal(out, r.Value) {
				t.Fatalf("record %d: encoded %x, want %x", i, out, r.Value)
			}
			return err
		}
		if res := guest.Run(abi.Record{Topic: "t", Value: framedAll(t, id, allSchema(t), &v)}); res.Status != abi.StatusOK {
			t.Fatalf("record %d: %v %v", i, res.Status, res.Err)
		}
		if i == 0 { // its runs before the schemas were in hand aside
			c.decodes, c.encodes = 1, 1
		}
	}
	if c.decodes != 2 || c.encodes != 2 {
		t.Fatalf("the codec decoded %d and encoded %d times, want 2 and 2 (the plain values took the resolving path)", c.decodes, c.encodes)
	}
	if !reflect.DeepEqual(All(p), vals[1]) || !reflect.DeepEqual(c.All, vals[0]) {
		t.Fatalf("read %+v and %+v", p, c.All)
	}
}
