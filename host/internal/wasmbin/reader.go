package wasmbin

import "fmt"

// Reader reads a byte range of a module: Buf[Pos:End], Buf being the whole
// module, so that Pos is a module offset and errors name it. Its integer
// readers accept exactly the encodings wazero v1.12's decoders accept
// (internal/leb128): an integer ends at the first byte without the
// continuation bit, within 5 bytes for 32 (and 33) bits and 10 for 64.
// Instructions read with it are therefore split at the same boundaries as
// wazero splits them (package meter relies on this). Every error is an
// *Error.
type Reader struct {
	Buf []byte
	Pos int
	End int
}

// Fail returns an *Error at the reader's position.
func (r *Reader) Fail(format string, args ...any) error {
	return &Error{Offset: r.Pos, Msg: fmt.Sprintf(format, args...)}
}

// Left is the number of bytes left in the range.
func (r *Reader) Left() int { return r.End - r.Pos }

// Byte reads one byte.
func (r *Reader) Byte() (byte, error) {
	if r.Pos >= r.End {
		return 0, r.Fail("unexpected end")
	}
	c := r.Buf[r.Pos]
	r.Pos++
	return c, nil
}

// Skip skips n bytes.
func (r *Reader) Skip(n uint64) error {
	if n > uint64(r.Left()) {
		return r.Fail("%d bytes declared, %d left", n, r.Left())
	}
	r.Pos += int(n)
	return nil
}

// U32 reads an unsigned LEB128 of at most 32 bits (5 bytes).
func (r *Reader) U32() (uint32, error) {
	var v uint64
	for i := 0; i < 5; i++ {
		c, err := r.Byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if v > 1<<32-1 {
				return 0, r.Fail("integer overflows 32 bits")
			}
			return uint32(v), nil
		}
	}
	return 0, r.Fail("integer overflows 32 bits")
}

// SkipSigned skips a signed LEB128 of at most maxBytes bytes.
func (r *Reader) SkipSigned(maxBytes int) error {
	for i := 0; i < maxBytes; i++ {
		c, err := r.Byte()
		if err != nil {
			return err
		}
		if c&0x80 == 0 {
			return nil
		}
	}
	return r.Fail("integer too long")
}

// S33 reads a signed LEB128 of at most 33 bits (5 bytes), as block types
// and heap types are encoded.
func (r *Reader) S33() (int64, error) {
	var v int64
	var shift uint
	for i := 0; i < 5; i++ {
		c, err := r.Byte()
		if err != nil {
			return 0, err
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			if v < -(1<<32) || v >= 1<<32 {
				return 0, r.Fail("integer overflows 33 bits")
			}
			return v, nil
		}
	}
	return 0, r.Fail("integer overflows 33 bits")
}

// Name reads a name (its length, then its bytes) and returns its bytes,
// which are Buf's.
func (r *Reader) Name() ([]byte, error) {
	n, err := r.U32()
	if err != nil {
		return nil, err
	}
	start := r.Pos
	if err := r.Skip(uint64(n)); err != nil {
		return nil, err
	}
	return r.Buf[start:r.Pos], nil
}

// Count reads a vector length and checks that there is room for that many
// entries of at least minBytes each, so that nothing is sized by a count
// the bytes cannot hold.
func (r *Reader) Count(minBytes int) (int, error) {
	n, err := r.U32()
	if err != nil {
		return 0, err
	}
	if uint64(n)*uint64(minBytes) > uint64(r.Left()) {
		return 0, r.Fail("vector of %d entries does not fit in the %d bytes left", n, r.Left())
	}
	return int(n), nil
}

// Limits reads table or memory limits.
func (r *Reader) Limits() (min, max uint32, hasMax bool, err error) {
	flags, err := r.Byte()
	if err != nil {
		return 0, 0, false, err
	}
	if flags > 3 { // 0 min, 1 min max, 2/3 shared (threads)
		return 0, 0, false, r.Fail("unsupported limits flags 0x%x", flags)
	}
	if min, err = r.U32(); err != nil {
		return 0, 0, false, err
	}
	if flags&1 != 0 {
		if max, err = r.U32(); err != nil {
			return 0, 0, false, err
		}
		hasMax = true
	}
	return min, max, hasMax, nil
}

// FuncTypes reads the n function types of a type section (form 0x60, then
// parameter and result types), reading each value type with valType, and
// gives each type's arity to each.
func (r *Reader) FuncTypes(n int, valType func() error, each func(i, params, results int)) error {
	for i := 0; i < n; i++ {
		form, err := r.Byte()
		if err != nil {
			return err
		}
		if form != 0x60 {
			return r.Fail("type %d: form 0x%x is not a function type", i, form)
		}
		var arity [2]int // parameters, results
		for j := range arity {
			k, err := r.Count(1)
			if err != nil {
				return err
			}
			arity[j] = k
			for ; k > 0; k-- {
				if err := valType(); err != nil {
					return err
				}
			}
		}
		each(i, arity[0], arity[1])
	}
	return nil
}

// AppendU32 appends v as an unsigned LEB128.
func AppendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// AppendS32 appends v as a signed LEB128.
func AppendS32(b []byte, v int32) []byte {
	x := int64(v)
	for {
		c := byte(x & 0x7f)
		x >>= 7
		if (x == 0 && c&0x40 == 0) || (x == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// skipName skips a name.
func (r *Reader) skipName() error {
	_, err := r.Name()
	return err
}
