package avrocodec

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/twmb/avro"
)

// The direct encoder: JSON to Avro binary without the Go values of the
// generic path. A small scanner reads the JSON into a flat list of tokens
// (a container's token says where its values end, so a record's fields can
// be taken in the schema's order whatever the JSON's), and a walk of the
// prepared schema nodes over the tokens appends the binary encoding.
//
// The walk makes the generic path's choices: the checks and messages of
// conv (encode.go) in the same order, the union branch conv would pick, and
// the library's encoding of each value (a leaf whose JSON form the library
// interprets, a timestamp text or a decimal, goes through the library with
// a schema of the leaf alone, node.leaf). TestDirectEncodeMatchesGeneric
// compares the two on random values. Errors come in two kinds, as on the
// generic path: conv's (the value does not fit the node: a union tries its
// next branch) and the library's (the value fits but does not encode: a
// union does not try another branch, and conv's errors anywhere in the value
// come first). A record field left out whose default is not null takes the
// whole value through the generic path.

// errFallback: the value needs the generic path.
var errFallback = errors.New("generic path")

// jkind is a JSON token's kind.
type jkind uint8

const (
	jNull jkind = iota
	jTrue
	jFalse
	jNum
	jStr
	jArr
	jObj
)

// jtok is one JSON value (or an object member's key).
type jtok struct {
	kind jkind
	// inBuf: a string's text, unescaped, lies in parser.strs, else in the
	// input.
	inBuf      bool
	start, end int32 // a number's or string's text
	next       int32 // the index of the token after this value
	count      int32 // a container's values (an object's members)
}

// parser reads one JSON value into tokens; its slices are reused through
// encPool.
type parser struct {
	in   []byte
	pos  int
	toks []jtok
	strs []byte
}

type syntaxError struct {
	msg string
	off int
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.msg, e.off) }

func (p *parser) fail(msg string) error { return &syntaxError{msg: msg, off: p.pos} }

func (p *parser) ws() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// parse reads in, one JSON value with whitespace around it. Nesting is
// bounded before (jsonlimit.CheckDepth), so the recursion is.
func (p *parser) parse(in []byte) error {
	p.in, p.pos = in, 0
	p.toks, p.strs = p.toks[:0], p.strs[:0]
	if err := p.value(); err != nil {
		return err
	}
	p.ws()
	if p.pos != len(p.in) {
		return errors.New("more than one value")
	}
	return nil
}

func (p *parser) value() error {
	p.ws()
	if p.pos >= len(p.in) {
		return p.fail("unexpected end of JSON input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.container(jObj, '}')
	case c == '[':
		return p.container(jArr, ']')
	case c == '"':
		return p.str()
	case c == 't':
		return p.literal("true", jTrue)
	case c == 'f':
		return p.literal("false", jFalse)
	case c == 'n':
		return p.literal("null", jNull)
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	}
	return p.fail(fmt.Sprintf("invalid character %q looking for a value", p.in[p.pos]))
}

func (p *parser) literal(word string, k jkind) error {
	if len(p.in)-p.pos < len(word) || string(p.in[p.pos:p.pos+len(word)]) != word {
		return p.fail("invalid literal")
	}
	p.pos += len(word)
	p.toks = append(p.toks, jtok{kind: k, next: int32(len(p.toks) + 1)})
	return nil
}

func (p *parser) container(k jkind, closer byte) error {
	at := len(p.toks)
	p.toks = append(p.toks, jtok{kind: k})
	p.pos++
	p.ws()
	count := int32(0)
	if p.pos < len(p.in) && p.in[p.pos] == closer {
		p.pos++
	} else {
		for {
			if k == jObj {
				p.ws()
				if p.pos >= len(p.in) || p.in[p.pos] != '"' {
					return p.fail("want an object key")
				}
				if err := p.str(); err != nil {
					return err
				}
				p.ws()
				if p.pos >= len(p.in) || p.in[p.pos] != ':' {
					return p.fail("want ':' after an object key")
				}
				p.pos++
			}
			if err := p.value(); err != nil {
				return err
			}
			count++
			p.ws()
			if p.pos >= len(p.in) {
				return p.fail("unexpected end of JSON input")
			}
			c := p.in[p.pos]
			p.pos++
			if c == closer {
				break
			}
			if c != ',' {
				p.pos--
				return p.fail(fmt.Sprintf("invalid character %q after a value", c))
			}
		}
	}
	p.toks[at].next, p.toks[at].count = int32(len(p.toks)), count
	return nil
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// number reads a number as JSON writes it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *parser) number() error {
	b, i := p.in, p.pos
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		return p.fail("invalid number")
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return p.fail("invalid number")
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return p.fail("invalid number")
		}
		i = j
	}
	p.toks = append(p.toks, jtok{kind: jNum, start: int32(p.pos), end: int32(i), next: int32(len(p.toks) + 1)})
	p.pos = i
	return nil
}

