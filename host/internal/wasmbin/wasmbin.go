// Package wasmbin measures what a WebAssembly binary declares before wazero
// decodes it, and rewrites table limits.
//
// wazero sizes its allocations from the counts a module declares: a vector
// count of 2^32-1 in a 20-byte module makes its decoder allocate gigabytes,
// a function declaring 2^32-1 locals allocates 4 GiB, a table declared with
// 2^27 elements allocates 1 GiB per instance. host.Engine.Load calls Read
// first and refuses any module whose Summary exceeds the host's bounds, so
// wazero only ever sees modules whose allocations are bounded.
//
// Read walks the section structure of the binary format
// (https://webassembly.github.io/spec/core/binary/modules.html) far enough to
// count and measure: every vector count is checked against the bytes left in
// its section (an entry takes at least one byte), so Read itself allocates
// nothing proportional to a count. It does not validate instructions or
// types: wazero does that afterwards. Read is safe for concurrent use and
// never panics, whatever the input (FuzzRead).
package wasmbin

import (
	"errors"
	"fmt"
)

// Section ids of the binary format.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// Table is a table the module defines.
type Table struct {
	Min    uint32
	Max    uint32 // valid when HasMax
	HasMax bool
	// limits is the byte range of the table's limits in the module.
	limits [2]int
}

// Summary is what a module declares. Counts are of entries present in the
// binary, so each is at most the module's size in bytes.
type Summary struct {
	Size int // bytes

	Types, Functions, Globals, Exports, Tags int // defined (not imported)
	Imports                                  int // all kinds
	ImportedFunctions                        int
	ImportedTables, ImportedMemories         int
	ImportedGlobals, ImportedTags            int

	Tables []Table // defined tables, in index order

	ElementSegments int
	ElementEntries  uint64 // references across every element segment
	DataSegments    int
	DataBytes       uint64 // bytes across every data segment

	MaxParams, MaxResults int // the largest function type

	// MaxLocals is the largest number of locals one function declares
	// (parameters excluded) and MaxLocalsFunc that function's index among
	// defined functions.
	MaxLocals     uint64
	MaxLocalsFunc int
	MaxBodyBytes  int // the largest function body

	HasStart bool // a start section names a function run at instantiation

	// NameEntries counts entries of the "name" custom section (function
	// and local names), which wazero decodes into maps.
	NameEntries int

	tableSec [3]int // header start, content start, end of the table section
}

// Error is a malformed binary.
type Error struct {
	Offset int // byte offset in the module
	Msg    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("malformed module at byte %d: %s", e.Offset, e.Msg)
}

var errShort = errors.New("unexpected end")

// reader reads a byte range of the module.
type reader struct {
	b   []byte
	pos int
	end int
}

func (r *reader) fail(format string, args ...any) error {
	return &Error{Offset: r.pos, Msg: fmt.Sprintf(format, args...)}
}

func (r *reader) left() int { return r.end - r.pos }

func (r *reader) byte() (byte, error) {
	if r.pos >= r.end {
		return 0, r.fail("unexpected end of section")
	}
	c := r.b[r.pos]
	r.pos++
	return c, nil
}

func (r *reader) skip(n uint64) error {
	if n > uint64(r.left()) {
		return r.fail("%d bytes declared, %d left in the section", n, r.left())
	}
	r.pos += int(n)
	return nil
}

// u32 reads an unsigned LEB128 of at most 32 bits.
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

// count reads a vector length and checks that the section has room for
// that many entries of at least minBytes each.
func (r *reader) count(minBytes int) (int, error) {
	n, err := r.u32()
	if err != nil {
		return 0, err
	}
	if uint64(n)*uint64(minBytes) > uint64(r.left()) {
		return 0, r.fail("vector of %d entries does not fit in the %d bytes left in its section", n, r.left())
	}
	return int(n), nil
}

func (r *reader) name() error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	return r.skip(uint64(n))
}

// valType skips a value type (a reference type may carry a heap type).
func (r *reader) valType() error {
	c, err := r.byte()
	if err != nil {
		return err
	}
	if c == 0x63 || c == 0x64 { // (ref null ht), (ref ht)
		return r.sleb(5)
	}
	return nil
}

