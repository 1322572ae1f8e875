package views

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/twmb/avro"
)

func schema(t testing.TB) *avro.Schema {
	t.Helper()
	b, err := os.ReadFile("../../testdata/all.avsc")
	if err != nil {
		t.Fatal(err)
	}
	return avro.MustParse(string(b))
}

func ptr[T any](v T) *T { return &v }

// values are values of every generated type, as abi/guest/sr's tests
// have them, with the timestamps as int64.
func values() []All {
	at := int64(1700000000123)
	return []All{
		{ID: 1, Name: "ada", Raw: []byte{}, Tags: []string{}, Lines: []Line{}, AtMs: at, AtUs: 1700000000123456, Address: Address{Street: "x"}, Price: []byte{}},
		{
			ID: -1 << 62, Count: -300, Flag: true, Ratio: 1.5, Amount: -0.1, Name: "Grüße 世界", Raw: []byte{0, 1, 255},
			RefID: "2c7b3f54-8b55-4a1e-9d5f-2f1c3c1b6d6e", AtMs: -1500, AtUs: -1,
			Coupon: ptr("SPRING"), Score: ptr(int64(1 << 40)), Tags: []string{"a", "", strings.Repeat("z", 200)},
			Address: Address{Street: "Main", Zip: ptr(int32(12345))}, Previous: &Address{Street: "Old"},
			Lines:     []Line{{Sku: "tea", Qty: 2, At: &at}, {Sku: "cake", Qty: 1}},
			MaybeTags: &[]*string{ptr("x"), nil},
			Price:     []byte{0xff, 0x85, 0xee}, // -12345.06: -1234506 unscaled
		},
	}
}

// The codec generated with --strings view --timestamps int64 writes the
// bytes twmb/avro's resolving path writes from the same struct, and reads
// them to the same values (its [null, string] slot aside: the resolving
// path leaves it empty).
func TestViewCodecMatchesResolvingPath(t *testing.T) {
	s := schema(t)
	for i, v := range values() {
		want, err := s.AppendEncode(nil, &v)
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
		if rest, err := s.Decode(want, &viaResolving); err != nil || len(rest) > 0 {
			t.Fatalf("value %d: the resolving path read %v, %d bytes left", i, err, len(rest))
		}
		if viaCodec.Coupon != nil { // the value, off its slot
			c := *viaCodec.Coupon
			viaCodec.Coupon = &c
		}
		viaCodec.avroCoupon = ""
		if !reflect.DeepEqual(viaCodec, viaResolving) {
			t.Fatalf("value %d: the codec read %+v, the resolving path %+v", i, viaCodec, viaResolving)
		}
	}
}

// within reports whether s's bytes lie inside b.
func within(s string, b []byte) bool {
	p, start := uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return p >= start && p+uintptr(len(s)) <= start+uintptr(len(b))
}

// Decoded strings are views of the payload, not copies (so they change
// with it: the lifetime rule docs/SDK.md states), and a [null, string]
// field points into the value itself.
func TestStringsAreViews(t *testing.T) {
	v := values()[1]
	b, err := v.AppendAvro(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got All
	if _, err := got.DecodeAvro(b); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{got.Name, got.RefID, got.Tags[2], got.Address.Street, got.Lines[1].Sku, *got.Coupon, *(*got.MaybeTags)[0]} {
		if !within(s, b) {
			t.Fatalf("%q is not a view of the payload", s)
		}
	}
	if got.Coupon != &got.avroCoupon {
		t.Fatal("Coupon does not point into the value")
	}
	copy(b[bytes.Index(b, []byte("SPRING")):], "SUMMER")
	if *got.Coupon != "SUMMER" {
		t.Fatalf("coupon %q after its bytes changed, want the view to show SUMMER", *got.Coupon)
	}
	var null All
	if _, err := null.DecodeAvro(must(values()[0].AppendAvro(nil))); err != nil || null.Coupon != nil || null.avroCoupon != "" {
		t.Fatalf("a null coupon: %v, %v %q", err, null.Coupon, null.avroCoupon)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// A payload cut anywhere is an error, as with copied strings.
func TestViewCodecTruncated(t *testing.T) {
	full := must(values()[1].AppendAvro(nil))
	for n := range len(full) {
		var got All
		if _, err := got.DecodeAvro(full[:n]); err == nil {
			t.Fatalf("%d of %d bytes decoded without an error", n, len(full))
		}
	}
}

// What a record's decode and encode allocate, decoded into a value and
// encoded into a buffer both reused from record to record: a view costs
// nothing, so what is left is the schema's own pointers and bytes:
// previous, score, address.zip, lines[0].at, maybe_tags and its slice's
// two growths, raw and price (bytes are copies either way); the arena
// chunk of maybe_tags' [null, string] pointers, one in 64 records, is
// below the average's rounding.
// More is a regression in the generator or avrobin.
func TestViewCodecAllocations(t *testing.T) {
	in := must(values()[1].AppendAvro(nil))
	var v All
	var out []byte
	allocs := testing.AllocsPerRun(1000, func() {
		v = All{Tags: v.Tags[:0], Lines: v.Lines[:0]}
		if _, err := v.DecodeAvro(in); err != nil {
			t.Fatal(err)
		}
		var err error
		if out, err = v.AppendAvro(out[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > wantAllocs {
		t.Fatalf("%v allocations a record, want at most %d", allocs, wantAllocs)
	}
}

const wantAllocs = 9

// FuzzViewCodec: on any payload the view codec returns an error or a
// value, never panics; a value it reads, the resolving path reads from
// the same bytes too, to the same value.
func FuzzViewCodec(f *testing.F) {
	for _, v := range values() {
		f.Add(must(v.AppendAvro(nil)))
	}
	s := schema(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		var viaCodec All
		rest, err := viaCodec.DecodeAvro(b)
		if err != nil {
			return
		}
		var viaResolving All
		rest2, err := s.Decode(b, &viaResolving)
		if err != nil || len(rest2) != len(rest) {
			t.Fatalf("the codec read %x (%d bytes left), the resolving path: %v (%d bytes left)", b, len(rest), err, len(rest2))
		}
		// The values compared through their encodings: NaN is not equal
		// to itself, and the codec's coupon is in its slot.
		got, err := viaCodec.AppendAvro(nil)
		want, err2 := s.AppendEncode(nil, &viaResolving)
		if err != nil || err2 != nil || !bytes.Equal(got, want) {
			t.Fatalf("%x: the codec's value writes %x (%v), the resolving path's %x (%v)", b, got, err, want, err2)
		}
	})
}
