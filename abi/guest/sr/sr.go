// Package sr is a typed serde for processors that read and write records
// framed by a schema registry (the Confluent wire format: 0x00, the
// schema's id as 4 big-endian bytes, then the Avro payload): Decode reads
// a framed value into the processor's own struct, Encode writes one, both
// with a native Avro codec (github.com/twmb/avro) and no JSON in between.
//
//	type Order struct {
//		ID       int64     `avro:"id"`
//		PlacedAt time.Time `avro:"placed_at"` // timestamp-millis
//		Coupon   *string   `avro:"coupon"`    // ["null", "string"]
//		Items    []string  `avro:"items"`
//	}
//
//	func init() {
//		sr.Process(func(r *guest.Record, out guest.Emitter) error {
//			var o Order
//			if err := sr.Decode(r.Value, &o); err != nil {
//				return err
//			}
//			v, err := sr.Encode("orders-out-value", &o)
//			if err != nil {
//				return err
//			}
//			return out.Emit(guest.Output{Key: r.Key, Value: v})
//		})
//	}
//
// Schemas come from the host's registry through the asynchronous schema
// operations (ABI.md §7.3; the pipeline grants them with
// async.schema_registry.enabled), and a Go guest cannot block on one: a
// Decode or Encode whose schema the guest does not hold yet fails with a
// *MissingError. Process (or Resolve, in a continuation of the
// processor's own operations) answers it: it looks the schema up, compiles
// and keeps it, and runs the processor again on the same record, whose
// outputs of the first run are dropped. Each schema is looked up once per
// instance (a subject's latest again after RefreshPeriod); every other
// record decodes and encodes without leaving the guest.
//
// The package keeps its schemas in package state, as the guest SDK keeps
// its records: a guest runs one call at a time, and none of this is safe
// for concurrent use (on the host side, in tests, call it from one
// goroutine).
//
// A struct generated from its schema by `wasmstream gen avro --lang go
// SCHEMA.avsc` has a codec of its own (Codec): Decode and Encode use it,
// with no reflection, for a record whose schema is the generated one (the
// same Parsing Canonical Form fingerprint), and the resolving path for
// any other, so a schema that evolved is still read and written.
//
// Avro only: a schema of another type, or one with registry references
// (named types registered under other subjects), fails the record
// terminally, naming the schema.
package sr

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"time"
	"unsafe"

	"github.com/twmb/avro"

	"github.com/wasmstream/wasmstream/abi/guest"
)

// RefreshPeriod is how long Encode keeps a subject's latest schema before
// it asks again (the host's own schema_registry.refresh_period default):
// a new version registered under the subject is written with from then on.
// A refresh the registry does not answer keeps the schema in hand.
const RefreshPeriod = 5 * time.Minute

// refreshEvery is how many encodes with a subject's latest pass between
// two readings of the clock: a reading costs a Go guest two host calls.
const refreshEvery = 256

// MaxSchemas bounds the compiled schemas kept, by id and by subject alike:
// past it the cache starts over (the ids a hostile producer could frame
// records with are bounded by the registry's, but the guest's memory is
// not a place to find that out).
const MaxSchemas = 256

// maxRuns bounds how often one record's processor is run: each run past
// the first follows a schema lookup, and a record needs few schemas.
const maxRuns = 8

// MissingError is a Decode or Encode whose schema the guest does not hold
// yet: Process and Resolve look it up and run the processor again.
type MissingError struct {
	ID      int    // the schema id a frame named (Decode, EncodeID)
	Subject string // or the subject whose latest Encode writes with
	stale   bool   // a subject's latest due for a refresh, still usable
}

func (e *MissingError) Error() string {
	if e.Subject != "" {
		return fmt.Sprintf("sr: the latest schema of subject %q is not looked up yet (sr.Process or sr.Resolve looks it up)", e.Subject)
	}
	return fmt.Sprintf("sr: schema %d is not looked up yet (sr.Process or sr.Resolve looks it up)", e.ID)
}

// Codec is a type with an Avro codec of its own, generated from its
// schema by `wasmstream gen avro --lang go` (no reflection, no values in
// between). Decode, Encode and their kin use it when the record's schema
// (the frame's on Decode, the subject's on Encode) has the fingerprint
// the codec was generated for, and the resolving path (twmb/avro, by the
// struct's avro tags) otherwise: a schema that evolved past the generated
// one is still read and written, only slower.
type Codec interface {
	// AvroFingerprint is the CRC-64-AVRO fingerprint of the Parsing
	// Canonical Form of the schema the codec was generated from.
	AvroFingerprint() uint64
	// AppendAvro appends the value's Avro binary encoding to b.
	AppendAvro(b []byte) ([]byte, error)
	// DecodeAvro decodes the value from the start of b and returns the
	// bytes after it.
	DecodeAvro(b []byte) ([]byte, error)
}

// compiled is a schema as the instance holds it: compiled for the
// resolving path, and its fingerprint, which a Codec is compared with
// (computed once per schema, so a record pays one comparison).
type compiled struct {
	*avro.Schema
	fingerprint uint64
}