// limits reads table or memory limits.
func (r *reader) limits() (min, max uint32, hasMax bool, err error) {
	flags, err := r.byte()
	if err != nil {
		return 0, 0, false, err
	}
	if flags > 3 { // 0 min, 1 min max, 2/3 shared (threads)
		return 0, 0, false, r.fail("unsupported limits flags 0x%x", flags)
	}
	if min, err = r.u32(); err != nil {
		return 0, 0, false, err
	}
	if flags&1 != 0 {
		if max, err = r.u32(); err != nil {
			return 0, 0, false, err
		}
		hasMax = true
	}
	return min, max, hasMax, nil
}

// constExpr skips a constant expression up to and including its end.
func (r *reader) constExpr() error {
	for {
		op, err := r.byte()
		if err != nil {
			return err
		}
		switch op {
		case 0x0b: // end
			return nil
		case 0x41: // i32.const
			err = r.sleb(5)
		case 0x42: // i64.const
			err = r.sleb(10)
		case 0x43: // f32.const
			err = r.skip(4)
		case 0x44: // f64.const
			err = r.skip(8)
		case 0x23, 0xd2: // global.get, ref.func
			_, err = r.u32()
		case 0xd0: // ref.null ht
			err = r.sleb(5)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant arithmetic
		case 0xfd: // v128.const
			var sub uint32
			if sub, err = r.u32(); err == nil {
				if sub != 12 {
					return r.fail("opcode 0xfd %d in a constant expression", sub)
				}
				err = r.skip(16)
			}
		default:
			return r.fail("opcode 0x%x in a constant expression", op)
		}
		if err != nil {
			return err
		}
	}
}

// Read measures the module wasm. It checks the header and the structure of
// every section it measures; an error is a *Error.
func Read(wasm []byte) (*Summary, error) {
	s := &Summary{Size: len(wasm), MaxLocalsFunc: -1}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, &Error{Msg: "no \\0asm magic number"}
	}
	if string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return nil, &Error{Offset: 4, Msg: "binary format version is not 1"}
	}
	r := &reader{b: wasm, pos: 8, end: len(wasm)}
	for r.pos < len(wasm) {
		start := r.pos
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil {
			return nil, err
		}
		if uint64(size) > uint64(r.left()) {
			return nil, r.fail("section %d declares %d bytes, %d left in the module", id, size, r.left())
		}
		sec := &reader{b: wasm, pos: r.pos, end: r.pos + int(size)}
		if id == secTable {
			s.tableSec = [3]int{start, r.pos, sec.end}
		}
		if err := s.section(id, sec); err != nil {
			return nil, err
		}
		if sec.pos != sec.end {
			return nil, sec.fail("section %d ends %d bytes before its declared size", id, sec.end-sec.pos)
		}
		r.pos = sec.end
	}
	return s, nil
}

func (s *Summary) section(id byte, r *reader) error {
	switch id {
	case secCustom:
		return s.custom(r)
	case secType:
		return s.types(r)
	case secImport:
		return s.imports(r)
	case secFunction:
		n, err := r.count(1)
		if err != nil {
			return err
		}
		s.Functions = n
		for i := 0; i < n; i++ {
			if _, err := r.u32(); err != nil {
				return err
			}
		}
	case secTable:
		return s.tables(r)
	case secMemory:
		n, err := r.count(2)
		if err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			if _, _, _, err := r.limits(); err != nil {
				return err
			}
		}
	case secGlobal:
		n, err := r.count(3)
		if err != nil {
			return err
		}
		s.Globals = n
		for i := 0; i < n; i++ {
			if err := r.valType(); err != nil {
				return err
			}
			if _, err := r.byte(); err != nil { // mutability
				return err
			}
			if err := r.constExpr(); err != nil {
				return err
			}
		}
	case secExport:
		n, err := r.count(3)
		if err != nil {
			return err
		}
		s.Exports = n
		for i := 0; i < n; i++ {
			if err := r.name(); err != nil {
				return err
			}
			if _, err := r.byte(); err != nil {
				return err
			}
			if _, err := r.u32(); err != nil {
				return err
			}
		}
	case secStart:
		s.HasStart = true
		_, err := r.u32()
		return err
	case secElement:
		return s.elements(r)
	case secCode:
		return s.code(r)
	case secData:
		return s.data(r)
	case secDataCount:
		_, err := r.u32()
		return err
	case secTag:
		n, err := r.count(2)
		if err != nil {
			return err
		}
		s.Tags = n
		for i := 0; i < n; i++ {
			if _, err := r.byte(); err != nil {
				return err
			}
			if _, err := r.u32(); err != nil {
				return err
			}
		}
	default:
		return r.fail("unknown section id %d", id)
	}
	return nil
}

