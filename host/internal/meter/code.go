package meter

import "github.com/wasmstream/wasmstream/host/internal/wasmbin"

// Edits of a function body, found by one decoding pass and applied by a
// copying pass.
const (
	editLoop = iota // insert a charge after the loop's block type at pos
	editFunc        // replace the function index at [pos, end) by val
	editBulk        // insert a charge of the count operand before pos, shifted by val
)

type edit struct {
	kind     int
	pos, end int
	val      uint32 // function index, loop number or shift
}

// maxCost caps one charge; a region of a body within wasmbin's bounds has
// fewer instructions anyway.
const maxCost = 1 << 26

func (m *module) rewriteCode(r *wasmbin.Reader) ([]byte, error) {
	n, err := r.Count(2)
	if err != nil {
		return nil, err
	}
	if n != len(m.funcTypes) {
		return nil, r.Fail("%d function bodies for %d functions", n, len(m.funcTypes))
	}
	out := wasmbin.AppendU32(make([]byte, 0, r.Left()+r.Left()/4+64), uint32(n))
	var fb body
	for i := 0; i < n; i++ {
		size, err := r.U32()
		if err != nil {
			return nil, err
		}
		start := r.Pos
		if err := r.Skip(uint64(size)); err != nil {
			return nil, err
		}
		fb.reset(m, i, &wasmbin.Reader{Buf: r.Buf, Pos: start, End: r.Pos})
		b, err := fb.instrument()
		if err != nil {
			return nil, err
		}
		out = wasmbin.AppendU32(out, uint32(len(b)))
		out = append(out, b...)
	}
	if r.Pos != r.End {
		return nil, r.Fail("code section longer than its bodies")
	}
	return out, nil
}

// body instruments one function body. Its slices are reused from one
// body to the next.
type body struct {
	m       *module
	fn      int
	r       *wasmbin.Reader
	scratch uint32 // the added local
	edits   []edit
	loops   []uint32 // cost of each loop, in order of their headers
	entry   uint32   // cost of the function entry
	ctrl    []bool   // open blocks: is it a loop
	region  []int    // open loop regions: loop number, -1 for the entry region
	out     []byte
}

func (fb *body) reset(m *module, fn int, r *wasmbin.Reader) {
	fb.m, fb.fn, fb.r = m, fn, r
	fb.edits, fb.loops, fb.ctrl, fb.region = fb.edits[:0], fb.loops[:0], fb.ctrl[:0], fb.region[:0]
	fb.entry = 0
}

func (fb *body) instrument() ([]byte, error) {
	m, r := fb.m, fb.r
	// Locals: the scratch local follows the parameters and declared locals.
	declStart := r.Pos
	decls, err := r.Count(2)
	if err != nil {
		return nil, err
	}
	locals := uint64(m.typeParams[m.funcTypes[fb.fn]])
	for i := 0; i < decls; i++ {
		k, err := r.U32()
		if err != nil {
			return nil, err
		}
		locals += uint64(k)
		if err := m.valType(r); err != nil {
			return nil, err
		}
	}
	if locals >= 1<<32-1 {
		return nil, r.Fail("function %d declares %d locals", m.funcImports+uint32(fb.fn), locals)
	}
	fb.scratch = uint32(locals)
	declEnd := r.Pos
	if err := fb.decode(); err != nil {
		return nil, err
	}
	m.stats.Functions++
	m.stats.Loops += len(fb.loops)

	out := fb.out[:0]
	out = wasmbin.AppendU32(out, uint32(decls+1))
	// The declarations without their count, then one i32.
	dr := &wasmbin.Reader{Buf: r.Buf, Pos: declStart, End: declEnd}
	dr.U32()
	out = append(out, r.Buf[dr.Pos:declEnd]...)
	out = append(out, 0x01, 0x7f)
	out = fb.appendCharge(out, fb.entry)
	from := declEnd
	for _, e := range fb.edits {
		switch e.kind {
		case editLoop:
			out = append(out, r.Buf[from:e.pos]...)
			out = fb.appendCharge(out, fb.loops[e.val])
			from = e.pos
		case editFunc:
			out = append(out, r.Buf[from:e.pos]...)
			out = wasmbin.AppendU32(out, e.val)
			from = e.end
		case editBulk:
			out = append(out, r.Buf[from:e.pos]...)
			out = fb.appendBulkCharge(out, e.val)
			from = e.pos
		}
	}
	out = append(out, r.Buf[from:r.End]...)
	fb.out = out
	return out, nil
}

