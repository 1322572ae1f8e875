// Package meter instruments a WebAssembly module with an amortised fuel
// counter, so that guest code returns to the host at bounded intervals
// without the runtime checking anything itself (RATIONALE.md, "Faults and
// instances").
//
// Instrument adds to the module
//
//   - an import, function index I = the number of imported functions:
//     (import "wasmstream_meter" "refuel" (func (result i32)))
//   - a global, never exported, after every other global:
//     (global $fuel (mut i32) (i32.const 0))
//   - one i32 local per function ($s, after its other locals)
//
// and charges fuel at the entry of every function and at the header of every
// loop:
//
//	global.get $fuel  i32.const cost  i32.sub  local.tee $s  global.set $fuel
//	local.get $s  i32.const 0  i32.lt_s
//	if  call $refuel  global.set $fuel  end
//
// where cost is the number of instructions of the region the point opens:
// the function body outside its loops, or the loop body outside the loops
// nested in it. Between two charges control only moves forward through
// one region, so the instructions executed between charges never exceed
// the fuel charged for them. Bulk memory and table instructions (which do
// work in proportion to their count operand) also charge count>>4 (memory)
// or count>>2 (tables) before they run.
//
// When the fuel goes below zero the code calls refuel, which the host
// provides: it checks the clock and either returns the next allowance or
// traps. Fuel never wraps: it is at most what refuel returns (≤ 2^30) and
// every charge (< 2^30) is followed by the check.
//
// Appending the import shifts every defined function index by one, so
// Instrument rewrites call, ref.func, element segments, exports, the start
// section, global and table initialisers and the function and local names
// of the name section (other name subsections and DWARF custom sections,
// whose offsets no longer hold, are dropped). Original code may not name
// the new import, global or type: an index out of range in the original is
// refused, as is a module that imports from "wasmstream_meter" itself.
//
// The decoder reads exactly the instruction set wazero v1.12 accepts with its
// default features (WebAssembly 2.0: MVP, sign extension, saturating
// conversions, bulk memory, reference types, multi-value, SIMD), splitting
// instructions where wazero does (it reads a SIMD opcode as one byte,
// so an opcode encoded in two LEB128 bytes reads as the opcode and a nop).
// Anything else (threads, tail calls, exceptions, typed references, GC) is
// refused with an error naming the opcode. Instrument never panics and
// allocates in proportion to the module's size (FuzzInstrument).
package meter

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wasmstream/wasmstream/host/internal/wasmbin"
)

// The import the instrumented code calls when its fuel runs out:
// func() -> i32, returning the next allowance (> 0), or trapping.
const (
	ImportModule = "wasmstream_meter"
	ImportName   = "refuel"
)

// Shifts of the dynamic charge of bulk instructions: count>>memShift units
// for memory.copy, memory.fill and memory.init (16 bytes a unit), and
// count>>tableShift for table.copy, table.fill and table.init. With a
// shift of at least 2 a charge is below 2^30 for any count.
const (
	memShift   = 4
	tableShift = 2
)

// MaxFuel is the largest allowance refuel may return.
const MaxFuel = 1 << 30

// Error is a module Instrument cannot instrument: malformed, using an
// instruction outside WebAssembly 2.0, or naming what the meter adds.
type Error struct {
	Offset int // byte offset in the module
	Msg    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("cannot meter the module (byte %d): %s", e.Offset, e.Msg)
}

// Stats describes an instrumentation.
type Stats struct {
	Functions int // function bodies charged at entry
	Loops     int // loop headers charged
	Bulk      int // bulk memory and table instructions charged by count
}

// order ranks the known sections as the binary format orders them.
func order(id byte) int {
	switch id {
	case wasmbin.SecType:
		return 1
	case wasmbin.SecImport:
		return 2
	case wasmbin.SecFunction:
		return 3
	case wasmbin.SecTable:
		return 4
	case wasmbin.SecMemory:
		return 5
	case wasmbin.SecTag:
		return 6
	case wasmbin.SecGlobal:
		return 7
	case wasmbin.SecExport:
		return 8
	case wasmbin.SecStart:
		return 9
	case wasmbin.SecElement:
		return 10
	case wasmbin.SecDataCount:
		return 11
	case wasmbin.SecCode:
		return 12
	case wasmbin.SecData:
		return 13
	}
	return 0
}

type section struct {
	id         byte
	start, end int // content
}

