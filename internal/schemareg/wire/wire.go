// Package wire reads and writes the Confluent wire format, the framing every
// schema-registry serializer (Confluent's, Apicurio's in its Confluent mode,
// Redpanda's, Karapace's clients) puts around a record's key or value:
//
//	0x00 | schema id (4 bytes, big-endian) | [Protobuf message indexes] | payload
//
// The Protobuf message-index array names which message of the schema's file
// the payload is: a zig-zag varint count, then that many zig-zag varint
// indexes (a path through nested messages); the first top-level message,
// [0], is written as the single byte 0x00.
//
// It recognises, and refuses by name, the framings it does not read:
// Confluent's magic byte 1 (a 16-byte schema GUID instead of the id), the
// schema id carried in record headers (__value_schema_id, __key_schema_id)
// instead of in the bytes, and a value with no frame at all. It allocates
// nothing but the index slice and never reads past what it is given.
package wire

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// Magic is the first byte of a framed value.
const Magic = 0x00

// MagicGUID is the first byte of Confluent's newer framing: a 16-byte
// schema GUID follows instead of the 4-byte id.
const MagicGUID = 0x01

// HeaderLen is the length of the magic byte and the schema id.
const HeaderLen = 5

// MaxIndexes bounds the message-index array: a path through nested
// messages deeper than this is refused rather than allocated.
const MaxIndexes = 64

// maxIndex bounds one message index: a schema file with more messages at
// one level than this is not one a registry serves.
const maxIndex = 1 << 20

// Part says which part of a record a frame was read from: it picks the
// record header Confluent's header strategy would have set.
type Part int

const (
	Value Part = iota
	Key
)

// IDHeader is the record header that carries the schema id (as a GUID)
// under Confluent's header strategy instead of a prefix.
func (p Part) IDHeader() string {
	if p == Key {
		return "__key_schema_id"
	}
	return "__value_schema_id"
}

func (p Part) String() string {
	if p == Key {
		return "key"
	}
	return "value"
}

// Kind classifies a frame that cannot be read.
type Kind int

const (
	// Empty: no bytes at all.
	Empty Kind = iota + 1
	// NoFrame: the first byte is neither magic byte; the value was not
	// written by a schema-registry serializer (plain JSON, say).
	NoFrame
	// GUID: magic byte 1, Confluent's schema GUID framing.
	GUID
	// HeaderID: the schema id is in the record's headers.
	HeaderID
	// Truncated: the frame ends before its header or index array does.
	Truncated
	// BadIndex: the message-index array is not one a serializer writes.
	BadIndex
)

func (k Kind) String() string {
	switch k {
	case Empty:
		return "empty"
	case NoFrame:
		return "no_frame"
	case GUID:
		return "schema_guid"
	case HeaderID:
		return "header_schema_id"
	case Truncated:
		return "truncated"
	case BadIndex:
		return "bad_message_index"
	}
	return "unknown"
}

// Error is a frame that cannot be read. It is a property of the record's
// bytes: reading them again gives the same error.
type Error struct {
	Kind Kind
	Part Part
	// ID is the schema id when the header was read (BadIndex, Truncated
	// index), else 0.
	ID  int
	Msg string
}

func (e *Error) Error() string { return e.Part.String() + ": " + e.Msg }

// ParseHeader reads the magic byte and schema id of b, the record's key or
// value (part). header, when not nil, says whether the record carries a
// header of the given name: a record with the schema id in its headers is
// refused by name even if its bytes happen to start with 0x00. rest is what
// follows the header (the Protobuf indexes, then the payload).
func ParseHeader(b []byte, part Part, header func(name string) bool) (id int, rest []byte, err error) {
	if header != nil && header(part.IDHeader()) {
		return 0, nil, &Error{Kind: HeaderID, Part: part, Msg: fmt.Sprintf("the schema id is in the record header %s (Confluent's header strategy, SchemaIdSerializerStrategy Header), not in the bytes: wasmstream reads the prefix framing only; configure the producer's serializer to write the id as a prefix", part.IDHeader())}
	}
	if len(b) == 0 {
		return 0, nil, &Error{Kind: Empty, Part: part, Msg: "empty: no schema-registry frame (0x00 and a 4-byte schema id)"}
	}
	switch b[0] {
	case Magic:
	case MagicGUID:
		return 0, nil, &Error{Kind: GUID, Part: part, Msg: "magic byte 1: Confluent's schema GUID framing (a 16-byte GUID instead of the schema id), which wasmstream does not read; configure the producer's serializer for the id framing (magic byte 0)"}
	default:
		return 0, nil, &Error{Kind: NoFrame, Part: part, Msg: fmt.Sprintf("no schema-registry frame: the first byte is %s, want 0x00 then a 4-byte schema id%s", describeByte(b[0]), hint(b[0]))}
	}
	if len(b) < HeaderLen {
		return 0, nil, &Error{Kind: Truncated, Part: part, Msg: fmt.Sprintf("truncated frame: %d bytes, want at least %d (0x00 and a 4-byte schema id)", len(b), HeaderLen)}
	}
	return int(binary.BigEndian.Uint32(b[1:HeaderLen])), b[HeaderLen:], nil
}

