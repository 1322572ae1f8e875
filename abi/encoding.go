package abi

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Header is a Kafka record header. A nil Value is a null header value.
type Header struct {
	Key   string
	Value []byte
}

// Record is the decoded form of the record a guest receives. Byte slices
// returned by DecodeRecord alias the input buffer.
type Record struct {
	Offset    int64
	Timestamp int64 // milliseconds since the Unix epoch
	Partition int32
	Attempt   uint32 // 1 for the first attempt
	Topic     string
	Key       []byte // nil: null key
	Value     []byte // nil: null value
	Headers   []Header
}

// Output is the decoded form of what a guest emits. Topic "" means the
// pipeline's output topic; Partition -1 lets the host's partitioner choose.
type Output struct {
	Topic     string
	Partition int32
	Key       []byte
	Value     []byte
	Headers   []Header
}

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed encoding")

const (
	recordFixed = 8 + 8 + 4 + 4 // offset, timestamp, partition, attempt
	outputFixed = 4             // partition (after the topic)
)

// RecordSize is the exact length of the encoding of r.
func RecordSize(r *Record) int {
	n := recordFixed + 4 + len(r.Topic) + 4 + len(r.Key) + 4 + len(r.Value) + 4
	for i := range r.Headers {
		n += 4 + len(r.Headers[i].Key) + 4 + len(r.Headers[i].Value)
	}
	return n
}

// AppendRecord appends the encoding of r to b.
func AppendRecord(b []byte, r *Record) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(r.Offset))
	b = binary.LittleEndian.AppendUint64(b, uint64(r.Timestamp))
	b = binary.LittleEndian.AppendUint32(b, uint32(r.Partition))
	b = binary.LittleEndian.AppendUint32(b, r.Attempt)
	b = appendString(b, r.Topic)
	b = appendBytes(b, r.Key)
	b = appendBytes(b, r.Value)
	return appendHeaders(b, r.Headers)
}

// DecodeRecord decodes a record encoding. The returned slices alias b.
func DecodeRecord(b []byte) (Record, error) {
	var r Record
	err := DecodeRecordInto(b, &r)
	return r, err
}

// DecodeRecordInto decodes a record encoding into r, overwriting every
// field. The slices alias b. A topic equal to r.Topic keeps r.Topic's
// string, r.Headers' array is reused when it has room, and a header key
// equal to the one at its place in r.Headers keeps its string: a guest
// decoding one record after another from the same producer allocates
// nothing for them (so r.Headers must not be kept past the next call).
func DecodeRecordInto(b []byte, r *Record) error {
	if decodeRecordFast(b, r) {
		return nil
	}
	d := decoder{b: b}
	r.Offset = int64(d.u64())
	r.Timestamp = int64(d.u64())
	r.Partition = int32(d.u32())
	r.Attempt = d.u32()
	r.Topic = d.strReuse(r.Topic)
	r.Key = d.bytes()
	r.Value = d.bytes()
	r.Headers = d.headersInto(r.Headers)
	return d.finish("record")
}

// decodeRecordFast is DecodeRecordInto for a well-formed record without
// headers, the common shape, in one function: in a Go guest every call is
// dear (the decoder's methods cannot be inlined), and this one is made for
// every record. It reports false, having changed nothing, for anything
// else: the decoder then decodes it, or says what is wrong with it.
func decodeRecordFast(b []byte, r *Record) bool {
	const topicAt = recordFixed + 4
	if len(b) < topicAt {
		return false
	}
	le := binary.LittleEndian
	i, n := topicAt, int(le.Uint32(b[recordFixed:]))
	if n > len(b)-i {
		return false
	}
	topic := b[i : i+n]
	i += n
	var kv [2][]byte // the key, then the value: nullable bytes
	for k := range kv {
		if len(b)-i < 4 {
			return false
		}
		n := int(int32(le.Uint32(b[i:])))
		i += 4
		if n == -1 {
			continue // null
		}
		if uint(n) > uint(len(b)-i) { // a negative n is huge as a uint
			return false
		}
		kv[k] = b[i : i+n : i+n]
		i += n
	}
	if len(b)-i != 4 || le.Uint32(b[i:]) != 0 { // no headers, nothing after them
		return false
	}
	r.Offset = int64(le.Uint64(b))
	r.Timestamp = int64(le.Uint64(b[8:]))
	r.Partition = int32(le.Uint32(b[16:]))
	r.Attempt = le.Uint32(b[20:])
	if string(topic) != r.Topic {
		r.Topic = string(topic)
	}
	r.Key, r.Value, r.Headers = kv[0], kv[1], nil
	return true
}