// module is what Instrument learns of the original module.
type module struct {
	b           []byte
	sections    []section
	types       int
	typeParams  []uint32 // parameters of each type
	funcImports uint32
	funcTypes   []uint32 // type of each defined function
	funcs       uint32   // functions in the original, imported or defined
	globals     uint32   // globals in the original, imported or defined
	// What the meter adds.
	refuel  uint32 // function index
	fuel    uint32 // global index
	typeIdx uint32 // func() -> i32
	stats   Stats
}

// Instrument returns a copy of wasm whose code is metered (see the package
// comment). wasm is not modified.
func Instrument(wasm []byte) ([]byte, Stats, error) {
	out, stats, err := instrument(wasm)
	// The reader's errors are wasmbin's: say they are the meter's.
	var we *wasmbin.Error
	if errors.As(err, &we) {
		err = &Error{Offset: we.Offset, Msg: we.Msg}
	}
	return out, stats, err
}

func instrument(wasm []byte) ([]byte, Stats, error) {
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" || string(wasm[4:8]) != "\x01\x00\x00\x00" {
		return nil, Stats{}, &Error{Msg: "not a WebAssembly 1.0 binary"}
	}
	m := &module{b: wasm}
	if err := m.split(); err != nil {
		return nil, Stats{}, err
	}
	if err := m.survey(); err != nil {
		return nil, Stats{}, err
	}
	m.refuel = m.funcImports
	m.fuel = m.globals
	m.typeIdx = uint32(m.types)
	out := make([]byte, 0, len(wasm)+len(wasm)/4+64)
	out = append(out, wasm[:8]...)
	added := map[byte]bool{}
	// addMissing emits the sections the meter needs that the module lacks,
	// before the first section that must follow them.
	addMissing := func(before int) {
		for _, id := range []byte{wasmbin.SecType, wasmbin.SecImport, wasmbin.SecGlobal} {
			if !added[id] && order(id) < before {
				added[id] = true
				out = appendSection(out, id, m.newSection(id))
			}
		}
	}
	for _, s := range m.sections {
		if s.id != wasmbin.SecCustom {
			addMissing(order(s.id))
		}
		content, keep, err := m.rewrite(s)
		if err != nil {
			return nil, Stats{}, err
		}
		if keep {
			if s.id == wasmbin.SecType || s.id == wasmbin.SecImport || s.id == wasmbin.SecGlobal {
				added[s.id] = true
			}
			out = appendSection(out, s.id, content)
		}
	}
	addMissing(1 << 10)
	return out, m.stats, nil
}

func appendSection(out []byte, id byte, content []byte) []byte {
	out = append(out, id)
	out = wasmbin.AppendU32(out, uint32(len(content)))
	return append(out, content...)
}

// newSection is the content of a section the module lacks: only what the
// meter adds.
func (m *module) newSection(id byte) []byte {
	switch id {
	case wasmbin.SecType:
		return m.appendType([]byte{1})
	case wasmbin.SecImport:
		return m.appendImport([]byte{1})
	default:
		return m.appendGlobal([]byte{1})
	}
}

func (m *module) appendType(b []byte) []byte { return append(b, 0x60, 0x00, 0x01, 0x7f) }

func (m *module) appendImport(b []byte) []byte {
	b = wasmbin.AppendU32(b, uint32(len(ImportModule)))
	b = append(b, ImportModule...)
	b = wasmbin.AppendU32(b, uint32(len(ImportName)))
	b = append(b, ImportName...)
	b = append(b, 0x00)
	return wasmbin.AppendU32(b, m.typeIdx)
}

func (m *module) appendGlobal(b []byte) []byte { return append(b, 0x7f, 0x01, 0x41, 0x00, 0x0b) }

// split finds the sections.
func (m *module) split() error {
	r := &wasmbin.Reader{Buf: m.b, Pos: 8, End: len(m.b)}
	last := 0
	for r.Pos < r.End {
		id, _ := r.Byte()
		size, err := r.U32()
		if err != nil {
			return err
		}
		if uint64(size) > uint64(r.Left()) {
			return r.Fail("section %d declares %d bytes, %d left in the module", id, size, r.Left())
		}
		if id != wasmbin.SecCustom {
			o := order(id)
			if o == 0 {
				return r.Fail("unknown section id %d", id)
			}
			if o <= last {
				return r.Fail("section %d out of order", id)
			}
			last = o
		}
		m.sections = append(m.sections, section{id: id, start: r.Pos, end: r.Pos + int(size)})
		r.Pos += int(size)
	}
	return nil
}