// appendCharge appends the charge of cost units (the package comment).
func (fb *body) appendCharge(out []byte, cost uint32) []byte {
	m := fb.m
	out = wasmbin.AppendU32(append(out, 0x23), m.fuel)      // global.get $fuel
	out = wasmbin.AppendS32(append(out, 0x41), int32(cost)) // i32.const cost
	out = append(out, 0x6b)                                 // i32.sub
	return fb.appendCheck(out)
}

// appendBulkCharge charges count>>shift units, count being the i32 on top of
// the stack, which it leaves there.
func (fb *body) appendBulkCharge(out []byte, shift uint32) []byte {
	m := fb.m
	out = wasmbin.AppendU32(append(out, 0x22), fb.scratch)   // local.tee $s
	out = wasmbin.AppendU32(append(out, 0x23), m.fuel)       // global.get $fuel
	out = wasmbin.AppendU32(append(out, 0x20), fb.scratch)   // local.get $s
	out = wasmbin.AppendS32(append(out, 0x41), int32(shift)) // i32.const shift
	out = append(out, 0x76, 0x6b)                            // i32.shr_u, i32.sub
	return fb.appendCheck(out)
}

// appendCheck stores the fuel on top of the stack and refuels when it is
// below zero.
func (fb *body) appendCheck(out []byte) []byte {
	m := fb.m
	out = wasmbin.AppendU32(append(out, 0x22), fb.scratch) // local.tee $s
	out = wasmbin.AppendU32(append(out, 0x24), m.fuel)     // global.set $fuel
	out = wasmbin.AppendU32(append(out, 0x20), fb.scratch) // local.get $s
	out = append(out, 0x41, 0x00, 0x48)                    // i32.const 0, i32.lt_s
	out = append(out, 0x04, 0x40)                          // if
	out = wasmbin.AppendU32(append(out, 0x10), m.refuel)   // call $refuel
	out = wasmbin.AppendU32(append(out, 0x24), m.fuel)     // global.set $fuel
	return append(out, 0x0b)                               // end
}

// count charges one instruction to the innermost open region.
func (fb *body) count() {
	if top := fb.region[len(fb.region)-1]; top < 0 {
		if fb.entry < maxCost {
			fb.entry++
		}
	} else if fb.loops[top] < maxCost {
		fb.loops[top]++
	}
}

// decode walks the instructions of the body, counting each region's
// instructions and recording the edits.
func (fb *body) decode() error {
	m, r := fb.m, fb.r
	fb.ctrl = append(fb.ctrl, false)
	fb.region = append(fb.region, -1)
	for len(fb.ctrl) > 0 {
		if r.Pos >= r.End {
			return r.Fail("function %d: body ends inside a block", m.funcImports+uint32(fb.fn))
		}
		start := r.Pos
		op, _ := r.Byte()
		fb.count()
		if err := fb.instruction(op, start); err != nil {
			return err
		}
	}
	if r.Pos != r.End {
		return r.Fail("function %d: %d bytes after the end of its body", m.funcImports+uint32(fb.fn), r.End-r.Pos)
	}
	return nil
}