// AppendOutput appends the encoding of o to b.
func AppendOutput(b []byte, o *Output) []byte {
	b = appendString(b, o.Topic)
	b = binary.LittleEndian.AppendUint32(b, uint32(o.Partition))
	b = appendBytes(b, o.Key)
	b = appendBytes(b, o.Value)
	return appendHeaders(b, o.Headers)
}

// DecodeOutput decodes an output encoding. The returned slices alias b.
func DecodeOutput(b []byte) (Output, error) {
	var o Output
	if decodeOutputFast(b, &o) {
		return o, nil
	}
	d := decoder{b: b}
	o.Topic = d.str()
	o.Partition = int32(d.u32())
	o.Key = d.bytes()
	o.Value = d.bytes()
	o.Headers = d.headers(MaxHeaders)
	if d.err == nil && o.Partition < -1 {
		d.fail("partition %d (want -1 or >= 0)", o.Partition)
	}
	return o, d.finish("output")
}

// decodeOutputFast is DecodeOutput for a well-formed output without
// headers, the common shape, in one function (decodeRecordFast's reason:
// the host decodes every output a guest hands over). It reports false,
// having changed nothing, for anything else: the decoder then decodes it,
// or says what is wrong with it. Its key, value and header count are read
// as decodeRecordFast reads them, written out in each: shared, they would
// cost a Go guest a call a record (the function would not inline).
func decodeOutputFast(b []byte, o *Output) bool {
	le := binary.LittleEndian
	if len(b) < 4 {
		return false
	}
	i, n := 4, int(le.Uint32(b))
	if n > len(b)-i {
		return false
	}
	topic := b[i : i+n]
	i += n
	if len(b)-i < 4 {
		return false
	}
	partition := int32(le.Uint32(b[i:]))
	i += 4
	if partition < -1 {
		return false
	}
	var kv [2][]byte // the key, then the value: nullable bytes
	for k := range kv {
		if len(b)-i < 4 {
			return false
		}
		n := int(int32(le.Uint32(b[i:])))
		i += 4
		if n == -1 {
			continue // null
		}
		if uint(n) > uint(len(b)-i) { // a negative n is huge as a uint
			return false
		}
		kv[k] = b[i : i+n : i+n]
		i += n
	}
	if len(b)-i != 4 || le.Uint32(b[i:]) != 0 { // no headers, nothing after them
		return false
	}
	*o = Output{Topic: string(topic), Partition: partition, Key: kv[0], Value: kv[1]}
	return true
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

func appendBytes(b []byte, v []byte) []byte {
	if v == nil {
		return binary.LittleEndian.AppendUint32(b, math.MaxUint32) // -1
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	return append(b, v...)
}

func appendHeaders(b []byte, hs []Header) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(hs)))
	for i := range hs {
		b = appendString(b, hs[i].Key)
		b = appendBytes(b, hs[i].Value)
	}
	return b
}

type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: at byte %d: %s", ErrMalformed, d.off, fmt.Sprintf(format, args...))
	}
}