// subjectSchema is a subject's latest schema as Encode writes with it.
type subjectSchema struct {
	id      int
	schema  *compiled
	fetched time.Time
	uses    int // encodes since the clock was last read
}

// The schemas this instance holds.
var (
	byID      = map[int]*compiled{}
	bySubject = map[string]*subjectSchema{}
)

// The last schema Decode found by id and the last subject AppendEncode
// found, checked before the maps: a processor reads one schema and
// writes one subject record after record, and a map lookup (hashing its
// key without the CPU's hash instructions) costs a Go guest more than
// the generated codec's decode of a small record. keep, lookup and Reset
// drop them with the entries they mirror.
var (
	lastID      int
	lastByID    *compiled
	lastSubject *subjectSchema
	lastSubjKey string
)

// Reset forgets every schema the instance holds (a processor's tests
// call it with guest.ResetTestSchemas).
func Reset() {
	clear(byID)
	clear(bySubject)
	forgetLast()
}

// forgetLast drops the last-found entries.
func forgetLast() {
	lastID, lastByID, lastSubject, lastSubjKey = 0, nil, nil, ""
	hotDecode, hotEncode = hotCodec{}, hotCodec{}
}

// schemaByID is byID[id], through the last one found.
func schemaByID(id int) *compiled {
	if lastByID != nil && lastID == id {
		return lastByID
	}
	s := byID[id]
	if s != nil {
		lastID, lastByID = id, s
	}
	return s
}

// subjectLatest is bySubject[subject], through the last one found.
func subjectLatest(subject string) *subjectSchema {
	if lastSubject != nil && lastSubjKey == subject {
		return lastSubject
	}
	ss := bySubject[subject]
	if ss != nil {
		lastSubjKey, lastSubject = subject, ss
	}
	return ss
}

// ErrNotFramed is the cause of a Decode of a value without a Confluent
// frame: null, shorter than 5 bytes, or with another first byte.
var ErrNotFramed = errors.New("sr: not framed (a Confluent frame is 0x00, a 4-byte big-endian schema id, then the payload)")

// SchemaID returns the schema id of value's frame, and its payload.
func SchemaID(value []byte) (id int, payload []byte, err error) {
	switch {
	case value == nil:
		return 0, nil, fmt.Errorf("%w: the value is null", ErrNotFramed)
	case len(value) < 5:
		return 0, nil, fmt.Errorf("%w: the value has %d bytes", ErrNotFramed, len(value))
	case value[0] != 0:
		return 0, nil, fmt.Errorf("%w: the value starts with 0x%02x", ErrNotFramed, value[0])
	}
	return int(int32(binary.BigEndian.Uint32(value[1:5]))), value[5:], nil
}

// Decode decodes the framed value into v, a pointer (to a struct whose
// fields name the schema's with `avro:"name"` tags, or to any), with the
// schema the frame names: fields v does not have are skipped, and a null
// union branch leaves the field's zero value (use a pointer to tell null
// from zero). v keeps nothing of what it held: a struct is zeroed first,
// so a field the writer's schema lacks is zero, not an earlier record's
// (a processor can decode into the same variable record after record).
// A value that is not framed, or does not decode, is a guest.Terminal
// error: retrying the record cannot change its bytes. A v that is a Codec
// generated for the frame's schema decodes with its own codec, which sets
// every field it has itself (and reuses a slice's array).
func Decode(value []byte, v any) error {
	// The hot path, a record framed with the last schema found and read
	// into a Codec generated for it, goes straight to the codec: no other
	// call, no error built (a guest pays for every call; BENCHMARKS.md,
	// "The Go guest's typed serde towards 1 µs"). Anything else, a decode
	// that fails included, takes decode, which says why.
	if s := lastByID; s != nil && len(value) >= 5 && value[0] == 0 && int(int32(binary.BigEndian.Uint32(value[1:5]))) == lastID {
		if c := hotDecode.codec(v, s); c != nil {
			if rest, err := c.DecodeAvro(value[5:]); err == nil && len(rest) == 0 {
				return nil
			}
		}
	}
	return decode(value, v)
}

// hotCodec is the last value the hot path of Decode (or AppendEncode) met
// and what it found of it: a processor decodes into the same value
// record after record, and knowing it again costs a comparison of two
// words where its Codec assertion and fingerprint cost two calls.
type hotCodec struct {
	v [2]unsafe.Pointer // the value's interface words: its type and its pointer
	c Codec             // it as a Codec, or nil
	s *compiled         // the schema c's fingerprint was compared with
}

var hotDecode, hotEncode hotCodec

// codec returns v as a Codec generated for s, or nil. (Small enough to be
// inlined; learn is the rest.)
func (h *hotCodec) codec(v any, s *compiled) Codec {
	if *(*[2]unsafe.Pointer)(unsafe.Pointer(&v)) == h.v && s == h.s {
		return h.c
	}
	return h.learn(v, s)
}

