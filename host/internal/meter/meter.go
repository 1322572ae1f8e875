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
	"fmt"
	"strings"
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

// Section ids.
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

// order ranks the known sections as the binary format orders them.
func order(id byte) int {
	switch id {
	case secType:
		return 1
	case secImport:
		return 2
	case secFunction:
		return 3
	case secTable:
		return 4
	case secMemory:
		return 5
	case secTag:
		return 6
	case secGlobal:
		return 7
	case secExport:
		return 8
	case secStart:
		return 9
	case secElement:
		return 10
	case secDataCount:
		return 11
	case secCode:
		return 12
	case secData:
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
		for _, id := range []byte{secType, secImport, secGlobal} {
			if !added[id] && order(id) < before {
				added[id] = true
				out = appendSection(out, id, m.newSection(id))
			}
		}
	}
	for _, s := range m.sections {
		if s.id != secCustom {
			addMissing(order(s.id))
		}
		content, keep, err := m.rewrite(s)
		if err != nil {
			return nil, Stats{}, err
		}
		if keep {
			if s.id == secType || s.id == secImport || s.id == secGlobal {
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
	out = appendU32(out, uint32(len(content)))
	return append(out, content...)
}

// newSection is the content of a section the module lacks: only what the
// meter adds.
func (m *module) newSection(id byte) []byte {
	switch id {
	case secType:
		return m.appendType([]byte{1})
	case secImport:
		return m.appendImport([]byte{1})
	default:
		return m.appendGlobal([]byte{1})
	}
}

func (m *module) appendType(b []byte) []byte { return append(b, 0x60, 0x00, 0x01, 0x7f) }

func (m *module) appendImport(b []byte) []byte {
	b = appendU32(b, uint32(len(ImportModule)))
	b = append(b, ImportModule...)
	b = appendU32(b, uint32(len(ImportName)))
	b = append(b, ImportName...)
	b = append(b, 0x00)
	return appendU32(b, m.typeIdx)
}

func (m *module) appendGlobal(b []byte) []byte { return append(b, 0x7f, 0x01, 0x41, 0x00, 0x0b) }

// split finds the sections.
func (m *module) split() error {
	r := &reader{b: m.b, pos: 8, end: len(m.b)}
	last := 0
	for r.pos < r.end {
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil {
			return err
		}
		if uint64(size) > uint64(r.left()) {
			return r.fail("section %d declares %d bytes, %d left in the module", id, size, r.left())
		}
		if id != secCustom {
			o := order(id)
			if o == 0 {
				return r.fail("unknown section id %d", id)
			}
			if o <= last {
				return r.fail("section %d out of order", id)
			}
			last = o
		}
		m.sections = append(m.sections, section{id: id, start: r.pos, end: r.pos + int(size)})
		r.pos += int(size)
	}
	return nil
}

func (m *module) sectionReader(s section) *reader {
	return &reader{b: m.b, pos: s.start, end: s.end}
}

// survey reads the index spaces: types, imports, functions and globals.
func (m *module) survey() error {
	for _, s := range m.sections {
		r := m.sectionReader(s)
		var err error
		switch s.id {
		case secType:
			err = m.surveyTypes(r)
		case secImport:
			err = m.surveyImports(r)
		case secFunction:
			var n int
			if n, err = r.count(1); err != nil {
				return err
			}
			m.funcTypes = make([]uint32, n)
			for i := range m.funcTypes {
				if m.funcTypes[i], err = r.u32(); err != nil {
					return err
				}
				if int(m.funcTypes[i]) >= m.types {
					return r.fail("function %d has type %d, but the module has %d types", i, m.funcTypes[i], m.types)
				}
			}
		case secGlobal:
			var n int
			if n, err = r.count(3); err != nil {
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

func (m *module) surveyTypes(r *reader) error {
	n, err := r.count(3)
	if err != nil {
		return err
	}
	m.types = n
	m.typeParams = make([]uint32, n)
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
				m.typeParams[i] = uint32(k)
			}
			for ; k > 0; k-- {
				if err := m.valType(r); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// valType reads a value type. A reference to a concrete type (typed
// function references) must name a type of the original module.
func (m *module) valType(r *reader) error {
	c, err := r.byte()
	if err != nil {
		return err
	}
	switch c {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f, 0x69:
		return nil
	case 0x63, 0x64: // (ref null ht), (ref ht)
		ht, err := r.s33()
		if err != nil {
			return err
		}
		if ht >= int64(m.types) {
			return r.fail("reference to type %d, but the module has %d types", ht, m.types)
		}
		return nil
	}
	return r.fail("unknown value type 0x%x", c)
}

// tableType reads a table type as wazero does: an optional initialiser
// prefix (0x40 0x00, reported), a reference type (wazero takes any byte,
// refusing an unusable one later), and limits.
func (m *module) tableType(r *reader) (init bool, err error) {
	if r.pos < r.end && r.b[r.pos] == 0x40 {
		r.pos++
		if c, err := r.byte(); err != nil || c != 0 {
			return false, r.fail("bad table initialiser prefix")
		}
		init = true
	}
	c, err := r.byte()
	if err != nil {
		return false, err
	}
	if c == 0x63 || c == 0x64 {
		r.pos--
		if err := m.valType(r); err != nil {
			return false, err
		}
	}
	return init, r.limits()
}

func (m *module) surveyImports(r *reader) error {
	n, err := r.count(4)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		mod, err := r.name()
		if err != nil {
			return err
		}
		name, err := r.name()
		if err != nil {
			return err
		}
		if mod == ImportModule {
			return r.fail("imports %s.%s: the module %q is the host's own (the meter)", mod, name, ImportModule)
		}
		kind, err := r.byte()
		if err != nil {
			return err
		}
		switch kind {
		case 0:
			m.funcImports++
			var t uint32
			if t, err = r.u32(); err == nil && int64(t) >= int64(m.types) {
				// wazero v1.12 panics validating a call to such a function.
				err = r.fail("import %d has type %d, but the module has %d types", i, t, m.types)
			}
		case 1:
			var init bool
			if init, err = m.tableType(r); err == nil && init {
				err = skipConstExpr(r)
			}
		case 2:
			err = r.limits()
		case 3:
			m.globals++
			if err = m.valType(r); err == nil {
				_, err = r.byte()
			}
		case 4:
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

// funcIndex maps a function index of the original to the instrumented
// module's, refusing one out of range.
func (m *module) funcIndex(r *reader, f uint32) (uint32, error) {
	if f >= m.funcs {
		return 0, r.fail("reference to function %d, but the module has %d functions", f, m.funcs)
	}
	if f >= m.funcImports {
		return f + 1, nil
	}
	return f, nil
}

func (m *module) globalIndex(r *reader, g uint32) error {
	if g >= m.globals {
		return r.fail("reference to global %d, but the module has %d globals", g, m.globals)
	}
	return nil
}

// rewrite returns the instrumented content of section s, or keep=false to
// drop it.
func (m *module) rewrite(s section) (content []byte, keep bool, err error) {
	r := m.sectionReader(s)
	orig := m.b[s.start:s.end]
	switch s.id {
	case secType:
		n, _ := r.u32()
		b := appendU32(nil, n+1)
		b = append(b, m.b[r.pos:s.end]...)
		return m.appendType(b), true, nil
	case secImport:
		b, err := m.rewriteImports(r)
		return b, true, err
	case secGlobal:
		b, err := m.rewriteGlobals(r)
		return b, true, err
	case secTable:
		b, err := m.rewriteTables(r)
		return b, true, err
	case secExport:
		b, err := m.rewriteExports(r)
		return b, true, err
	case secStart:
		f, err := r.u32()
		if err != nil {
			return nil, false, err
		}
		if f, err = m.funcIndex(r, f); err != nil {
			return nil, false, err
		}
		if r.pos != r.end {
			return nil, false, r.fail("start section longer than its function index")
		}
		return appendU32(nil, f), true, nil
	case secElement:
		b, err := m.rewriteElements(r)
		return b, true, err
	case secCode:
		b, err := m.rewriteCode(r)
		return b, true, err
	case secData:
		b, err := m.rewriteData(r)
		return b, true, err
	case secCustom:
		name, err := r.name()
		if err != nil {
			return nil, false, err
		}
		switch {
		case name == "name":
			b, ok := m.rewriteNames(r)
			return b, ok, nil
		case strings.HasPrefix(name, ".debug_"):
			return nil, false, nil // DWARF: its code offsets no longer hold
		}
		return orig, true, nil
	}
	return orig, true, nil
}

// constExpr copies a constant expression up to and including its end,
// renumbering ref.func and checking global.get.
func (m *module) constExpr(r *reader, out []byte) ([]byte, error) {
	for {
		start := r.pos
		op, err := r.byte()
		if err != nil {
			return nil, err
		}
		switch op {
		case 0x0b:
			return append(out, op), nil
		case 0x41:
			err = r.sleb(5)
		case 0x42:
			err = r.sleb(10)
		case 0x43:
			err = r.skip(4)
		case 0x44:
			err = r.skip(8)
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended constants
		case 0x23:
			var g uint32
			if g, err = r.u32(); err == nil {
				err = m.globalIndex(r, g)
			}
		case 0xd0:
			var c byte
			if c, err = r.byte(); err == nil && c != 0x70 && c != 0x6f && c != 0x69 {
				err = r.fail("ref.null of type 0x%x", c)
			}
		case 0xd2:
			var f uint32
			if f, err = r.u32(); err != nil {
				return nil, err
			}
			if f, err = m.funcIndex(r, f); err != nil {
				return nil, err
			}
			out = appendU32(append(out, op), f)
			continue
		case 0xfd:
			var c byte
			if c, err = r.byte(); err == nil {
				if c != 12 {
					return nil, r.fail("opcode 0xfd %d in a constant expression", c)
				}
				err = r.skip(16)
			}
		default:
			return nil, r.fail("opcode 0x%x in a constant expression", op)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m.b[start:r.pos]...)
	}
}

func (m *module) rewriteGlobals(r *reader) ([]byte, error) {
	n, err := r.count(3)
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, uint32(n+1))
	for i := 0; i < n; i++ {
		start := r.pos
		if err := m.valType(r); err != nil {
			return nil, err
		}
		if _, err := r.byte(); err != nil {
			return nil, err
		}
		out = append(out, m.b[start:r.pos]...)
		if out, err = m.constExpr(r, out); err != nil {
			return nil, err
		}
	}
	if r.pos != r.end {
		return nil, r.fail("global section longer than its globals")
	}
	return m.appendGlobal(out), nil
}

// rewriteImports copies the imports (renumbering ref.func in the
// initialiser of an imported table) and appends refuel.
func (m *module) rewriteImports(r *reader) ([]byte, error) {
	n, err := r.count(4)
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, uint32(n+1))
	for i := 0; i < n; i++ {
		start := r.pos
		r.name()
		r.name()
		kind, err := r.byte()
		if err != nil {
			return nil, err
		}
		if kind != 1 {
			// Surveyed already: skip to the next import.
			switch kind {
			case 0:
				_, err = r.u32()
			case 2:
				err = r.limits()
			case 3:
				if err = m.valType(r); err == nil {
					_, err = r.byte()
				}
			case 4:
				if _, err = r.byte(); err == nil {
					_, err = r.u32()
				}
			}
			if err != nil {
				return nil, err
			}
			out = append(out, m.b[start:r.pos]...)
			continue
		}
		init, err := m.tableType(r)
		if err != nil {
			return nil, err
		}
		out = append(out, m.b[start:r.pos]...)
		if init {
			if out, err = m.constExpr(r, out); err != nil {
				return nil, err
			}
		}
	}
	if r.pos != r.end {
		return nil, r.fail("import section longer than its imports")
	}
	return m.appendImport(out), nil
}

// skipConstExpr skips a constant expression (in the survey, before the
// function count is known).
func skipConstExpr(r *reader) error {
	m := &module{b: r.b, funcs: 1<<32 - 1, globals: 1<<32 - 1}
	_, err := m.constExpr(r, nil)
	return err
}

func (m *module) rewriteTables(r *reader) ([]byte, error) {
	n, err := r.count(3)
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, uint32(n))
	for i := 0; i < n; i++ {
		start := r.pos
		init, err := m.tableType(r)
		if err != nil {
			return nil, err
		}
		out = append(out, m.b[start:r.pos]...)
		if init {
			if out, err = m.constExpr(r, out); err != nil {
				return nil, err
			}
		}
	}
	if r.pos != r.end {
		return nil, r.fail("table section longer than its tables")
	}
	return out, nil
}

func (m *module) rewriteExports(r *reader) ([]byte, error) {
	n, err := r.count(3)
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, uint32(n))
	for i := 0; i < n; i++ {
		start := r.pos
		if _, err := r.name(); err != nil {
			return nil, err
		}
		kind, err := r.byte()
		if err != nil {
			return nil, err
		}
		out = append(out, m.b[start:r.pos]...)
		idx, err := r.u32()
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
		out = appendU32(out, idx)
	}
	if r.pos != r.end {
		return nil, r.fail("export section longer than its exports")
	}
	return out, nil
}

func (m *module) rewriteElements(r *reader) ([]byte, error) {
	n, err := r.count(2)
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, uint32(n))
	for i := 0; i < n; i++ {
		start := r.pos
		flags, err := r.u32()
		if err != nil {
			return nil, err
		}
		if flags > 7 {
			return nil, r.fail("element segment %d: unknown flags %d", i, flags)
		}
		if flags&3 == 2 { // explicit table index
			if _, err := r.u32(); err != nil {
				return nil, err
			}
		}
		out = append(out, m.b[start:r.pos]...)
		if flags&1 == 0 { // active: offset expression
			if out, err = m.constExpr(r, out); err != nil {
				return nil, err
			}
		}
		start = r.pos
		if flags&3 != 0 { // element kind or reference type
			if flags&4 == 0 {
				_, err = r.byte()
			} else {
				err = m.valType(r)
			}
			if err != nil {
				return nil, err
			}
		}
		k, err := r.count(1)
		if err != nil {
			return nil, err
		}
		out = append(out, m.b[start:r.pos]...)
		for ; k > 0; k-- {
			if flags&4 != 0 {
				if out, err = m.constExpr(r, out); err != nil {
					return nil, err
				}
				continue
			}
			f, err := r.u32()
			if err != nil {
				return nil, err
			}
			if f, err = m.funcIndex(r, f); err != nil {
				return nil, err
			}
			out = appendU32(out, f)
		}
	}
	if r.pos != r.end {
		return nil, r.fail("element section longer than its segments")
	}
	return out, nil
}

func (m *module) rewriteData(r *reader) ([]byte, error) {
	n, err := r.count(2)
	if err != nil {
		return nil, err
	}
	out := appendU32(nil, uint32(n))
	for i := 0; i < n; i++ {
		start := r.pos
		flags, err := r.u32()
		if err != nil {
			return nil, err
		}
		switch flags {
		case 0:
			out = append(out, m.b[start:r.pos]...)
			out, err = m.constExpr(r, out)
		case 1:
			out = append(out, m.b[start:r.pos]...)
		case 2:
			if _, err = r.u32(); err == nil {
				out = append(out, m.b[start:r.pos]...)
				out, err = m.constExpr(r, out)
			}
		default:
			return nil, r.fail("data segment %d: unknown flags %d", i, flags)
		}
		if err != nil {
			return nil, err
		}
		start = r.pos
		k, err := r.u32()
		if err != nil {
			return nil, err
		}
		if err := r.skip(uint64(k)); err != nil {
			return nil, err
		}
		out = append(out, m.b[start:r.pos]...)
	}
	if r.pos != r.end {
		return nil, r.fail("data section longer than its segments")
	}
	return out, nil
}

// rewriteNames keeps the module name and renumbers the function and local
// names; other subsections are dropped (label names no longer match the
// blocks, and wazero reads none of the others). A malformed name section
// is dropped: names are only for stack traces.
func (m *module) rewriteNames(r *reader) ([]byte, bool) {
	out := appendU32(nil, 4)
	out = append(out, "name"...)
	for r.pos < r.end {
		id, _ := r.byte()
		size, err := r.u32()
		if err != nil || uint64(size) > uint64(r.left()) {
			return nil, false
		}
		sub := &reader{b: r.b, pos: r.pos, end: r.pos + int(size)}
		r.pos = sub.end
		var content []byte
		switch id {
		case 0:
			content = sub.b[sub.pos:sub.end]
		case 1:
			if content, err = m.nameMap(sub, nil, true); err != nil {
				return nil, false
			}
		case 2:
			k, err := sub.count(2)
			if err != nil {
				return nil, false
			}
			content = appendU32(nil, uint32(k))
			for ; k > 0; k-- {
				f, err := sub.u32()
				if err != nil {
					return nil, false
				}
				if f, err = m.funcIndex(sub, f); err != nil {
					return nil, false
				}
				content = appendU32(content, f)
				if content, err = m.nameMap(sub, content, false); err != nil {
					return nil, false
				}
			}
		default:
			continue
		}
		out = append(out, id)
		out = appendU32(out, uint32(len(content)))
		out = append(out, content...)
	}
	return out, true
}

// nameMap copies vec(idx name), renumbering function indices when funcs.
func (m *module) nameMap(r *reader, out []byte, funcs bool) ([]byte, error) {
	k, err := r.count(2)
	if err != nil {
		return nil, err
	}
	out = appendU32(out, uint32(k))
	for ; k > 0; k-- {
		idx, err := r.u32()
		if err != nil {
			return nil, err
		}
		if funcs {
			if idx, err = m.funcIndex(r, idx); err != nil {
				return nil, err
			}
		}
		out = appendU32(out, idx)
		start := r.pos
		if _, err := r.name(); err != nil {
			return nil, err
		}
		out = append(out, r.b[start:r.pos]...)
	}
	return out, nil
}
