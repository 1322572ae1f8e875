package meter

import "fmt"

// reader reads a byte range of the module. Its integer readers accept
// exactly the encodings wazero v1.12's decoders accept (internal/leb128): an
// integer ends at the first byte without the continuation bit, within 5
// bytes for 32 (and 33) bits and 10 for 64. Instructions are therefore split
// at the same boundaries as wazero splits them, which is what makes the
// index checks of Instrument hold for the code wazero compiles.
type reader struct {
	b   []byte
	pos int
	end int
	// base is the module offset of b[0], for error messages.
	base int
}

func (r *reader) fail(format string, args ...any) error {
	return &Error{Offset: r.base + r.pos, Msg: fmt.Sprintf(format, args...)}
}

func (r *reader) left() int { return r.end - r.pos }

func (r *reader) byte() (byte, error) {
	if r.pos >= r.end {
		return 0, r.fail("unexpected end")
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *reader) skip(n uint64) error {
	if n > uint64(r.left()) {
		return r.fail("%d bytes declared, %d left", n, r.left())
	}
	r.pos += int(n)
	return nil
}

// u32 reads an unsigned LEB128 of at most 32 bits (5 bytes).
func (r *reader) u32() (uint32, error) {
	var v uint64
	for i := 0; i < 5; i++ {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if v > 1<<32-1 {
				return 0, r.fail("integer overflows 32 bits")
			}
			return uint32(v), nil
		}
	}
	return 0, r.fail("integer overflows 32 bits")
}

// sleb skips a signed LEB128 of at most maxBytes bytes.
func (r *reader) sleb(maxBytes int) error {
	for i := 0; i < maxBytes; i++ {
		c, err := r.byte()
		if err != nil {
			return err
		}
		if c&0x80 == 0 {
			return nil
		}
	}
	return r.fail("integer too long")
}

// s33 reads a signed LEB128 of at most 33 bits (5 bytes), as block types
// and heap types are encoded.
func (r *reader) s33() (int64, error) {
	var v int64
	var shift uint
	for i := 0; i < 5; i++ {
		c, err := r.byte()
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
				return 0, r.fail("integer overflows 33 bits")
			}
			return v, nil
		}
	}
	return 0, r.fail("integer overflows 33 bits")
}

func (r *reader) name() (string, error) {
	n, err := r.u32()
	if err != nil {
		return "", err
	}
	start := r.pos
	if err := r.skip(uint64(n)); err != nil {
		return "", err
	}
	return string(r.b[start:r.pos]), nil
}

// count reads a vector length and checks that there is room for that many
// entries of at least minBytes each, so that nothing is sized by a count
// the bytes cannot hold.
func (r *reader) count(minBytes int) (int, error) {
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	if uint64(n)*uint64(minBytes) > uint64(r.left()) {
		return 0, r.fail("vector of %d entries does not fit in the %d bytes left", n, r.left())
	}
	return int(n), nil
}

// limits skips table or memory limits.
func (r *reader) limits() error {
	flags, err := r.byte()
	if err != nil {
		return err
	}
	if flags > 3 {
		return r.fail("unsupported limits flags 0x%x", flags)
	}
	if _, err := r.u32(); err != nil {
		return err
	}
	if flags&1 != 0 {
		_, err = r.u32()
	}
	return err
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendS32(b []byte, v int32) []byte {
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