// learn finds v as a Codec generated for s, or nil, and keeps what it
// found.
func (h *hotCodec) learn(v any, s *compiled) Codec {
	w := *(*[2]unsafe.Pointer)(unsafe.Pointer(&v))
	c, ok := v.(Codec)
	if !ok || c.AvroFingerprint() != s.fingerprint {
		c = nil
	}
	*h = hotCodec{v: w, c: c, s: s}
	return c
}

// decode is Decode's general path.
func decode(value []byte, v any) error {
	id, payload, err := SchemaID(value)
	if err != nil {
		return guest.Terminal(err)
	}
	s := schemaByID(id)
	if s == nil {
		return &MissingError{ID: id}
	}
	var rest []byte
	if c, ok := v.(Codec); ok && c.AvroFingerprint() == s.fingerprint {
		rest, err = c.DecodeAvro(payload)
	} else {
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().Kind() == reflect.Struct {
			rv.Elem().SetZero()
		}
		rest, err = s.Decode(payload, v)
	}
	if err != nil {
		return guest.Terminal(fmt.Errorf("sr: decode with schema %d: %w", id, err))
	}
	if len(rest) > 0 {
		return guest.Terminal(fmt.Errorf("sr: decode with schema %d: %d bytes after the value", id, len(rest)))
	}
	return nil
}

// Encode returns v encoded with the latest schema of subject, framed.
func Encode(subject string, v any) ([]byte, error) {
	return AppendEncode(nil, subject, v)
}

// AppendEncode appends v encoded with the latest schema of subject,
// framed, to b: with a buffer reused from record to record, an encode
// allocates nothing of its own. A v that does not fit the schema is a
// guest.Terminal error naming the field.
func AppendEncode(b []byte, subject string, v any) ([]byte, error) {
	// The hot path, as Decode's: the last subject found, not due for its
	// clock reading, and a Codec generated for its schema.
	if ss := lastSubject; ss != nil && ss.uses < refreshEvery-1 && sameString(lastSubjKey, subject) {
		if c := hotEncode.codec(v, ss.schema); c != nil {
			n := len(b)
			b = binary.BigEndian.AppendUint32(append(b, 0), uint32(int32(ss.id)))
			if out, err := c.AppendAvro(b); err == nil {
				ss.uses++
				return out, nil
			}
			b = b[:n]
		}
	}
	return appendEncodeSubject(b, subject, v)
}

// sameString is a == b without a call when both are the same string (a
// processor passes the same variable record after record; == compares
// the bytes in a runtime call).
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// appendEncodeSubject is AppendEncode's general path.
func appendEncodeSubject(b []byte, subject string, v any) ([]byte, error) {
	ss := subjectLatest(subject)
	if ss == nil {
		return b, &MissingError{Subject: subject}
	}
	if ss.uses++; ss.uses >= refreshEvery {
		ss.uses = 0
		if time.Since(ss.fetched) >= RefreshPeriod {
			return b, &MissingError{Subject: subject, stale: true}
		}
	}
	return appendEncode(b, ss.id, ss.schema, v)
}

// AppendEncodeID appends v encoded with schema id, framed, to b.
func AppendEncodeID(b []byte, id int, v any) ([]byte, error) {
	s := schemaByID(id)
	if s == nil {
		return b, &MissingError{ID: id}
	}
	return appendEncode(b, id, s, v)
}

func appendEncode(b []byte, id int, s *compiled, v any) ([]byte, error) {
	n := len(b)
	b = append(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(int32(id)))
	var out []byte
	var err error
	if c, ok := v.(Codec); ok && c.AvroFingerprint() == s.fingerprint {
		out, err = c.AppendAvro(b)
	} else {
		out, err = s.AppendEncode(b, v)
	}
	if err != nil {
		return b[:n], guest.Terminal(fmt.Errorf("sr: encode with schema %d: %w", id, err))
	}
	return out, nil
}

// compile compiles the schema registered as id.
func compile(id int, s *guest.Schema) (*compiled, error) {
	switch {
	case s.Type != guest.SchemaAvro:
		return nil, fmt.Errorf("sr: schema %d is %s: sr reads Avro only", id, s.Type)
	case len(s.References) > 0:
		return nil, fmt.Errorf("sr: schema %d has %d registry references (the first %q, subject %q): sr does not resolve references", id, len(s.References), s.References[0].Name, s.References[0].Subject)
	}
	c, err := avro.Parse(s.Schema)
	if err != nil {
		return nil, fmt.Errorf("sr: schema %d does not compile: %w", id, err)
	}
	h := avro.NewRabin()
	h.Write(c.Canonical())
	return &compiled{Schema: c, fingerprint: h.Sum64()}, nil
}

// keep adds a compiled schema by id, starting the cache over at MaxSchemas.
func keep(id int, s *compiled) {
	if len(byID) >= MaxSchemas {
		clear(byID)
	}
	byID[id] = s
	forgetLast()
}
