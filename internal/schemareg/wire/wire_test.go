package wire

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

// The bytes below were checked against a real registry (Apicurio 3.3.3 with
// Confluent's serializers' framing): an Avro record of schema id 4, and a
// Protobuf message at index [1] of schema id 8.
func TestParseHeaderAndIndex(t *testing.T) {
	id, rest, err := ParseHeader([]byte{0, 0, 0, 0, 4, 0x54, 0x0e}, Value, nil)
	if err != nil || id != 4 || !bytes.Equal(rest, []byte{0x54, 0x0e}) {
		t.Fatalf("avro frame: id %d rest %x err %v", id, rest, err)
	}
	pb := []byte{0, 0, 0, 0, 8, 0x02, 0x02, 0x0a, 0x05, 'h', 'e', 'l', 'l', 'o', 0x10, 0x05}
	id, rest, err = ParseHeader(pb, Value, nil)
	if err != nil || id != 8 {
		t.Fatalf("protobuf header: %d %v", id, err)
	}
	index, payload, err := ParseIndex(rest, Value, id)
	if err != nil || !slices.Equal(index, []int{1}) || !bytes.Equal(payload, pb[7:]) {
		t.Fatalf("protobuf index: %v %x %v", index, payload, err)
	}
	for _, tc := range []struct {
		in    []byte
		index []int
	}{
		{[]byte{0}, []int{0}},                // short form
		{[]byte{2, 0}, []int{0}},             // long form of [0]
		{[]byte{4, 2, 0}, []int{1, 0}},       // nested: first message inside the second
		{[]byte{6, 4, 2, 6}, []int{2, 1, 3}}, // three deep
	} {
		index, rest, err := ParseIndex(append(tc.in, 0xaa), Value, 1)
		if err != nil || !slices.Equal(index, tc.index) || !bytes.Equal(rest, []byte{0xaa}) {
			t.Errorf("ParseIndex(%x) = %v %x %v, want %v", tc.in, index, rest, err, tc.index)
		}
	}
}

func TestAppendRoundTrip(t *testing.T) {
	for _, index := range [][]int{{0}, {1}, {1, 0}, {300, 2, 70000}} {
		b := AppendIndex(AppendHeader(nil, 123456), index)
		b = append(b, "payload"...)
		id, rest, err := ParseHeader(b, Key, nil)
		if err != nil || id != 123456 {
			t.Fatalf("header: %d %v", id, err)
		}
		got, payload, err := ParseIndex(rest, Key, id)
		if err != nil || !slices.Equal(got, index) || string(payload) != "payload" {
			t.Fatalf("index %v: got %v %q %v", index, got, payload, err)
		}
	}
	if b := AppendIndex(nil, []int{0}); !bytes.Equal(b, []byte{0}) {
		t.Fatalf("[0] not in the short form: %x", b)
	}
}