func hex4(b []byte) rune {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// str reads a string. One without escapes and in valid UTF-8 stays in the
// input; another is unescaped into strs as encoding/json unquotes it (a
// lone surrogate and each invalid UTF-8 byte become U+FFFD).
func (p *parser) str() error {
	b := p.in
	start := p.pos + 1
	i := start
	for {
		if i >= len(b) {
			return p.fail("unexpected end of JSON input in a string")
		}
		c := b[i]
		if c == '"' {
			p.toks = append(p.toks, jtok{kind: jStr, start: int32(start), end: int32(i), next: int32(len(p.toks) + 1)})
			p.pos = i + 1
			return nil
		}
		if c < ' ' {
			p.pos = i
			return p.fail("invalid control character in a string")
		}
		if c == '\\' {
			break
		}
		if c < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	return p.strSlow(start, i)
}

// strSlow unescapes the string that starts at start, from i (the first
// byte the fast path could not take) into strs.
func (p *parser) strSlow(start, i int) error {
	b := p.in
	out := len(p.strs)
	p.strs = append(p.strs, b[start:i]...)
	for {
		if i >= len(b) {
			return p.fail("unexpected end of JSON input in a string")
		}
		c := b[i]
		switch {
		case c == '"':
			p.toks = append(p.toks, jtok{kind: jStr, inBuf: true, start: int32(out), end: int32(len(p.strs)), next: int32(len(p.toks) + 1)})
			p.pos = i + 1
			return nil
		case c < ' ':
			p.pos = i
			return p.fail("invalid control character in a string")
		case c == '\\':
			if i+1 >= len(b) {
				return p.fail("unexpected end of JSON input in a string")
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/':
				p.strs = append(p.strs, e)
			case 'b':
				p.strs = append(p.strs, '\b')
			case 'f':
				p.strs = append(p.strs, '\f')
			case 'n':
				p.strs = append(p.strs, '\n')
			case 'r':
				p.strs = append(p.strs, '\r')
			case 't':
				p.strs = append(p.strs, '\t')
			case 'u':
				r := hex4(b[i:])
				if r < 0 {
					p.pos = i
					return p.fail("invalid \\u escape in a string")
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if dec := utf16.DecodeRune(r, hex4(b[i:])); dec != unicode.ReplacementChar {
						i += 6
						p.strs = utf8.AppendRune(p.strs, dec)
						continue
					}
					r = unicode.ReplacementChar
				}
				p.strs = utf8.AppendRune(p.strs, r)
				continue
			default:
				p.pos = i
				return p.fail("invalid escape in a string")
			}
			i += 2
		case c < utf8.RuneSelf:
			p.strs = append(p.strs, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			p.strs = utf8.AppendRune(p.strs, r)
			i += size
		}
	}
}

// text is a number's or string's bytes.
func (p *parser) text(t *jtok) []byte {
	if t.inBuf {
		return p.strs[t.start:t.end]
	}
	return p.in[t.start:t.end]
}

// encoder is one encode's state.
type encoder struct {
	c *Codec
	p parser
	// slots is scratch for the records being encoded: for each field, the
	// token of its value (-1: left out), a stack of one span per record.
	slots []int32
	// final is the first of the library's errors; conv's come first.
	final error
	// fallback: a field left out takes a default that is not null.
	fallback bool
	// path is where the walk is, for the library's errors, which are not
	// returned up through the fields they are in.
	path []pathSeg
}

// pathSeg is a record field's name, an array index or a map key.
type pathSeg struct {
	field string
	key   []byte
	index int // -1: not an array item
}

// where is the path, as prefix writes it.
func (e *encoder) where() string {
	var p string
	for _, s := range e.path {
		switch {
		case s.index >= 0:
			p += "[" + strconv.Itoa(s.index) + "]"
		case s.key != nil:
			p += "[" + strconv.Quote(string(s.key)) + "]"
		case p == "":
			p = s.field
		default:
			p += "." + s.field
		}
	}
	return p
}

var encPool = sync.Pool{New: func() any { return new(encoder) }}

func (c *Codec) appendBinaryDirect(dst, js []byte) ([]byte, error) {
	if len(js) > math.MaxInt32 {
		return c.appendBinaryGeneric(dst, js)
	}
	e := encPool.Get().(*encoder)
	e.c, e.final, e.fallback, e.path = c, nil, false, e.path[:0]
	defer func() {
		e.c, e.p.in, e.final = nil, nil, nil
		if cap(e.p.toks) <= 1<<16 && cap(e.p.strs) <= 1<<20 {
			encPool.Put(e)
		}
	}()
	if err := e.p.parse(js); err != nil {
		return dst, &EncodeError{Err: fmt.Errorf("not JSON: %v", err)}
	}
	b, err := e.value(dst, 0, c.root, 0)
	switch {
	case err != nil:
		return dst, err
	case e.fallback:
		return c.appendBinaryGeneric(dst, js)
	case e.final != nil:
		return dst, e.final
	}
	return b, nil
}

// libError records an error of the library's (or a check of what the
// library would refuse) at path, to be returned if conv finds nothing.
func (e *encoder) libError(err error) {
	if e.final != nil {
		return
	}
	var se *avro.SemanticError
	if errors.As(err, &se) {
		inner := se.Err
		if inner == nil {
			inner = fmt.Errorf("cannot use %v as an Avro %s", se.GoType, se.AvroType)
		}
		err = inner
	}
	e.final = &EncodeError{Path: e.where(), Err: err}
}

// jsonKind names a token's JSON type in conv's words (jsonType).
func (e *encoder) jsonKind(t *jtok) string {
	switch t.kind {
	case jNull:
		return "null"
	case jTrue, jFalse:
		return "a boolean"
	case jNum:
		return "the number " + truncate(string(e.p.text(t)))
	case jStr:
		return "a string"
	case jArr:
		return "an array"
	}
	return "an object"
}

// goValue is the Go value encoding/json gives a leaf token: what conv and
// the library take. (A container gives a placeholder of its type: no leaf
// node takes one, and conv only names its type.)
func (e *encoder) goValue(t *jtok) any {
	switch t.kind {
	case jTrue:
		return true
	case jFalse:
		return false
	case jNum:
		return json.Number(e.p.text(t))
	case jStr:
		return string(e.p.text(t))
	case jArr:
		return []any{}
	case jObj:
		return map[string]any{}
	}
	return nil
}

// value appends the encoding of the value at token ti with node n. A lib
// error of the library's kind is recorded (e.final) and not returned.
func (e *encoder) value(b []byte, ti int32, n *node, depth int) ([]byte, error) {
	if depth > e.c.limits.MaxDepth {
		return b, encErr("nested deeper than %d levels", e.c.limits.MaxDepth)
	}
	switch n.kind {
	case kArray:
		return e.array(b, ti, n, depth)
	case kMap:
		return e.mapValue(b, ti, n, depth)
	case kRecord:
		return e.record(b, ti, n, depth)
	case kUnion:
		return e.union(b, ti, n, depth)
	}
	return e.primitive(b, &e.p.toks[ti], n)
}

// primitive encodes a value of a node that is not a container.
func (e *encoder) primitive(b []byte, t *jtok, n *node) ([]byte, error) {
	switch n.kind {
	case kNull:
		if t.kind != jNull {
			return b, encErr("want null, got %s", e.jsonKind(t))
		}
		return b, nil
	case kBool:
		switch t.kind {
		case jTrue:
			return append(b, 1), nil
		case jFalse:
			return append(b, 0), nil
		}
		return b, encErr("want a boolean, got %s", e.jsonKind(t))
	case kInt, kLong:
		return e.integer(b, t, n)
	case kFloat, kDouble:
		return e.float(b, t, n)
	case kString:
		if t.kind != jStr {
			return b, encErr("want a string, got %s", e.jsonKind(t))
		}
		if n.logical != "" {
			return e.leaf(b, t, n)
		}
		s := e.p.text(t)
		return append(appendLong(b, int64(len(s))), s...), nil
	case kBytes, kFixed:
		if n.logical == "decimal" && !e.c.opts.RawLogicalTypes && (t.kind == jNum || t.kind == jStr) {
			if out, ok := e.decimal(b, t, n); ok {
				return out, nil
			}
		}
		if n.logical != "" {
			return e.leaf(b, t, n)
		}
		return e.bytes(b, t, n)
	case kEnum:
		if t.kind != jStr {
			return b, encErr("want one of the symbols of enum %s, got %s", n.name, e.jsonKind(t))
		}
		i, ok := n.symIdx[string(e.p.text(t))]
		if !ok {
			return b, encErr("%q is not a symbol of enum %s (%s)", e.p.text(t), n.name, symbolList(n.symbols))
		}
		return appendLong(b, int64(i)), nil
	}
	return b, encErr("unsupported schema node")
}

func appendLong(b []byte, v int64) []byte {
	u := uint64(v)<<1 ^ uint64(v>>63)
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

// leaf converts the token as conv does and encodes the result with the
// node's own schema, as the library encodes it within the whole value.
func (e *encoder) leaf(b []byte, t *jtok, n *node) ([]byte, error) {
	v, err := e.c.conv(e.goValue(t), n, true, 0)
	if err != nil {
		return b, err
	}
	out, err := n.leaf.AppendEncode(b, v)
	if err != nil {
		e.libError(err)
		return b, nil
	}
	return out, nil
}

// float reads a float or double as convFloat and the library do: a
// number parsed as a float64 (overflow to an infinity), or the name of a
// value JSON has no number for.
func (e *encoder) float(b []byte, t *jtok, n *node) ([]byte, error) {
	var f float64
	switch s := e.p.text(t); {
	case t.kind == jNum:
		if len(s) > 1024 {
			e.libError(fmt.Errorf("float literal exceeds %d byte length cap", 1024))
			return b, nil
		}
		var err error
		if f, err = strconv.ParseFloat(string(s), 64); err != nil && !(errors.Is(err, strconv.ErrRange) && math.IsInf(f, 0)) {
			e.libError(err)
			return b, nil
		}
	case t.kind == jStr && string(s) == "NaN":
		f = math.NaN()
	case t.kind == jStr && string(s) == "Infinity":
		f = math.Inf(1)
	case t.kind == jStr && string(s) == "-Infinity":
		f = math.Inf(-1)
	default:
		return b, encErr("want a number (or \"NaN\", \"Infinity\", \"-Infinity\"), got %s", e.jsonKind(t))
	}
	if n.kind == kFloat {
		u := math.Float32bits(float32(f))
		return append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24)), nil
	}
	u := math.Float64bits(f)
	return append(b, byte(u), byte(u>>8), byte(u>>16), byte(u>>24), byte(u>>32), byte(u>>40), byte(u>>48), byte(u>>56)), nil
}

// bytes decodes base64 (standard, padded or not) as convBytes does.
func (e *encoder) bytes(b []byte, t *jtok, n *node) ([]byte, error) {
	if t.kind != jStr {
		return b, encErr("want base64 text (%s), got %s", n.branchName(), e.jsonKind(t))
	}
	s := e.p.text(t)
	mark := len(b)
	if n.kind == kBytes {
		b = appendLong(b, int64(base64.RawStdEncoding.DecodedLen(len(s))))
	}
	at := len(b)
	// (Unpadded text may hold more than the padded decoder counts.)
	b = append(b, make([]byte, base64.RawStdEncoding.DecodedLen(len(s)))...)
	m, err := base64.StdEncoding.Decode(b[at:], s)
	if err != nil {
		if m, err = base64.RawStdEncoding.Decode(b[at:], s); err != nil {
			return b[:mark], encErr("%q is not base64 (standard alphabet)", truncate(string(s)))
		}
	}
	if n.kind == kFixed {
		if m != n.size {
			return b[:mark], encErr("%d bytes, want %d (fixed %s)", m, n.size, n.name)
		}
		return b[:at+m], nil
	}
	// The length written first was the most the text could hold: now the
	// bytes decoded are known, write it again and move them up if shorter.
	var lenBuf [10]byte
	l := appendLong(lenBuf[:0], int64(m))
	copy(b[mark+len(l):], b[at:at+m])
	copy(b[mark:], l)
	return b[:mark+len(l)+m], nil
}

func (e *encoder) array(b []byte, ti int32, n *node, depth int) ([]byte, error) {
	t := &e.p.toks[ti]
	if t.kind != jArr {
		return b, encErr("want an array, got %s", e.jsonKind(t))
	}
	if t.count == 0 {
		return append(b, 0), nil
	}
	b = appendLong(b, int64(t.count))
	body := len(b)
	var err error
	e.path = append(e.path, pathSeg{})
	for i, ci := 0, ti+1; ci < t.next; i, ci = i+1, e.p.toks[ci].next {
		e.path[len(e.path)-1] = pathSeg{index: i}
		if b, err = e.value(b, ci, n.items, depth+1); err != nil {
			return b, prefix(err, "["+strconv.Itoa(i)+"]")
		}
	}
	e.path = e.path[:len(e.path)-1]
	if len(b) == body && t.count > maxZeroByteItems {
		// The library refuses what its decoder would: more zero-byte
		// items than it reads.
		e.libError(fmt.Errorf("array of %d zero-byte items exceeds the decoder's %d-element limit", t.count, maxZeroByteItems))
	}
	return append(b, 0), nil
}

// lastIndex maps each key of an object of many members to its last
// member, so repeats are found without comparing every pair; nil for a
// small object, whose members isLast compares.
func (e *encoder) lastIndex(t *jtok, ti int32) map[string]int32 {
	if t.count <= 16 {
		return nil
	}
	last := make(map[string]int32, t.count)
	for ki := ti + 1; ki < t.next; ki = e.p.toks[ki+1].next {
		last[string(e.p.text(&e.p.toks[ki]))] = ki
	}
	return last
}

// isLast says whether the member whose key is token ki is the last with its
// key in the object t (encoding/json keeps the last).
func (e *encoder) isLast(ki int32, t *jtok, last map[string]int32) bool {
	k := e.p.text(&e.p.toks[ki])
	if last != nil {
		return last[string(k)] == ki
	}
	for j := e.p.toks[ki+1].next; j < t.next; j = e.p.toks[j+1].next {
		if string(e.p.text(&e.p.toks[j])) == string(k) {
			return false
		}
	}
	return true
}

// oneKey says whether every member of the non-empty object at ti has the
// same key (encoding/json makes it a map of one entry), and returns the
// key token of the last.
func (e *encoder) oneKey(ti int32) (int32, bool) {
	t := &e.p.toks[ti]
	last := int32(-1)
	for ki := ti + 1; ki < t.next; ki = e.p.toks[ki+1].next {
		last = ki
	}
	k := e.p.text(&e.p.toks[last])
	for ki := ti + 1; ki < last; ki = e.p.toks[ki+1].next {
		if string(e.p.text(&e.p.toks[ki])) != string(k) {
			return last, false
		}
	}
	return last, true
}

func (e *encoder) mapValue(b []byte, ti int32, n *node, depth int) ([]byte, error) {
	t := &e.p.toks[ti]
	if t.kind != jObj {
		return b, encErr("want an object (an Avro map), got %s", e.jsonKind(t))
	}
	if t.count == 0 {
		return append(b, 0), nil
	}
	// The count goes before the entries and is known after them: written
	// for the most it can be, then again over it.
	mark := len(b)
	b = appendLong(b, int64(t.count))
	at := len(b)
	count := int64(0)
	last := e.lastIndex(t, ti)
	var err error
	for ki := ti + 1; ki < t.next; ki = e.p.toks[ki+1].next {
		if !e.isLast(ki, t, last) {
			continue
		}
		k := e.p.text(&e.p.toks[ki])
		b = append(appendLong(b, int64(len(k))), k...)
		e.path = append(e.path, pathSeg{key: k, index: -1})
		if b, err = e.value(b, ki+1, n.values, depth+1); err != nil {
			return b, prefix(err, "["+strconv.Quote(string(k))+"]")
		}
		e.path = e.path[:len(e.path)-1]
		count++
	}
	var lenBuf [10]byte
	l := appendLong(lenBuf[:0], count)
	if len(l) != at-mark {
		m := copy(b[mark+len(l):], b[at:])
		b = b[:mark+len(l)+m]
	}
	copy(b[mark:], l)
	return append(b, 0), nil
}

func (e *encoder) record(b []byte, ti int32, n *node, depth int) ([]byte, error) {
	t := &e.p.toks[ti]
	if t.kind != jObj {
		return b, encErr("want an object (record %s), got %s", n.name, e.jsonKind(t))
	}
	base := len(e.slots)
	for range n.fields {
		e.slots = append(e.slots, -1)
	}
	defer func() { e.slots = e.slots[:base] }()
	for ki := ti + 1; ki < t.next; ki = e.p.toks[ki+1].next {
		k := e.p.text(&e.p.toks[ki])
		i, ok := n.fieldIdx[string(k)]
		if !ok {
			return b, prefix(encErr("not a field of record %s (its fields: %s)", n.name, fieldList(n.fields)), string(k))
		}
		e.slots[base+i] = ki + 1 // the last member with the key wins
	}
	var err error
	for i := range n.fields {
		f := &n.fields[i]
		vi := e.slots[base+i]
		if vi >= 0 {
			e.path = append(e.path, pathSeg{field: f.name, index: -1})
			if b, err = e.value(b, vi, f.typ, depth+1); err != nil {
				return b, prefix(err, f.name)
			}
			e.path = e.path[:len(e.path)-1]
			continue
		}
		switch {
		case !f.hasDefault && !(f.typ.kind == kUnion && f.typ.nullable) && f.typ.kind != kNull:
			return b, prefix(encErr("missing, and the schema gives it no default"), f.name)
		case (!f.hasDefault || f.defaultNull) && f.typ.kind == kUnion && f.typ.branches[0].kind == kNull:
			// Null, given or implied (the library takes a nullable
			// field's default as null).
			b = append(b, 0)
		default:
			e.fallback = true
		}
	}
	return b, nil
}

// fitsTok is fits (encode.go) for a token.
func fitsTok(k jkind, b *node) bool {
	switch k {
	case jTrue, jFalse:
		return b.kind == kBool
	case jNum:
		return b.kind >= kInt && b.kind <= kDouble || b.logical == "decimal"
	case jStr:
		return b.kind != kNull && b.kind != kBool && b.kind < kArray || b.kind == kEnum
	case jArr:
		return b.kind == kArray
	case jObj:
		return b.kind == kMap || b.kind == kRecord
	}
	return false
}

// union picks the branch convUnion picks: the one a tagged value names,
// else the first whose conv takes the bare value. A branch tried and
// refused leaves nothing behind: its bytes, its library errors and its
// fallback are dropped.
func (e *encoder) union(b []byte, ti int32, n *node, depth int) ([]byte, error) {
	t := &e.p.toks[ti]
	if t.kind == jNull {
		if !n.nullable {
			return b, encErr("null is not a branch of the union (%s)", branchList(n))
		}
		for i, br := range n.branches {
			if br.kind == kNull {
				return appendLong(b, int64(i)), nil
			}
		}
	}
	if t.kind == jObj && t.count > 0 {
		if ki, ok := e.oneKey(ti); ok {
			if i, ok := n.branchIdx[string(e.p.text(&e.p.toks[ki]))]; ok {
				return e.value(appendLong(b, int64(i)), ki+1, n.branches[i], depth+1)
			}
		}
	}
	candidates := 0
	var first error
	for i, br := range n.branches {
		if !fitsTok(t.kind, br) {
			continue
		}
		candidates++
		mark, final, fallback, path := len(b), e.final, e.fallback, len(e.path)
		out, err := e.value(appendLong(b, int64(i)), ti, br, depth+1)
		if err == nil {
			return out, nil
		}
		if first == nil {
			first = err
		}
		b, e.final, e.fallback, e.path = out[:mark], final, fallback, e.path[:path]
	}
	if candidates == 1 && first != nil {
		return b, first
	}
	return b, encErr("%s fits no branch of the union (%s)", e.jsonKind(t), branchList(n))
}

// timestampUnits is the unit per second of each timestamp logical type.
var timestampUnits = map[string]int64{
	"timestamp-millis": 1e3, "timestamp-micros": 1e6, "timestamp-nanos": 1e9,
	"local-timestamp-millis": 1e3, "local-timestamp-micros": 1e6, "local-timestamp-nanos": 1e9,
}

// timestamp encodes a timestamp's text as parseLogical reads it and the
// library converts it: the time in the unit, truncated toward the past
// within a second, refused past what an int64 counts.
func (e *encoder) timestamp(b []byte, t *jtok, n *node) ([]byte, error) {
	// A view of the text, not a copy: time.Parse keeps nothing of it in
	// the time, and parseTimestamp's error quotes a copy.
	text := e.p.text(t)
	tm, err := parseTimestamp(unsafe.String(unsafe.SliceData(text), len(text)), n.logical)
	if err != nil {
		return b, &EncodeError{Err: err}
	}
	v, err := timeToUnits(tm, timestampUnits[n.logical])
	if err != nil {
		e.libError(err)
		return b, nil
	}
	return appendLong(b, v), nil
}

// timeToUnits counts t's units (scale per second) since the epoch,
// as github.com/twmb/avro's encoder does (a local timestamp, parsed in
// UTC, is the same count).
func timeToUnits(t time.Time, scale int64) (int64, error) {
	unit := "milliseconds"
	switch scale {
	case 1e6:
		unit = "microseconds"
	case 1e9:
		unit = "nanoseconds"
	}
	subScale := 1e9 / scale
	sec := t.Unix()
	nsec := int64(t.Nanosecond())
	maxSec := math.MaxInt64 / scale
	overflow := func() error { return fmt.Errorf("time %v overflows int64 %s since epoch", t, unit) }
	if sec < 0 && nsec > 0 {
		if sec+1 < -maxSec {
			return 0, overflow()
		}
		scaled := (sec + 1) * scale
		adjustment := nsec/subScale - scale
		if adjustment < math.MinInt64-scaled {
			return 0, overflow()
		}
		return scaled + adjustment, nil
	}
	if sec > maxSec || sec < -maxSec {
		return 0, overflow()
	}
	total := sec * scale
	sub := nsec / subScale
	if sec == maxSec && sub > math.MaxInt64-total {
		return 0, overflow()
	}
	return total + sub, nil
}

// decimal encodes a decimal's text without big numbers when it is plain
// (-?digits[.digits], at most the scale's fractional digits) and its
// unscaled value fits an int64, as the library encodes it: the fewest
// two's-complement bytes, sign-extended to a fixed's size. ok is false for
// any other text, which takes the generic leaf (conv and the library).
func (e *encoder) decimal(b []byte, t *jtok, n *node) ([]byte, bool) {
	if n.kind == kFixed && n.size > maxDecimalBytes {
		return b, false
	}
	u, neg, ok := plainDecimal(e.p.text(t), n.scale)
	if !ok {
		return b, false
	}
	if n.prec > 0 {
		d := 1
		for d < 20 && u >= pow10u64[d] {
			d++
		}
		if d > n.prec {
			e.libError(fmt.Errorf("decimal value has %d digits, exceeds schema precision %d", d, n.prec))
			return b, true
		}
	}
	v := int64(u)
	if neg {
		v = -v
	}
	size := 1 // the fewest bytes holding v signed
	for size < 8 && (v < -1<<(8*size-1) || v >= 1<<(8*size-1)) {
		size++
	}
	width := size
	if n.kind == kFixed {
		if size > n.size {
			e.libError(fmt.Errorf("decimal value requires %d bytes, exceeds fixed size %d", size, n.size))
			return b, true
		}
		pad := byte(0)
		if v < 0 {
			pad = 0xff
		}
		for range n.size - size {
			b = append(b, pad)
		}
	} else {
		b = appendLong(b, int64(width))
	}
	for i := size - 1; i >= 0; i-- {
		b = append(b, byte(v>>(8*i)))
	}
	return b, true
}

// plainDecimal reads s, -?digits[.digits] with at most scale fractional
// digits, as its unscaled value when that has at most 18 digits; ok is
// false for any other text.
func plainDecimal(s []byte, scale int) (u uint64, neg, ok bool) {
	if len(s) == 0 || len(s) > 40 {
		return 0, false, false
	}
	neg = s[0] == '-'
	if neg {
		s = s[1:]
	}
	intEnd := digits(s, 0)
	if intEnd == 0 {
		return 0, false, false
	}
	fracLen := 0
	if intEnd < len(s) {
		end := digits(s, intEnd+1)
		fracLen = end - intEnd - 1
		if s[intEnd] != '.' || fracLen == 0 || end != len(s) {
			return 0, false, false
		}
	}
	if fracLen > scale {
		return 0, false, false
	}
	sig := 0 // significant digits read
	for _, c := range s {
		if c == '.' || u == 0 && c == '0' {
			continue
		}
		u = u*10 + uint64(c-'0')
		sig++
	}
	if sig+scale-fracLen > 18 {
		return 0, false, false
	}
	return u * pow10u64[scale-fracLen], neg, true
}

// integer encodes an int or a long: a JSON integer, a timestamp's text,
// and the other forms conv takes through the node's leaf.
func (e *encoder) integer(b []byte, t *jtok, n *node) ([]byte, error) {
	ts := n.kind == kLong && timestampUnits[n.logical] != 0
	if t.kind == jStr && ts {
		return e.timestamp(b, t, n)
	}
	if t.kind != jNum || n.logical != "" && !ts {
		return e.leaf(b, t, n)
	}
	bits := 64
	if n.kind == kInt {
		bits = 32
	}
	v, err := strconv.ParseInt(string(e.p.text(t)), 10, bits)
	if err != nil {
		return b, encErr("%s is not an integer that fits an Avro %s", e.p.text(t), map[int]string{32: "int", 64: "long"}[bits])
	}
	return appendLong(b, v), nil
}