func (s *Summary) types(r *reader) error {
	n, err := r.count(3)
	if err != nil {
		return err
	}
	s.Types = n
	for i := 0; i < n; i++ {
		form, err := r.byte()
		if err != nil {
			return err
		}
		if form != 0x60 {
			return r.fail("type %d: form 0x%x is not a function type", i, form)
		}
		for j := 0; j < 2; j++ {
			k, err := r.count(1)
			if err != nil {
				return err
			}
			if j == 0 {
				s.MaxParams = max(s.MaxParams, k)
			} else {
				s.MaxResults = max(s.MaxResults, k)
			}
			for ; k > 0; k-- {
				if err := r.valType(); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (s *Summary) imports(r *reader) error {
	n, err := r.count(4)
	if err != nil {
		return err
	}
	s.Imports = n
	for i := 0; i < n; i++ {
		if err := r.name(); err != nil {
			return err
		}
		if err := r.name(); err != nil {
			return err
		}
		kind, err := r.byte()
		if err != nil {
			return err
		}
		switch kind {
		case 0: // function
			s.ImportedFunctions++
			_, err = r.u32()
		case 1: // table
			s.ImportedTables++
			if err = r.valType(); err == nil {
				_, _, _, err = r.limits()
			}
		case 2: // memory
			s.ImportedMemories++
			_, _, _, err = r.limits()
		case 3: // global
			s.ImportedGlobals++
			if err = r.valType(); err == nil {
				_, err = r.byte()
			}
		case 4: // tag
			s.ImportedTags++
			if _, err = r.byte(); err == nil {
				_, err = r.u32()
			}
		default:
			return r.fail("import %d: unknown kind 0x%x", i, kind)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Summary) tables(r *reader) error {
	n, err := r.count(3)
	if err != nil {
		return err
	}
	s.Tables = make([]Table, 0, n)
	for i := 0; i < n; i++ {
		init := false
		if r.pos < r.end && r.b[r.pos] == 0x40 { // 0x40 0x00 tabletype expr
			r.pos++
			if c, err := r.byte(); err != nil || c != 0 {
				return r.fail("table %d: bad initialiser prefix", i)
			}
			init = true
		}
		if err := r.valType(); err != nil {
			return err
		}
		var t Table
		t.limits[0] = r.pos
		if r.pos < r.end && r.b[r.pos] > 1 {
			return r.fail("table %d: limits flags 0x%x (a table is neither shared nor 64-bit)", i, r.b[r.pos])
		}
		if t.Min, t.Max, t.HasMax, err = r.limits(); err != nil {
			return err
		}
		t.limits[1] = r.pos
		if init {
			if err := r.constExpr(); err != nil {
				return err
			}
		}
		s.Tables = append(s.Tables, t)
	}
	return nil
}

func (s *Summary) elements(r *reader) error {
	n, err := r.count(2)
	if err != nil {
		return err
	}
	s.ElementSegments = n
	for i := 0; i < n; i++ {
		flags, err := r.u32()
		if err != nil {
			return err
		}
		if flags > 7 {
			return r.fail("element segment %d: unknown flags %d", i, flags)
		}
		if flags&3 == 2 { // explicit table index
			if _, err := r.u32(); err != nil {
				return err
			}
		}
		if flags&1 == 0 { // active: offset expression
			if err := r.constExpr(); err != nil {
				return err
			}
		}
		if flags&3 != 0 { // element kind (flags&4 == 0) or reference type
			if flags&4 == 0 {
				_, err = r.byte()
			} else {
				err = r.valType()
			}
			if err != nil {
				return err
			}
		}
		k, err := r.count(1)
		if err != nil {
			return err
		}
		s.ElementEntries += uint64(k)
		for ; k > 0; k-- {
			if flags&4 == 0 {
				_, err = r.u32()
			} else {
				err = r.constExpr()
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Summary) code(r *reader) error {
	n, err := r.count(2)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		size, err := r.u32()
		if err != nil {
			return err
		}
		body := &reader{b: r.b, pos: r.pos, end: r.pos}
		if err := r.skip(uint64(size)); err != nil {
			return err
		}
		body.end = r.pos
		s.MaxBodyBytes = max(s.MaxBodyBytes, int(size))
		decls, err := body.count(2)
		if err != nil {
			return err
		}
		var locals uint64
		for ; decls > 0; decls-- {
			k, err := body.u32()
			if err != nil {
				return err
			}
			locals += uint64(k)
			if err := body.valType(); err != nil {
				return err
			}
		}
		if locals > s.MaxLocals || s.MaxLocalsFunc < 0 {
			s.MaxLocals, s.MaxLocalsFunc = locals, i
		}
	}
	return nil
}

func (s *Summary) data(r *reader) error {
	n, err := r.count(2)
	if err != nil {
		return err
	}
	s.DataSegments = n
	for i := 0; i < n; i++ {
		flags, err := r.u32()
		if err != nil {
			return err
		}
		switch flags {
		case 0:
			err = r.constExpr()
		case 1:
		case 2:
			if _, err = r.u32(); err == nil {
				err = r.constExpr()
			}
		default:
			return r.fail("data segment %d: unknown flags %d", i, flags)
		}
		if err != nil {
			return err
		}
		k, err := r.u32()
		if err != nil {
			return err
		}
		if err := r.skip(uint64(k)); err != nil {
			return err
		}
		s.DataBytes += uint64(k)
	}
	return nil
}

// custom measures the "name" section, which wazero decodes into maps sized
// by its counts; other custom sections are kept as bytes.
func (s *Summary) custom(r *reader) error {
	n, err := r.u32()
	if err != nil {
		return err
	}
	if uint64(n) > uint64(r.left()) {
		return r.fail("custom section name of %d bytes, %d left", n, r.left())
	}
	name := string(r.b[r.pos : r.pos+int(n)])
	r.pos += int(n)
	if name != "name" {
		r.pos = r.end
		return nil
	}
	for r.pos < r.end {
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil {
			return err
		}
		sub := &reader{b: r.b, pos: r.pos, end: r.pos}
		if err := r.skip(uint64(size)); err != nil {
			return err
		}
		sub.end = r.pos
		switch id {
		case 1: // function names: vec(idx name)
			if err := s.nameMap(sub); err != nil {
				return err
			}
		case 2: // local names: vec(idx vec(idx name))
			k, err := sub.count(2)
			if err != nil {
				return err
			}
			s.NameEntries += k
			for ; k > 0; k-- {
				if _, err := sub.u32(); err != nil {
					return err
				}
				if err := s.nameMap(sub); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (s *Summary) nameMap(r *reader) error {
	k, err := r.count(2)
	if err != nil {
		return err
	}
	s.NameEntries += k
	for ; k > 0; k-- {
		if _, err := r.u32(); err != nil {
			return err
		}
		if err := r.name(); err != nil {
			return err
		}
	}
	return nil
}

// WithTableMax returns a copy of wasm whose defined table i declares the
// maximum max[i] (a value below the table's minimum is raised to it). s must
// be Read(wasm). The rest of the module is unchanged, byte for byte.
func WithTableMax(wasm []byte, s *Summary, maxes []uint32) []byte {
	if len(s.Tables) == 0 {
		return wasm
	}
	var content []byte
	from := s.tableSec[1]
	for i, t := range s.Tables {
		content = append(content, wasm[from:t.limits[0]]...)
		content = append(content, 0x01)
		content = appendU32(content, t.Min)
		content = appendU32(content, max(maxes[i], t.Min))
		from = t.limits[1]
	}
	content = append(content, wasm[from:s.tableSec[2]]...)
	out := make([]byte, 0, len(wasm)+len(content))
	out = append(out, wasm[:s.tableSec[0]]...)
	out = append(out, secTable)
	out = appendU32(out, uint32(len(content)))
	out = append(out, content...)
	return append(out, wasm[s.tableSec[2]:]...)
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
