package abi

import (
	"bytes"
	"reflect"
	"testing"
)

// The schema definition is Redpanda's encoding byte for byte: zig-zag
// varints, strings sized by one.
func TestSchemaDefBytes(t *testing.T) {
	def := SchemaDef{Type: SchemaProtobuf, Schema: "ab", References: []SchemaReference{{Name: "n", Subject: "s", Version: 3}}}
	got := AppendSchemaDef(nil, &def)
	want := []byte{0x02, 0x04, 'a', 'b', 0x02, 0x02, 'n', 0x02, 's', 0x06}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded % x, want % x", got, want)
	}
	back, err := DecodeSchemaDef(got)
	if err != nil || !reflect.DeepEqual(back, def) {
		t.Fatalf("decoded %+v %v", back, err)
	}
	ss := SubjectSchema{ID: 7, Version: -1, SchemaDef: SchemaDef{Type: SchemaAvro, Schema: `"string"`}}
	b := AppendSubjectSchema(nil, &ss)
	if b[0] != 14 || b[1] != 1 {
		t.Fatalf("subject schema starts % x, want id 7 (0e) and version -1 (01)", b[:2])
	}
	gotSS, err := DecodeSubjectSchema(b)
	if err != nil || gotSS.ID != 7 || gotSS.Version != -1 || gotSS.Schema != `"string"` || len(gotSS.References) != 0 {
		t.Fatalf("decoded %+v %v", gotSS, err)
	}
}

// The requests and the registration's result come back as they went.
func TestSchemaRequests(t *testing.T) {
	if id, err := DecodeSchemaByID(AppendSchemaByID(nil, 42)); err != nil || id != 42 {
		t.Fatalf("by id: %d %v", id, err)
	}
	if s, v, err := DecodeSchemaBySubject(AppendSchemaBySubject(nil, "orders-value", -1)); err != nil || s != "orders-value" || v != -1 {
		t.Fatalf("by subject: %q %d %v", s, v, err)
	}
	def := SchemaDef{Type: SchemaJSON, Schema: `{"type":"object"}`, References: []SchemaReference{{Name: "a.json", Subject: "a", Version: 1}}}
	s, got, err := DecodeSchemaRegister(AppendSchemaRegister(nil, "x-value", &def))
	if err != nil || s != "x-value" || !reflect.DeepEqual(got, def) {
		t.Fatalf("register: %q %+v %v", s, got, err)
	}
	if id, v, err := DecodeSchemaRegistered(AppendSchemaRegistered(nil, 9, 2)); err != nil || id != 9 || v != 2 {
		t.Fatalf("registered: %d %d %v", id, v, err)
	}
}

// A malformed definition is an error, never a panic or a large
// allocation: truncated, a negative length, a reference count over the
// bound or over what the bytes could hold, trailing bytes.
func TestSchemaDefMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":          {},
		"truncated text": {0x00, 0x08, 'a'},
		"negative size":  {0x00, 0x01},
		"too many refs":  {0x00, 0x00, 0xfe, 0xff, 0x03},
		"refs missing":   {0x00, 0x00, 0x7e},
		"trailing":       {0x00, 0x00, 0x00, 0x00},
		"huge varint":    {0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		if _, err := DecodeSchemaDef(b); err == nil {
			t.Errorf("%s: decoded % x", name, b)
		}
	}
}

func FuzzDecodeSchemaDef(f *testing.F) {
	f.Add(AppendSchemaDef(nil, &SchemaDef{Type: SchemaProtobuf, Schema: "syntax", References: []SchemaReference{{Name: "n", Subject: "s", Version: 3}}}))
	f.Add(AppendSubjectSchema(nil, &SubjectSchema{ID: 1, Version: 2, SchemaDef: SchemaDef{Schema: "x"}}))
	f.Add([]byte{0x00, 0x00, 0x7e})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSchemaDef(b)
		if err != nil {
			DecodeSubjectSchema(b)
			return
		}
		if again := AppendSchemaDef(nil, &s); !bytes.Equal(again, b) {
			// Varints have one shortest form; a decoder that accepted a
			// longer one would re-encode to other bytes. Both are fine,
			// but the decoded value must encode and decode to itself.
			if s2, err := DecodeSchemaDef(again); err != nil || !reflect.DeepEqual(s2, s) {
				t.Fatalf("%+v re-encoded to % x, decoded %+v %v", s, again, s2, err)
			}
		}
	})
}