// Each framing wasmstream does not read is refused by name.
func TestRefused(t *testing.T) {
	hdr := func(want string) func(string) bool { return func(n string) bool { return n == want } }
	for _, tc := range []struct {
		name   string
		in     []byte
		part   Part
		header func(string) bool
		kind   Kind
		words  []string
	}{
		{"empty", nil, Value, nil, Empty, []string{"value: empty"}},
		{"guid", append([]byte{1}, make([]byte, 16)...), Value, nil, GUID, []string{"magic byte 1", "GUID"}},
		{"header id", []byte{0, 0, 0, 0, 1, 2}, Value, hdr("__value_schema_id"), HeaderID, []string{"__value_schema_id", "header"}},
		{"key header id", []byte{0x10}, Key, hdr("__key_schema_id"), HeaderID, []string{"key:", "__key_schema_id"}},
		{"other part's header", []byte{0, 0, 0, 0, 1}, Value, hdr("__key_schema_id"), 0, nil},
		{"json", []byte(`{"a":1}`), Value, nil, NoFrame, []string{"0x7b ('{')", "plain JSON"}},
		{"binary", []byte{0x42, 1}, Value, nil, NoFrame, []string{"0x42 ('B')", "want 0x00"}},
		{"short", []byte{0, 0, 0}, Value, nil, Truncated, []string{"truncated", "3 bytes"}},
	} {
		_, _, err := ParseHeader(tc.in, tc.part, tc.header)
		if tc.kind == 0 {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		var we *Error
		if !errors.As(err, &we) || we.Kind != tc.kind {
			t.Errorf("%s: err %v, want kind %v", tc.name, err, tc.kind)
			continue
		}
		for _, w := range tc.words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", tc.name, err, w)
			}
		}
	}
	for _, tc := range []struct {
		in   []byte
		kind Kind
	}{
		{nil, Truncated},                                    // no count
		{[]byte{4, 2}, Truncated},                           // count 2, one index
		{[]byte{1}, BadIndex},                               // count -1
		{[]byte{0xfe, 0x01}, BadIndex},                      // count 127 > MaxIndexes
		{[]byte{2, 1}, BadIndex},                            // index -1
		{[]byte{2, 0x80, 0x80, 0x80, 0x80, 0x10}, BadIndex}, // index too large
		{bytes.Repeat([]byte{0xff}, 11), BadIndex},          // varint overflow
	} {
		_, _, err := ParseIndex(tc.in, Value, 9)
		var we *Error
		if !errors.As(err, &we) || we.Kind != tc.kind || we.ID != 9 || !strings.Contains(err.Error(), "schema id 9") {
			t.Errorf("ParseIndex(%x): %v, want kind %v naming schema id 9", tc.in, err, tc.kind)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 8, 2, 2, 0x0a, 0x05, 'h', 'e', 'l', 'l', 'o'})
	f.Add([]byte{0, 0, 0, 0, 4, 0x54, 0x0e})
	f.Add([]byte{1, 2, 3})
	f.Add([]byte{0, 0, 0, 0, 1, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, rest, err := ParseHeader(b, Value, nil)
		if err != nil {
			return
		}
		index, payload, err := ParseIndex(rest, Value, id)
		if err != nil {
			return
		}
		if len(index) == 0 || len(index) > MaxIndexes || len(payload) > len(rest) {
			t.Fatalf("index %v payload %d of %d", index, len(payload), len(rest))
		}
		// What was read writes back to a frame that reads the same.
		again := append(AppendIndex(AppendHeader(nil, id), index), payload...)
		id2, rest2, err := ParseHeader(again, Value, nil)
		if err != nil || id2 != id {
			t.Fatalf("re-read header: %d %v", id2, err)
		}
		index2, payload2, err := ParseIndex(rest2, Value, id2)
		if err != nil || !slices.Equal(index, index2) || !bytes.Equal(payload, payload2) {
			t.Fatalf("re-read: %v %v %v", index2, payload2, err)
		}
	})
}

// TestParseIndexShortFormAllocatesNothing: the short form (most Protobuf
// frames: the first message) reads as a shared [0], without an
// allocation per record, and an append to what it returned leaves the
// next call's [0] as it was.
func TestParseIndexShortFormAllocatesNothing(t *testing.T) {
	frame := []byte{0, 0x0a, 0x01, 'x'}
	allocs := testing.AllocsPerRun(100, func() {
		if index, _, err := ParseIndex(frame, Value, 1); err != nil || len(index) != 1 || index[0] != 0 {
			t.Fatalf("%v %v", index, err)
		}
	})
	if allocs != 0 {
		t.Errorf("ParseIndex of the short form: %v allocations, want 0", allocs)
	}
	index, _, _ := ParseIndex(frame, Value, 1)
	_ = append(index, 7)
	if again, _, _ := ParseIndex(frame, Value, 1); !slices.Equal(again, []int{0}) {
		t.Fatalf("after an append to a returned index, the short form reads as %v", again)
	}
}