func (m *module) sectionReader(s section) *wasmbin.Reader {
	return &wasmbin.Reader{Buf: m.b, Pos: s.start, End: s.end}
}

// survey reads the index spaces: types, imports, functions and globals.
func (m *module) survey() error {
	for _, s := range m.sections {
		r := m.sectionReader(s)
		var err error
		switch s.id {
		case wasmbin.SecType:
			err = m.surveyTypes(r)
		case wasmbin.SecImport:
			err = m.surveyImports(r)
		case wasmbin.SecFunction:
			var n int
			if n, err = r.Count(1); err != nil {
				return err
			}
			m.funcTypes = make([]uint32, n)
			for i := range m.funcTypes {
				if m.funcTypes[i], err = r.U32(); err != nil {
					return err
				}
				if int(m.funcTypes[i]) >= m.types {
					return r.Fail("function %d has type %d, but the module has %d types", i, m.funcTypes[i], m.types)
				}
			}
		case wasmbin.SecGlobal:
			var n int
			if n, err = r.Count(3); err != nil {
				return err
			}
			m.globals += uint32(n)
		}
		if err != nil {
			return err
		}
	}
	m.funcs = m.funcImports + uint32(len(m.funcTypes))
	return nil
}

func (m *module) surveyTypes(r *wasmbin.Reader) error {
	n, err := r.Count(3)
	if err != nil {
		return err
	}
	m.types = n
	m.typeParams = make([]uint32, n)
	return r.FuncTypes(n, func() error { return m.valType(r) }, func(i, params, _ int) {
		m.typeParams[i] = uint32(params)
	})
}

// valType reads a value type. A reference to a concrete type (typed
// function references) must name a type of the original module.
func (m *module) valType(r *wasmbin.Reader) error {
	c, err := r.Byte()
	if err != nil {
		return err
	}
	switch c {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f, 0x69:
		return nil
	case 0x63, 0x64: // (ref null ht), (ref ht)
		ht, err := r.S33()
		if err != nil {
			return err
		}
		if ht >= int64(m.types) {
			return r.Fail("reference to type %d, but the module has %d types", ht, m.types)
		}
		return nil
	}
	return r.Fail("unknown value type 0x%x", c)
}

// tableType reads a table type as wazero does: an optional initialiser
// prefix (0x40 0x00, reported), a reference type (wazero takes any byte,
// refusing an unusable one later), and limits.
func (m *module) tableType(r *wasmbin.Reader) (init bool, err error) {
	if r.Pos < r.End && r.Buf[r.Pos] == 0x40 {
		r.Pos++
		if c, err := r.Byte(); err != nil || c != 0 {
			return false, r.Fail("bad table initialiser prefix")
		}
		init = true
	}
	c, err := r.Byte()
	if err != nil {
		return false, err
	}
	if c == 0x63 || c == 0x64 {
		r.Pos--
		if err := m.valType(r); err != nil {
			return false, err
		}
	}
	_, _, _, err = r.Limits()
	return init, err
}