// instruction reads the immediates of the instruction op, whose opcode is
// at start: a block, loop or end opens or closes a block (a loop its
// region too, and its charge's edit), the others go to operands.
func (fb *body) instruction(op byte, start int) error {
	r := fb.r
	switch op {
	case 0x02, 0x04: // block, if
		err := fb.blockType()
		fb.ctrl = append(fb.ctrl, false)
		return err
	case 0x03: // loop
		if err := fb.blockType(); err != nil {
			return err
		}
		fb.ctrl = append(fb.ctrl, true)
		fb.region = append(fb.region, len(fb.loops))
		fb.edits = append(fb.edits, edit{kind: editLoop, pos: r.Pos, val: uint32(len(fb.loops))})
		fb.loops = append(fb.loops, 0)
		return nil
	case 0x0b: // end
		if fb.ctrl[len(fb.ctrl)-1] {
			fb.region = fb.region[:len(fb.region)-1]
		}
		fb.ctrl = fb.ctrl[:len(fb.ctrl)-1]
		return nil
	case 0x0c, 0x0d: // br, br_if
		_, err := r.U32()
		return err
	case 0x0e: // br_table
		n, err := r.U32()
		if err != nil {
			return err
		}
		for i := uint64(0); i <= uint64(n) && err == nil; i++ {
			_, err = r.U32()
		}
		return err
	}
	return fb.operands(op, start)
}

// operands reads the immediates of an instruction that opens or closes no
// block, and refuses an opcode that is not WebAssembly 2.0's.
func (fb *body) operands(op byte, start int) error {
	switch {
	case op == 0x00, op == 0x01, op == 0x05, op == 0x0f, op == 0x1a, op == 0x1b, op == 0xd1,
		op >= 0x45 && op <= 0xc4:
		return nil // no immediates
	case op == 0x10, op == 0xd2: // call, ref.func
		return fb.funcRef()
	case op == 0x11: // call_indirect
		if err := fb.typeRef(); err != nil {
			return err
		}
		_, err := fb.r.U32()
		return err
	case op == 0x1c: // select t*
		return fb.selectTypes()
	case op >= 0x20 && op <= 0x26: // local.*, global.*, table.get, set
		return fb.variable(op)
	case op >= 0x28 && op <= 0x44: // loads, stores, memory.size, grow, constants
		return fb.memoryOrConst(op)
	case op == 0xd0: // ref.null
		c, err := fb.r.Byte()
		if err == nil && c != 0x70 && c != 0x6f && c != 0x69 {
			return fb.r.Fail("ref.null of type 0x%x (typed references are not supported)", c)
		}
		return err
	case op == 0xfc:
		return fb.misc(start)
	case op == 0xfd:
		return fb.simd()
	}
	return fb.r.Fail("function %d: opcode 0x%x is not a WebAssembly 2.0 instruction", fb.m.funcImports+uint32(fb.fn), op)
}

// selectTypes reads select's value types: wazero takes one byte, 1.
func (fb *body) selectTypes() error {
	c, err := fb.r.Byte()
	if err != nil {
		return err
	}
	if c != 1 {
		return fb.r.Fail("select with %d types", c)
	}
	return fb.m.valType(fb.r)
}

// variable reads the index of local.get, set, tee (0x20-0x22), global.get,
// set (0x23, 0x24, checked) or table.get, set (0x25, 0x26).
func (fb *body) variable(op byte) error {
	i, err := fb.r.U32()
	if err == nil && (op == 0x23 || op == 0x24) {
		err = fb.m.globalIndex(fb.r, i)
	}
	return err
}

// memoryOrConst reads the immediates of a load or store (0x28-0x3e),
// memory.size or grow (0x3f, 0x40) or a constant (0x41-0x44).
func (fb *body) memoryOrConst(op byte) error {
	r := fb.r
	switch {
	case op <= 0x3e:
		return fb.memArg()
	case op <= 0x40:
		return fb.zeroByte()
	case op == 0x41:
		return r.SkipSigned(5)
	case op == 0x42:
		return r.SkipSigned(10)
	case op == 0x43:
		return r.Skip(4)
	}
	return r.Skip(8)
}

