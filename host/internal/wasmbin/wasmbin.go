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
	SecCustom    = 0
	SecType      = 1
	SecImport    = 2
	SecFunction  = 3
	SecTable     = 4
	SecMemory    = 5
	SecGlobal    = 6
	SecExport    = 7
	SecStart     = 8
	SecElement   = 9
	SecCode      = 10
	SecData      = 11
	SecDataCount = 12
	SecTag       = 13
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

// valType skips a value type (a reference type may carry a heap type).
func (r *Reader) valType() error {
	c, err := r.Byte()
	if err != nil {
		return err
	}
	if c == 0x63 || c == 0x64 { // (ref null ht), (ref ht)
		return r.SkipSigned(5)
	}
	return nil
}

// constExpr skips a constant expression up to and including its end.
func (r *Reader) constExpr() error {
	for {
		op, err := r.Byte()
		if err != nil {
			return err
		}
		switch op {
		case 0x0b: // end
			return nil
		case 0x41: // i32.const
			err = r.SkipSigned(5)
		case 0x42: // i64.const
			err = r.SkipSigned(10)
		case 0x43: // f32.const
			err = r.Skip(4)
		case 0x44: // f64.const
			err = r.Skip(8)
		case 0x23, 0xd2: // global.get, ref.func
			_, err = r.U32()
		case 0xd0: // ref.null ht
			err = r.SkipSigned(5)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constant arithmetic
		case 0xfd: // v128.const
			var sub uint32
			if sub, err = r.U32(); err == nil {
				if sub != 12 {
					return r.Fail("opcode 0xfd %d in a constant expression", sub)
				}
				err = r.Skip(16)
			}
		default:
			return r.Fail("opcode 0x%x in a constant expression", op)
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
	r := &Reader{Buf: wasm, Pos: 8, End: len(wasm)}
	for r.Pos < len(wasm) {
		start := r.Pos
		id, _ := r.Byte()
		size, err := r.U32()
		if err != nil {
			return nil, err
		}
		if uint64(size) > uint64(r.Left()) {
			return nil, r.Fail("section %d declares %d bytes, %d left in the module", id, size, r.Left())
		}
		sec := &Reader{Buf: wasm, Pos: r.Pos, End: r.Pos + int(size)}
		if id == SecTable {
			s.tableSec = [3]int{start, r.Pos, sec.End}
		}
		if err := s.section(id, sec); err != nil {
			return nil, err
		}
		if sec.Pos != sec.End {
			return nil, sec.Fail("section %d ends %d bytes before its declared size", id, sec.End-sec.Pos)
		}
		r.Pos = sec.End
	}
	return s, nil
}

// section reads the section id, whose contents r holds.
func (s *Summary) section(id byte, r *Reader) error {
	switch id {
	case SecCustom:
		return s.custom(r)
	case SecType:
		return s.types(r)
	case SecImport:
		return s.imports(r)
	case SecFunction:
		return s.functions(r)
	case SecTable:
		return s.tables(r)
	case SecMemory:
		return memories(r)
	case SecGlobal:
		return s.globals(r)
	case SecExport:
		return s.exports(r)
	case SecStart:
		s.HasStart = true
		_, err := r.U32()
		return err
	case SecElement:
		return s.elements(r)
	case SecCode:
		return s.code(r)
	case SecData:
		return s.data(r)
	case SecDataCount:
		_, err := r.U32()
		return err
	case SecTag:
		return s.tags(r)
	}
	return r.Fail("unknown section id %d", id)
}

// functions reads the function section: each function's type index.
func (s *Summary) functions(r *Reader) error {
	n, err := r.Count(1)
	if err != nil {
		return err
	}
	s.Functions = n
	for i := 0; i < n; i++ {
		if _, err := r.U32(); err != nil {
			return err
		}
	}
	return nil
}

// memories reads the memory section: each memory's limits.
func memories(r *Reader) error {
	n, err := r.Count(2)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		if _, _, _, err := r.Limits(); err != nil {
			return err
		}
	}
	return nil
}

// globals reads the global section: each global's type, mutability and
// initialiser.
func (s *Summary) globals(r *Reader) error {
	n, err := r.Count(3)
	if err != nil {
		return err
	}
	s.Globals = n
	for i := 0; i < n; i++ {
		if err := r.valType(); err != nil {
			return err
		}
		if _, err := r.Byte(); err != nil { // mutability
			return err
		}
		if err := r.constExpr(); err != nil {
			return err
		}
	}
	return nil
}

// exports reads the export section: each export's name, kind and index.
func (s *Summary) exports(r *Reader) error {
	n, err := r.Count(3)
	if err != nil {
		return err
	}
	s.Exports = n
	for i := 0; i < n; i++ {
		if err := r.skipName(); err != nil {
			return err
		}
		if _, err := r.Byte(); err != nil {
			return err
		}
		if _, err := r.U32(); err != nil {
			return err
		}
	}
	return nil
}

// tags reads the tag section: each tag's attribute and type index.
func (s *Summary) tags(r *Reader) error {
	n, err := r.Count(2)
	if err != nil {
		return err
	}
	s.Tags = n
	for i := 0; i < n; i++ {
		if _, err := r.Byte(); err != nil {
			return err
		}
		if _, err := r.U32(); err != nil {
			return err
		}
	}
	return nil
}

func (s *Summary) types(r *Reader) error {
	n, err := r.Count(3)
	if err != nil {
		return err
	}
	s.Types = n
	return r.FuncTypes(n, r.valType, func(_, params, results int) {
		s.MaxParams = max(s.MaxParams, params)
		s.MaxResults = max(s.MaxResults, results)
	})
}

func (s *Summary) imports(r *Reader) error {
	n, err := r.Count(4)
	if err != nil {
		return err
	}
	s.Imports = n
	for i := 0; i < n; i++ {
		if err := r.skipName(); err != nil {
			return err
		}
		if err := r.skipName(); err != nil {
			return err
		}
		kind, err := r.Byte()
		if err != nil {
			return err
		}
		switch kind {
		case 0: // function
			s.ImportedFunctions++
			_, err = r.U32()
		case 1: // table
			s.ImportedTables++
			if err = r.valType(); err == nil {
				_, _, _, err = r.Limits()
			}
		case 2: // memory
			s.ImportedMemories++
			_, _, _, err = r.Limits()
		case 3: // global
			s.ImportedGlobals++
			if err = r.valType(); err == nil {
				_, err = r.Byte()
			}
		case 4: // tag
			s.ImportedTags++
			if _, err = r.Byte(); err == nil {
				_, err = r.U32()
			}
		default:
			return r.Fail("import %d: unknown kind 0x%x", i, kind)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Summary) tables(r *Reader) error {
	n, err := r.Count(3)
	if err != nil {
		return err
	}
	s.Tables = make([]Table, 0, n)
	for i := 0; i < n; i++ {
		init := false
		if r.Pos < r.End && r.Buf[r.Pos] == 0x40 { // 0x40 0x00 tabletype expr
			r.Pos++
			if c, err := r.Byte(); err != nil || c != 0 {
				return r.Fail("table %d: bad initialiser prefix", i)
			}
			init = true
		}
		if err := r.valType(); err != nil {
			return err
		}
		var t Table
		t.limits[0] = r.Pos
		if r.Pos < r.End && r.Buf[r.Pos] > 1 {
			return r.Fail("table %d: limits flags 0x%x (a table is neither shared nor 64-bit)", i, r.Buf[r.Pos])
		}
		if t.Min, t.Max, t.HasMax, err = r.Limits(); err != nil {
			return err
		}
		t.limits[1] = r.Pos
		if init {
			if err := r.constExpr(); err != nil {
				return err
			}
		}
		s.Tables = append(s.Tables, t)
	}
	return nil
}

func (s *Summary) elements(r *Reader) error {
	n, err := r.Count(2)
	if err != nil {
		return err
	}
	s.ElementSegments = n
	for i := 0; i < n; i++ {
		flags, err := r.U32()
		if err != nil {
			return err
		}
		if flags > 7 {
			return r.Fail("element segment %d: unknown flags %d", i, flags)
		}
		if flags&3 == 2 { // explicit table index
			if _, err := r.U32(); err != nil {
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
				_, err = r.Byte()
			} else {
				err = r.valType()
			}
			if err != nil {
				return err
			}
		}
		k, err := r.Count(1)
		if err != nil {
			return err
		}
		s.ElementEntries += uint64(k)
		for ; k > 0; k-- {
			if flags&4 == 0 {
				_, err = r.U32()
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

func (s *Summary) code(r *Reader) error {
	n, err := r.Count(2)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		size, err := r.U32()
		if err != nil {
			return err
		}
		body := &Reader{Buf: r.Buf, Pos: r.Pos, End: r.Pos}
		if err := r.Skip(uint64(size)); err != nil {
			return err
		}
		body.End = r.Pos
		s.MaxBodyBytes = max(s.MaxBodyBytes, int(size))
		decls, err := body.Count(2)
		if err != nil {
			return err
		}
		var locals uint64
		for ; decls > 0; decls-- {
			k, err := body.U32()
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

func (s *Summary) data(r *Reader) error {
	n, err := r.Count(2)
	if err != nil {
		return err
	}
	s.DataSegments = n
	for i := 0; i < n; i++ {
		flags, err := r.U32()
		if err != nil {
			return err
		}
		switch flags {
		case 0:
			err = r.constExpr()
		case 1:
		case 2:
			if _, err = r.U32(); err == nil {
				err = r.constExpr()
			}
		default:
			return r.Fail("data segment %d: unknown flags %d", i, flags)
		}
		if err != nil {
			return err
		}
		k, err := r.U32()
		if err != nil {
			return err
		}
		if err := r.Skip(uint64(k)); err != nil {
			return err
		}
		s.DataBytes += uint64(k)
	}
	return nil
}

// custom measures the "name" section, which wazero decodes into maps sized
// by its counts; other custom sections are kept as bytes.
func (s *Summary) custom(r *Reader) error {
	name, err := r.Name()
	if err != nil {
		return err
	}
	if string(name) != "name" {
		r.Pos = r.End
		return nil
	}
	for r.Pos < r.End {
		id, _ := r.Byte()
		size, err := r.U32()
		if err != nil {
			return err
		}
		sub := &Reader{Buf: r.Buf, Pos: r.Pos, End: r.Pos}
		if err := r.Skip(uint64(size)); err != nil {
			return err
		}
		sub.End = r.Pos
		switch id {
		case 1: // function names: vec(idx name)
			if err := s.nameMap(sub); err != nil {
				return err
			}
		case 2: // local names: vec(idx vec(idx name))
			k, err := sub.Count(2)
			if err != nil {
				return err
			}
			s.NameEntries += k
			for ; k > 0; k-- {
				if _, err := sub.U32(); err != nil {
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

func (s *Summary) nameMap(r *Reader) error {
	k, err := r.Count(2)
	if err != nil {
		return err
	}
	s.NameEntries += k
	for ; k > 0; k-- {
		if _, err := r.U32(); err != nil {
			return err
		}
		if err := r.skipName(); err != nil {
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
		content = AppendU32(content, t.Min)
		content = AppendU32(content, max(maxes[i], t.Min))
		from = t.limits[1]
	}
	content = append(content, wasm[from:s.tableSec[2]]...)
	out := make([]byte, 0, len(wasm)+len(content))
	out = append(out, wasm[:s.tableSec[0]]...)
	out = append(out, SecTable)
	out = AppendU32(out, uint32(len(content)))
	out = append(out, content...)
	return append(out, wasm[s.tableSec[2]:]...)
}