// need reports whether n more bytes are there; small enough to inline, so
// that reading a field costs a compare (it matters most in guests, where
// every call is dear).
func (d *decoder) need(n int) bool {
	if d.err == nil && uint(n) <= uint(len(d.b)-d.off) { // a negative n is huge as a uint
		return true
	}
	d.short(n)
	return false
}

//go:noinline
func (d *decoder) short(n int) {
	if d.err == nil {
		d.fail("need %d bytes, have %d", n, len(d.b)-d.off)
	}
}

func (d *decoder) u32() uint32 {
	if !d.need(4) {
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b[d.off:])
	d.off += 4
	return v
}

func (d *decoder) u64() uint64 {
	if !d.need(8) {
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b[d.off:])
	d.off += 8
	return v
}

func (d *decoder) str() string {
	n := d.u32()
	if n > math.MaxInt32 {
		d.fail("string length %d", n)
		return ""
	}
	if !d.need(int(n)) {
		return ""
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}

// strReuse is str, returning prev when the string read equals it.
func (d *decoder) strReuse(prev string) string {
	n := d.u32()
	if n > math.MaxInt32 {
		d.fail("string length %d", n)
		return ""
	}
	if !d.need(int(n)) {
		return ""
	}
	b := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	if string(b) == prev {
		return prev
	}
	return string(b)
}

func (d *decoder) bytes() []byte {
	n := int32(d.u32())
	if d.err != nil {
		return nil
	}
	if n == -1 {
		return nil
	}
	if n < -1 {
		d.fail("length %d", n)
		return nil
	}
	return d.take(int(n))
}

// key reads a string's bytes (u32 length, then the bytes), aliasing the
// input: a state key, prefix or cursor.
func (d *decoder) key() []byte {
	n := d.u32()
	if n > math.MaxInt32 {
		d.fail("length %d", n)
		return nil
	}
	return d.take(int(n))
}

// take returns the next n bytes, aliasing the input (capacity capped, so an
// append cannot write over what follows).
func (d *decoder) take(n int) []byte {
	if !d.need(n) {
		return nil
	}
	v := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return v
}

// headersInto reads a record's headers into the array of hs, reused when
// it has room, each key's string reused when it equals the key at the
// same place before (records from one producer carry the same keys).
func (d *decoder) headersInto(hs []Header) []Header {
	return d.headerList(hs, math.MaxUint32, false)
}

// headers reads a header count of at most max and the headers.
func (d *decoder) headers(max uint32) []Header {
	return d.headerList(nil, max, false)
}

// headerList reads a header count of at most max and the headers, into
// the array of hs when it has room: each name one of the common HTTP
// response headers' strings when httpNames (httpName), else the name at the
// same place before when it is the same (strReuse). The one reader of a
// header list: records', outputs', HTTP requests' and responses'. (A flag,
// not a func value: calling through one would move d to the heap.)
func (d *decoder) headerList(hs []Header, max uint32, httpNames bool) []Header {
	n := d.u32()
	if d.err != nil || n == 0 {
		return nil
	}
	if n > max {
		d.fail("%d headers (at most %d)", n, max)
		return nil
	}
	// Each header takes at least 8 bytes: refuse counts the buffer cannot hold
	// before allocating for them.
	if uint64(n)*8 > uint64(len(d.b)-d.off) {
		d.fail("header count %d exceeds remaining %d bytes", n, len(d.b)-d.off)
		return nil
	}
	if cap(hs) < int(n) {
		hs = make([]Header, n)
	}
	hs = hs[:n]
	for i := range hs {
		if httpNames {
			hs[i].Key = d.httpName()
		} else {
			hs[i].Key = d.strReuse(hs[i].Key)
		}
		hs[i].Value = d.bytes()
	}
	if d.err != nil {
		return nil
	}
	return hs
}

func (d *decoder) finish(what string) error {
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d trailing bytes after %s", len(d.b)-d.off, what)
	}
	if d.err != nil {
		return fmt.Errorf("abi: decode %s: %w", what, d.err)
	}
	return nil
}