func (m *module) surveyImports(r *wasmbin.Reader) error {
	n, err := r.Count(4)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		mod, err := r.Name()
		if err != nil {
			return err
		}
		name, err := r.Name()
		if err != nil {
			return err
		}
		if string(mod) == ImportModule {
			return r.Fail("imports %s.%s: the module %q is the host's own (the meter)", mod, name, ImportModule)
		}
		kind, err := r.Byte()
		if err != nil {
			return err
		}
		switch kind {
		case 0:
			m.funcImports++
			var t uint32
			if t, err = r.U32(); err == nil && int64(t) >= int64(m.types) {
				// wazero v1.12 panics validating a call to such a function.
				err = r.Fail("import %d has type %d, but the module has %d types", i, t, m.types)
			}
		case 1:
			var init bool
			if init, err = m.tableType(r); err == nil && init {
				err = skipConstExpr(r)
			}
		case 2:
			_, _, _, err = r.Limits()
		case 3:
			m.globals++
			if err = m.valType(r); err == nil {
				_, err = r.Byte()
			}
		case 4:
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

// funcIndex maps a function index of the original to the instrumented
// module's, refusing one out of range.
func (m *module) funcIndex(r *wasmbin.Reader, f uint32) (uint32, error) {
	if f >= m.funcs {
		return 0, r.Fail("reference to function %d, but the module has %d functions", f, m.funcs)
	}
	if f >= m.funcImports {
		return f + 1, nil
	}
	return f, nil
}

func (m *module) globalIndex(r *wasmbin.Reader, g uint32) error {
	if g >= m.globals {
		return r.Fail("reference to global %d, but the module has %d globals", g, m.globals)
	}
	return nil
}

// rewriters rewrite the sections whose content the meter changes.
var rewriters = map[byte]func(*module, *wasmbin.Reader) ([]byte, error){
	wasmbin.SecType:    (*module).rewriteTypes,
	wasmbin.SecImport:  (*module).rewriteImports,
	wasmbin.SecGlobal:  (*module).rewriteGlobals,
	wasmbin.SecTable:   (*module).rewriteTables,
	wasmbin.SecExport:  (*module).rewriteExports,
	wasmbin.SecStart:   (*module).rewriteStart,
	wasmbin.SecElement: (*module).rewriteElements,
	wasmbin.SecCode:    (*module).rewriteCode,
	wasmbin.SecData:    (*module).rewriteData,
}

// rewrite returns the instrumented content of section s, or keep=false to
// drop it.
func (m *module) rewrite(s section) (content []byte, keep bool, err error) {
	r := m.sectionReader(s)
	if rewrite := rewriters[s.id]; rewrite != nil {
		b, err := rewrite(m, r)
		return b, true, err
	}
	if s.id == wasmbin.SecCustom {
		b, err := r.Name()
		if err != nil {
			return nil, false, err
		}
		switch name := string(b); {
		case name == "name":
			b, ok := m.rewriteNames(r)
			return b, ok, nil
		case strings.HasPrefix(name, ".debug_"):
			return nil, false, nil // DWARF: its code offsets no longer hold
		}
	}
	return m.b[s.start:s.end], true, nil
}

// rewriteTypes appends refuel's type.
func (m *module) rewriteTypes(r *wasmbin.Reader) ([]byte, error) {
	n, _ := r.U32()
	b := wasmbin.AppendU32(nil, n+1)
	b = append(b, r.Buf[r.Pos:r.End]...)
	return m.appendType(b), nil
}

func (m *module) rewriteStart(r *wasmbin.Reader) ([]byte, error) {
	f, err := r.U32()
	if err != nil {
		return nil, err
	}
	if f, err = m.funcIndex(r, f); err != nil {
		return nil, err
	}
	if r.Pos != r.End {
		return nil, r.Fail("start section longer than its function index")
	}
	return wasmbin.AppendU32(nil, f), nil
}

// constExpr copies a constant expression up to and including its end,
// renumbering ref.func and checking global.get.
func (m *module) constExpr(r *wasmbin.Reader, out []byte) ([]byte, error) {
	for {
		start := r.Pos
		op, err := r.Byte()
		if err != nil {
			return nil, err
		}
		switch op {
		case 0x0b:
			return append(out, op), nil
		case 0x41:
			err = r.SkipSigned(5)
		case 0x42:
			err = r.SkipSigned(10)
		case 0x43:
			err = r.Skip(4)
		case 0x44:
			err = r.Skip(8)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constants
		case 0x23:
			var g uint32
			if g, err = r.U32(); err == nil {
				err = m.globalIndex(r, g)
			}
		case 0xd0:
			var c byte
			if c, err = r.Byte(); err == nil && c != 0x70 && c != 0x6f && c != 0x69 {
				err = r.Fail("ref.null of type 0x%x", c)
			}
		case 0xd2:
			var f uint32
			if f, err = r.U32(); err != nil {
				return nil, err
			}
			if f, err = m.funcIndex(r, f); err != nil {
				return nil, err
			}
			out = wasmbin.AppendU32(append(out, op), f)
			continue
		case 0xfd:
			var c byte
			if c, err = r.Byte(); err == nil {
				if c != 12 {
					return nil, r.Fail("opcode 0xfd %d in a constant expression", c)
				}
				err = r.Skip(16)
			}
		default:
			return nil, r.Fail("opcode 0x%x in a constant expression", op)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m.b[start:r.Pos]...)
	}
}

// rewriteVec rewrites a section that is one vector of entries of at least
// minBytes each: its count, raised by the entries the caller appends
// (added), then each entry as entry appends it to out. longer is the error
// for bytes left after the entries.
func rewriteVec(r *wasmbin.Reader, minBytes, added int, longer string, entry func(i int, out []byte) ([]byte, error)) ([]byte, error) {
	n, err := r.Count(minBytes)
	if err != nil {
		return nil, err
	}
	out := wasmbin.AppendU32(nil, uint32(n+added))
	for i := 0; i < n; i++ {
		if out, err = entry(i, out); err != nil {
			return nil, err
		}
	}
	if r.Pos != r.End {
		return nil, r.Fail("%s", longer)
	}
	return out, nil
}

func (m *module) rewriteGlobals(r *wasmbin.Reader) ([]byte, error) {
	out, err := rewriteVec(r, 3, 1, "global section longer than its globals", func(_ int, out []byte) ([]byte, error) {
		start := r.Pos
		if err := m.valType(r); err != nil {
			return nil, err
		}
		if _, err := r.Byte(); err != nil {
			return nil, err
		}
		return m.constExpr(r, append(out, m.b[start:r.Pos]...))
	})
	if err != nil {
		return nil, err
	}
	return m.appendGlobal(out), nil
}

// rewriteImports copies the imports (renumbering ref.func in the
// initialiser of an imported table) and appends refuel.
func (m *module) rewriteImports(r *wasmbin.Reader) ([]byte, error) {
	out, err := rewriteVec(r, 4, 1, "import section longer than its imports", func(_ int, out []byte) ([]byte, error) {
		start := r.Pos
		r.Name()
		r.Name()
		kind, err := r.Byte()
		if err != nil {
			return nil, err
		}
		// Surveyed already: skip to the next import.
		switch kind {
		case 0:
			_, err = r.U32()
		case 1:
			return m.copyTableType(r, start, out)
		case 2:
			_, _, _, err = r.Limits()
		case 3:
			if err = m.valType(r); err == nil {
				_, err = r.Byte()
			}
		case 4:
			if _, err = r.Byte(); err == nil {
				_, err = r.U32()
			}
		}
		if err != nil {
			return nil, err
		}
		return append(out, m.b[start:r.Pos]...), nil
	})
	if err != nil {
		return nil, err
	}
	return m.appendImport(out), nil
}

// copyTableType appends the table type at r (from start, which may be
// before it) and its initialiser, renumbered.
func (m *module) copyTableType(r *wasmbin.Reader, start int, out []byte) ([]byte, error) {
	init, err := m.tableType(r)
	if err != nil {
		return nil, err
	}
	out = append(out, m.b[start:r.Pos]...)
	if init {
		return m.constExpr(r, out)
	}
	return out, nil
}

// skipConstExpr skips a constant expression (in the survey, before the
// function count is known).
func skipConstExpr(r *wasmbin.Reader) error {
	m := &module{b: r.Buf, funcs: 1<<32 - 1, globals: 1<<32 - 1}
	_, err := m.constExpr(r, nil)
	return err
}

func (m *module) rewriteTables(r *wasmbin.Reader) ([]byte, error) {
	return rewriteVec(r, 3, 0, "table section longer than its tables", func(_ int, out []byte) ([]byte, error) {
		return m.copyTableType(r, r.Pos, out)
	})
}

func (m *module) rewriteExports(r *wasmbin.Reader) ([]byte, error) {
	return rewriteVec(r, 3, 0, "export section longer than its exports", func(_ int, out []byte) ([]byte, error) {
		start := r.Pos
		if _, err := r.Name(); err != nil {
			return nil, err
		}
		kind, err := r.Byte()
		if err != nil {
			return nil, err
		}
		out = append(out, m.b[start:r.Pos]...)
		idx, err := r.U32()
		if err != nil {
			return nil, err
		}
		switch kind {
		case 0:
			if idx, err = m.funcIndex(r, idx); err != nil {
				return nil, err
			}
		case 3:
			if err := m.globalIndex(r, idx); err != nil {
				return nil, err
			}
		}
		return wasmbin.AppendU32(out, idx), nil
	})
}

func (m *module) rewriteElements(r *wasmbin.Reader) ([]byte, error) {
	return rewriteVec(r, 2, 0, "element section longer than its segments", func(i int, out []byte) ([]byte, error) {
		start := r.Pos
		flags, err := r.U32()
		if err != nil {
			return nil, err
		}
		if flags > 7 {
			return nil, r.Fail("element segment %d: unknown flags %d", i, flags)
		}
		if flags&3 == 2 { // explicit table index
			if _, err := r.U32(); err != nil {
				return nil, err
			}
		}
		out = append(out, m.b[start:r.Pos]...)
		if flags&1 == 0 { // active: offset expression
			if out, err = m.constExpr(r, out); err != nil {
				return nil, err
			}
		}
		start = r.Pos
		if flags&3 != 0 { // element kind or reference type
			if flags&4 == 0 {
				_, err = r.Byte()
			} else {
				err = m.valType(r)
			}
			if err != nil {
				return nil, err
			}
		}
		k, err := r.Count(1)
		if err != nil {
			return nil, err
		}
		out = append(out, m.b[start:r.Pos]...)
		for ; k > 0; k-- {
			if flags&4 != 0 {
				if out, err = m.constExpr(r, out); err != nil {
					return nil, err
				}
				continue
			}
			f, err := r.U32()
			if err != nil {
				return nil, err
			}
			if f, err = m.funcIndex(r, f); err != nil {
				return nil, err
			}
			out = wasmbin.AppendU32(out, f)
		}
		return out, nil
	})
}

func (m *module) rewriteData(r *wasmbin.Reader) ([]byte, error) {
	return rewriteVec(r, 2, 0, "data section longer than its segments", func(i int, out []byte) ([]byte, error) {
		start := r.Pos
		flags, err := r.U32()
		if err != nil {
			return nil, err
		}
		switch flags {
		case 0:
			out, err = m.constExpr(r, append(out, m.b[start:r.Pos]...))
		case 1:
			out = append(out, m.b[start:r.Pos]...)
		case 2:
			if _, err = r.U32(); err == nil {
				out, err = m.constExpr(r, append(out, m.b[start:r.Pos]...))
			}
		default:
			return nil, r.Fail("data segment %d: unknown flags %d", i, flags)
		}
		if err != nil {
			return nil, err
		}
		start = r.Pos
		k, err := r.U32()
		if err != nil {
			return nil, err
		}
		if err := r.Skip(uint64(k)); err != nil {
			return nil, err
		}
		return append(out, m.b[start:r.Pos]...), nil
	})
}

// rewriteNames keeps the module name and renumbers the function and local
// names; other subsections are dropped (label names no longer match the
// blocks, and wazero reads none of the others). A malformed name section
// is dropped: names are only for stack traces.
func (m *module) rewriteNames(r *wasmbin.Reader) ([]byte, bool) {
	out := wasmbin.AppendU32(nil, 4)
	out = append(out, "name"...)
	for r.Pos < r.End {
		id, _ := r.Byte()
		size, err := r.U32()
		if err != nil || uint64(size) > uint64(r.Left()) {
			return nil, false
		}
		sub := &wasmbin.Reader{Buf: r.Buf, Pos: r.Pos, End: r.Pos + int(size)}
		r.Pos = sub.End
		var content []byte
		switch id {
		case 0:
			content = sub.Buf[sub.Pos:sub.End]
		case 1:
			if content, err = m.nameMap(sub, nil, true); err != nil {
				return nil, false
			}
		case 2:
			k, err := sub.Count(2)
			if err != nil {
				return nil, false
			}
			content = wasmbin.AppendU32(nil, uint32(k))
			for ; k > 0; k-- {
				f, err := sub.U32()
				if err != nil {
					return nil, false
				}
				if f, err = m.funcIndex(sub, f); err != nil {
					return nil, false
				}
				content = wasmbin.AppendU32(content, f)
				if content, err = m.nameMap(sub, content, false); err != nil {
					return nil, false
				}
			}
		default:
			continue
		}
		out = append(out, id)
		out = wasmbin.AppendU32(out, uint32(len(content)))
		out = append(out, content...)
	}
	return out, true
}

// nameMap copies vec(idx name), renumbering function indices when funcs.
func (m *module) nameMap(r *wasmbin.Reader, out []byte, funcs bool) ([]byte, error) {
	k, err := r.Count(2)
	if err != nil {
		return nil, err
	}
	out = wasmbin.AppendU32(out, uint32(k))
	for ; k > 0; k-- {
		idx, err := r.U32()
		if err != nil {
			return nil, err
		}
		if funcs {
			if idx, err = m.funcIndex(r, idx); err != nil {
				return nil, err
			}
		}
		out = wasmbin.AppendU32(out, idx)
		start := r.Pos
		if _, err := r.Name(); err != nil {
			return nil, err
		}
		out = append(out, r.Buf[start:r.Pos]...)
	}
	return out, nil
}
