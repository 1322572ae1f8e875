// Package avrobin is the Avro binary encoding's primitives, for the codecs
// `wasmstream gen avro --lang go` writes (they call nothing else): zig-zag
// varints, IEEE floats little-endian, length-prefixed bytes and strings
// (copies, or views of the bytes read for --strings view), array blocks,
// and the timestamp logical types as time.Time (or, for --timestamps
// int64, the varint as it is).
//
// Decoding reads through a Reader whose first error sticks (later reads
// return zero values), so a generated decoder checks once, at its end.
// Every length and block count is checked against the bytes left before
// anything is allocated: a hostile payload cannot make a decoder allocate
// more than its own size.
package avrobin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"
)

// AppendLong appends v as a zig-zag varint (Avro's int and long).
func AppendLong(b []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

// AppendBool appends v as one byte.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// AppendFloat appends v as 4 bytes, little-endian.
func AppendFloat(b []byte, v float32) []byte {
	return binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
}

// AppendDouble appends v as 8 bytes, little-endian.
func AppendDouble(b []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

// AppendString appends s, length-prefixed.
func AppendString(b []byte, s string) []byte {
	return append(AppendLong(b, int64(len(s))), s...)
}

// AppendBytes appends p, length-prefixed.
func AppendBytes(b []byte, p []byte) []byte {
	return append(AppendLong(b, int64(len(p))), p...)
}

// maxMillis and maxMicros bound the seconds a time may have to be written
// as an int64 of milliseconds or microseconds (the resolving path refuses
// the same times, as overflowing).
const (
	maxMillisSec = math.MaxInt64/1_000 - 1
	maxMicrosSec = math.MaxInt64/1_000_000 - 1
)

// ErrTimeRange is a time.Time outside what its timestamp's int64 holds.
var ErrTimeRange = errors.New("time overflows the timestamp's int64")

// AppendMillis appends t as a timestamp-millis.
func AppendMillis(b []byte, t time.Time) ([]byte, error) {
	if s := t.Unix(); s > maxMillisSec || s < -maxMillisSec {
		return b, fmt.Errorf("%w: %v", ErrTimeRange, t)
	}
	return AppendLong(b, t.UnixMilli()), nil
}

// AppendMicros appends t as a timestamp-micros.
func AppendMicros(b []byte, t time.Time) ([]byte, error) {
	if s := t.Unix(); s > maxMicrosSec || s < -maxMicrosSec {
		return b, fmt.Errorf("%w: %v", ErrTimeRange, t)
	}
	return AppendLong(b, t.UnixMicro()), nil
}

// ErrShort is a payload that ends inside a value.
var ErrShort = errors.New("avro: the payload ends inside a value")

// Reader reads Avro binary values from B. Its first error sticks: Err
// returns it, and every read after it returns a zero value.
type Reader struct {
	B   []byte
	err error
}

// Err returns the first error a read met, or nil.
func (r *Reader) Err() error { return r.err }

func (r *Reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.B = nil
}

// The reads of numbers are small enough for the compiler to inline into
// the generated decoders (each within its inlining budget, which a call
// of any kind exceeds, a failure's included), and a string is one call:
// in a Go guest a call costs more than the read of a small value
// (BENCHMARKS.md, "The Go guest's typed serde towards 1 µs"). A read only
// finds bytes while no read has failed (a failure empties B), so a read
// that fails inside its loop sets err without checking it first.

var (
	errLongOverflow = errors.New("avro: a varint overflows 64 bits")
	errIntOverflow  = errors.New("avro: an int varint overflows 32 bits")
	errBool         = errors.New("avro: a boolean byte is neither 0 nor 1")
)

// Long reads a zig-zag varint of at most 10 bytes.
func (r *Reader) Long() int64 {
	var u uint64
	for i, c := range r.B {
		if i == 9 && c > 1 { // the tenth byte holds the 64th bit only
			r.err = errLongOverflow
			break
		}
		u |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			r.B = r.B[i+1:]
			return int64(u>>1 ^ -(u & 1))
		}
	}
	r.fail(ErrShort) // the bytes end inside the varint (or it overflowed)
	return 0
}

// Int reads a zig-zag varint of at most 5 bytes and 32 bits (Avro's int;
// a longer encoding of a small number is refused, as the resolving path
// refuses it).
func (r *Reader) Int() int32 {
	var u uint32
	for i, c := range r.B {
		if i == 4 && c > 0x0f { // the fifth byte holds bits 28 to 31 only
			r.err = errIntOverflow
			break
		}
		u |= uint32(c&0x7f) << (7 * i)
		if c < 0x80 {
			r.B = r.B[i+1:]
			return int32(u>>1 ^ -(u & 1))
		}
	}
	r.fail(ErrShort)
	return 0
}

// Bool reads one byte, 0 or 1.
func (r *Reader) Bool() (v bool) {
	switch {
	case len(r.B) == 0:
		r.fail(ErrShort)
	case r.B[0] > 1:
		r.fail(errBool)
	default:
		v, r.B = r.B[0] == 1, r.B[1:]
	}
	return v
}

// Float reads 4 bytes, little-endian.
func (r *Reader) Float() (v float32) {
	if b := r.B; len(b) >= 4 {
		v, r.B = math.Float32frombits(binary.LittleEndian.Uint32(b)), b[4:]
	} else {
		r.fail(ErrShort)
	}
	return v
}

// Double reads 8 bytes, little-endian.
func (r *Reader) Double() (v float64) {
	if b := r.B; len(b) >= 8 {
		v, r.B = math.Float64frombits(le64(b)), b[8:]
	} else {
		r.fail(ErrShort)
	}
	return v
}

// raw reads a length-prefixed run of bytes, aliasing B.
func (r *Reader) raw() []byte {
	n := r.Long()
	switch {
	case r.err != nil:
		return nil
	case n < 0:
		r.fail(fmt.Errorf("avro: negative length %d", n))
		return nil
	case n > int64(len(r.B)):
		r.fail(ErrShort)
		return nil
	}
	p := r.B[:n:n]
	r.B = r.B[n:]
	return p
}

// String reads a length-prefixed string (a copy, in the arena: see
// arena.go).
func (r *Reader) String() string {
	p := r.raw()
	if len(p) == 0 {
		return ""
	}
	s := lockArena().string(p)
	unlockArena()
	return s
}

// StringPtr reads a length-prefixed string and returns a pointer to it
// (the string in a union with null), both in the arena.
func (r *Reader) StringPtr() *string {
	p := r.raw()
	a := lockArena()
	s := ""
	if len(p) > 0 {
		s = a.string(p)
	}
	ptr := a.pointer(s)
	unlockArena()
	return ptr
}

// StringView reads a length-prefixed string without copying it: the
// string is a view of B's bytes, which must not change while it is in
// use (a generated codec's --strings=view: docs/SDK.md, "Strings as
// views").
func (r *Reader) StringView() string {
	p := r.raw()
	return unsafe.String(unsafe.SliceData(p), len(p))
}

// StringViewPtr is StringView's string in a union with null: a pointer to
// it, in the arena.
func (r *Reader) StringViewPtr() *string {
	s := r.StringView()
	ptr := lockArena().pointer(s)
	unlockArena()
	return ptr
}

// Bytes reads length-prefixed bytes into a copy, reusing dst's capacity:
// empty bytes are an empty slice, not nil, as the resolving path reads
// them.
func (r *Reader) Bytes(dst []byte) []byte {
	if dst == nil {
		dst = []byte{}
	}
	return append(dst[:0], r.raw()...)
}

// Block reads an array block's item count: 0 ends the array. A count
// larger than the bytes left (every item the generated codecs read takes
// at least one) is an error, so no block allocates more than the payload.
func (r *Reader) Block() int {
	n := r.Long()
	if n < 0 { // a negative count is followed by the block's size in bytes
		if n == math.MinInt64 {
			r.fail(errors.New("avro: block count overflows"))
			return 0
		}
		n = -n
		r.Long()
	}
	if r.err != nil {
		return 0
	}
	if n > int64(len(r.B)) {
		r.fail(fmt.Errorf("avro: array block of %d items in %d bytes", n, len(r.B)))
		return 0
	}
	return int(n)
}

// Union reads a union's branch index (an int), which must be below n.
func (r *Reader) Union(n int) int {
	i := r.Int()
	if r.err == nil && (i < 0 || int(i) >= n) {
		r.fail(fmt.Errorf("avro: union branch %d of %d", i, n))
		return 0
	}
	return int(i)
}

// Millis reads a timestamp-millis as a UTC time.
func (r *Reader) Millis() time.Time { return time.UnixMilli(r.Long()).UTC() }

// Micros reads a timestamp-micros as a UTC time.
func (r *Reader) Micros() time.Time { return time.UnixMicro(r.Long()).UTC() }

// Done returns the bytes after the value, or the first error, naming the
// record read.
func (r *Reader) Done(record string) ([]byte, error) {
	if r.err != nil {
		return nil, r.failed(record)
	}
	return r.B, nil // small enough to be inlined: a guest pays for each call
}

func (r *Reader) failed(record string) error { return fmt.Errorf("decode %s: %w", record, r.err) }