// describeByte names a byte for a message.
func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("0x%02x (%s)", c, strconv.QuoteRune(rune(c)))
	}
	return fmt.Sprintf("0x%02x", c)
}

// hint says what a value that starts with c probably is.
func hint(c byte) string {
	switch c {
	case '{', '[', '"':
		return "; it looks like plain JSON: read it with the raw format"
	}
	return ""
}

// firstMessage is the index of the frames that name the first message
// (the count 0, Confluent's shorthand for [0]): most Protobuf frames.
// Shared and read only (its capacity is one: an append copies it): an
// index made per frame was an allocation of every such record's decode.
var firstMessage = []int{0}

// ParseIndex reads the Protobuf message-index array at the start of b (what
// follows the header of a Protobuf-framed value) and returns it and the
// payload after it. The short form (a single 0x00) reads as [0], a slice
// shared by every call: the index returned is read only. id is the
// schema id, for the error.
func ParseIndex(b []byte, part Part, id int) (index []int, payload []byte, err error) {
	n, b, err := varint(b, part, id, "message-index count")
	if err != nil {
		return nil, nil, err
	}
	if n == 0 {
		return firstMessage, b, nil
	}
	if n < 0 || n > MaxIndexes {
		return nil, nil, &Error{Kind: BadIndex, Part: part, ID: id, Msg: fmt.Sprintf("schema id %d: message-index count %d is not between 1 and %d: the value is not Protobuf framed by a schema-registry serializer", id, n, MaxIndexes)}
	}
	index = make([]int, n)
	for i := range index {
		var v int64
		if v, b, err = varint(b, part, id, "message index"); err != nil {
			return nil, nil, err
		}
		if v < 0 || v > maxIndex {
			return nil, nil, &Error{Kind: BadIndex, Part: part, ID: id, Msg: fmt.Sprintf("schema id %d: message index %d is out of range (want 0 to %d)", id, v, maxIndex)}
		}
		index[i] = int(v)
	}
	return index, b, nil
}

// varint reads a zig-zag varint of at most 64 bits.
func varint(b []byte, part Part, id int, what string) (int64, []byte, error) {
	u, n := binary.Uvarint(b)
	switch {
	case n == 0:
		return 0, nil, &Error{Kind: Truncated, Part: part, ID: id, Msg: fmt.Sprintf("schema id %d: truncated frame: the %s is missing (a Protobuf frame carries a message-index array after the id)", id, what)}
	case n < 0:
		return 0, nil, &Error{Kind: BadIndex, Part: part, ID: id, Msg: fmt.Sprintf("schema id %d: the %s is not a varint of at most 64 bits", id, what)}
	}
	return int64(u>>1) ^ -int64(u&1), b[n:], nil
}

// AppendHeader appends the magic byte and id to dst.
func AppendHeader(dst []byte, id int) []byte {
	return binary.BigEndian.AppendUint32(append(dst, Magic), uint32(id))
}

// AppendIndex appends the Protobuf message-index array of index to dst:
// [0] (or an empty index) in the short form, a single 0x00.
func AppendIndex(dst []byte, index []int) []byte {
	if len(index) == 0 || len(index) == 1 && index[0] == 0 {
		return append(dst, 0)
	}
	dst = appendZigzag(dst, int64(len(index)))
	for _, i := range index {
		dst = appendZigzag(dst, int64(i))
	}
	return dst
}

func appendZigzag(dst []byte, v int64) []byte {
	return binary.AppendUvarint(dst, uint64(v<<1^v>>63))
}