// blockType reads a block type as wazero does (a signed 33-bit integer:
// empty, a value type, a reference type with its heap type, or a type index).
func (fb *body) blockType() error {
	r := fb.r
	v, err := r.S33()
	if err != nil {
		return err
	}
	switch {
	case v == -64, v >= -5 && v <= -1, v == -16, v == -17, v == -23:
		return nil
	case v == -29 || v == -28: // (ref null ht), (ref ht)
		ht, err := r.S33()
		if err != nil {
			return err
		}
		if ht >= int64(fb.m.types) {
			return r.Fail("block type refers to type %d, but the module has %d types", ht, fb.m.types)
		}
		return nil
	case v >= 0:
		if v >= int64(fb.m.types) {
			return r.Fail("block type %d, but the module has %d types", v, fb.m.types)
		}
		return nil
	}
	return r.Fail("unknown block type %d", v)
}

func (fb *body) typeRef() error {
	t, err := fb.r.U32()
	if err != nil {
		return err
	}
	if int64(t) >= int64(fb.m.types) {
		return fb.r.Fail("call_indirect of type %d, but the module has %d types", t, fb.m.types)
	}
	return nil
}

func (fb *body) funcRef() error {
	r := fb.r
	start := r.Pos
	f, err := r.U32()
	if err != nil {
		return err
	}
	g, err := fb.m.funcIndex(r, f)
	if err != nil {
		return err
	}
	if g != f {
		fb.edits = append(fb.edits, edit{kind: editFunc, pos: start, end: r.Pos, val: g})
	}
	return nil
}

// memArg reads alignment and offset; wazero refuses an alignment from 32.
func (fb *body) memArg() error {
	a, err := fb.r.U32()
	if err != nil {
		return err
	}
	if a >= 32 {
		return fb.r.Fail("memory alignment 2^%d", a)
	}
	_, err = fb.r.U32()
	return err
}

// zeroByte reads a reserved memory index: one byte, zero.
func (fb *body) zeroByte() error {
	c, err := fb.r.Byte()
	if err == nil && c != 0 {
		return fb.r.Fail("memory index %d (one memory only)", c)
	}
	return err
}

// misc reads a 0xfc instruction whose prefix is at start.
func (fb *body) misc(start int) error {
	r := fb.r
	sub, err := r.U32()
	if err != nil {
		return err
	}
	bulk := func(shift uint32) {
		fb.edits = append(fb.edits, edit{kind: editBulk, pos: start, val: shift})
		fb.m.stats.Bulk++
	}
	switch {
	case sub <= 7: // saturating truncations
		return nil
	case sub == 8: // memory.init data 0
		if _, err = r.U32(); err == nil {
			err = fb.zeroByte()
		}
		bulk(memShift)
	case sub == 9 || sub == 13: // data.drop, elem.drop
		_, err = r.U32()
	case sub == 10: // memory.copy 0 0
		if err = fb.zeroByte(); err == nil {
			err = fb.zeroByte()
		}
		bulk(memShift)
	case sub == 11: // memory.fill 0
		err = fb.zeroByte()
		bulk(memShift)
	case sub == 12 || sub == 14: // table.init elem table, table.copy table table
		if _, err = r.U32(); err == nil {
			_, err = r.U32()
		}
		bulk(tableShift)
	case sub == 15 || sub == 16: // table.grow, table.size
		_, err = r.U32()
	case sub == 17: // table.fill
		_, err = r.U32()
		bulk(tableShift)
	default:
		return r.Fail("function %d: opcode 0xfc %d is not a WebAssembly 2.0 instruction", fb.m.funcImports+uint32(fb.fn), sub)
	}
	return err
}

// simd reads a 0xfd instruction. wazero reads the opcode as one byte; an
// opcode from 128 (two LEB128 bytes, the second 0x01) then reads as that
// byte followed by a nop, which is what the decoder sees too.
func (fb *body) simd() error {
	r := fb.r
	sub, err := r.Byte()
	if err != nil {
		return err
	}
	switch {
	case sub <= 11 || sub == 92 || sub == 93: // loads, store, load_zero
		return fb.memArg()
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		return r.Skip(16)
	case sub >= 21 && sub <= 34: // extract_lane, replace_lane
		_, err = r.Byte()
	case sub >= 84 && sub <= 91: // load_lane, store_lane
		if err = fb.memArg(); err == nil {
			_, err = r.Byte()
		}
	}
	return err
}
