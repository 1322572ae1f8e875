package abi

import (
	"encoding/binary"
	"math"
)

// The schema-registry operations (OpSchemaByID, OpSchemaBySubject,
// OpSchemaRegister; ABI.md §7.3). Their requests are encoded as every
// request is (u32 little-endian lengths and integers); their results, and
// the schema a guest registers, use the schema-definition encoding of
// Redpanda's transform SDK (its redpanda_schema_registry host module), so
// that a guest library written for it decodes them unchanged:
//
//	schema definition: type varint | schema sized string | ref_count varint | refs
//	reference:         name sized string | subject sized string | version varint
//	subject schema:    id varint | version varint | schema definition
//
// where a varint is zig-zag encoded (encoding/binary's Varint) and a sized
// string is its length as a varint, then its bytes.

// SchemaType is the type of a registry schema, as the schema definition
// encodes it.
type SchemaType int32

const (
	SchemaAvro     SchemaType = 0
	SchemaProtobuf SchemaType = 1
	SchemaJSON     SchemaType = 2
)

func (t SchemaType) String() string {
	switch t {
	case SchemaAvro:
		return "AVRO"
	case SchemaProtobuf:
		return "PROTOBUF"
	case SchemaJSON:
		return "JSON"
	}
	return "unknown"
}

// MaxSchemaReferences bounds the references of one schema definition a
// decoder takes; a host's own bound (async.schema_registry.max_references)
// is at most this.
const MaxSchemaReferences = 1024

// SchemaReference is a schema a schema refers to: by its name in the
// referring schema (an import, a type name), and the subject and version
// it is registered under.
type SchemaReference struct {
	Name    string
	Subject string
	Version int
}

// SchemaDef is a schema definition: its type, its text and the schemas it
// refers to directly.
type SchemaDef struct {
	Type       SchemaType
	Schema     string
	References []SchemaReference
}

// SubjectSchema is a schema as a subject holds it: its id, its version
// under the subject, and its definition.
type SubjectSchema struct {
	ID      int
	Version int
	SchemaDef
}

// AppendSchemaDef appends the encoding of s.
func AppendSchemaDef(b []byte, s *SchemaDef) []byte {
	b = binary.AppendVarint(b, int64(s.Type))
	b = appendSized(b, s.Schema)
	b = binary.AppendVarint(b, int64(len(s.References)))
	for _, r := range s.References {
		b = appendSized(b, r.Name)
		b = appendSized(b, r.Subject)
		b = binary.AppendVarint(b, int64(r.Version))
	}
	return b
}

// DecodeSchemaDef decodes a schema definition, the whole of b.
func DecodeSchemaDef(b []byte) (SchemaDef, error) {
	d := decoder{b: b}
	s := d.schemaDef()
	return s, d.finish("schema definition")
}

// AppendSubjectSchema appends the encoding of s.
func AppendSubjectSchema(b []byte, s *SubjectSchema) []byte {
	b = binary.AppendVarint(b, int64(s.ID))
	b = binary.AppendVarint(b, int64(s.Version))
	return AppendSchemaDef(b, &s.SchemaDef)
}

// DecodeSubjectSchema decodes a subject schema, the whole of b.
func DecodeSubjectSchema(b []byte) (SubjectSchema, error) {
	d := decoder{b: b}
	var s SubjectSchema
	s.ID = d.varint32()
	s.Version = d.varint32()
	s.SchemaDef = d.schemaDef()
	return s, d.finish("subject schema")
}

// AppendSchemaByID appends an OpSchemaByID request: the id, i32.
func AppendSchemaByID(b []byte, id int) []byte {
	return binary.LittleEndian.AppendUint32(b, uint32(int32(id)))
}

// DecodeSchemaByID decodes an OpSchemaByID request.
func DecodeSchemaByID(b []byte) (int, error) {
	d := decoder{b: b}
	id := int(int32(d.u32()))
	return id, d.finish("schema by id request")
}

// AppendSchemaBySubject appends an OpSchemaBySubject request: the subject,
// a string, and the version, i32 (-1: the latest).
func AppendSchemaBySubject(b []byte, subject string, version int) []byte {
	b = appendString(b, subject)
	return binary.LittleEndian.AppendUint32(b, uint32(int32(version)))
}

// DecodeSchemaBySubject decodes an OpSchemaBySubject request.
func DecodeSchemaBySubject(b []byte) (subject string, version int, err error) {
	d := decoder{b: b}
	subject = d.str()
	version = int(int32(d.u32()))
	return subject, version, d.finish("schema by subject request")
}

// AppendSchemaRegister appends an OpSchemaRegister request: the subject, a
// string, then the schema definition.
func AppendSchemaRegister(b []byte, subject string, s *SchemaDef) []byte {
	return AppendSchemaDef(appendString(b, subject), s)
}

// DecodeSchemaRegister decodes an OpSchemaRegister request.
func DecodeSchemaRegister(b []byte) (string, SchemaDef, error) {
	d := decoder{b: b}
	subject := d.str()
	s := d.schemaDef()
	return subject, s, d.finish("schema register request")
}

// AppendSchemaRegistered appends the payload of a completed
// OpSchemaRegister: the schema's id and its version under the subject,
// varints (the version 0 when the registry did not say).
func AppendSchemaRegistered(b []byte, id, version int) []byte {
	b = binary.AppendVarint(b, int64(id))
	return binary.AppendVarint(b, int64(version))
}

// DecodeSchemaRegistered decodes the payload of a completed
// OpSchemaRegister.
func DecodeSchemaRegistered(b []byte) (id, version int, err error) {
	d := decoder{b: b}
	id = d.varint32()
	version = d.varint32()
	return id, version, d.finish("schema registered result")
}

func appendSized(b []byte, s string) []byte {
	b = binary.AppendVarint(b, int64(len(s)))
	return append(b, s...)
}

// varint32 reads a zig-zag varint that fits an int32.
func (d *decoder) varint32() int {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	switch {
	case n == 0:
		d.fail("need a varint, have %d bytes", len(d.b)-d.off)
		return 0
	case n < 0 || v < math.MinInt32 || v > math.MaxInt32:
		d.fail("varint out of range")
		return 0
	}
	d.off += n
	return int(v)
}

// sized reads a sized string.
func (d *decoder) sized() string {
	n := d.varint32()
	if n < 0 {
		d.fail("string length %d", n)
		return ""
	}
	if !d.need(n) {
		return ""
	}
	s := string(d.b[d.off : d.off+n])
	d.off += n
	return s
}

func (d *decoder) schemaDef() SchemaDef {
	var s SchemaDef
	s.Type = SchemaType(d.varint32())
	s.Schema = d.sized()
	n := d.varint32()
	if d.err == nil && (n < 0 || n > MaxSchemaReferences) {
		d.fail("%d references (at most %d)", n, MaxSchemaReferences)
	}
	if d.err != nil {
		return s
	}
	// Each reference takes at least 3 bytes: the count cannot reserve
	// more than the input holds.
	s.References = make([]SchemaReference, 0, min(n, (len(d.b)-d.off)/3))
	for range n {
		r := SchemaReference{Name: d.sized(), Subject: d.sized(), Version: d.varint32()}
		if d.err != nil {
			return s
		}
		s.References = append(s.References, r)
	}
	return s
}
