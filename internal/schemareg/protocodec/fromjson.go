package protocodec

import (
	"bytes"
	"encoding/base64"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The direct encoder: JSON to Protobuf binary in one walk of the JSON,
// without a dynamicpb message, writing what protojson.Unmarshal then
// proto.Marshal (deterministic) write. It takes the messages the direct
// decoder takes (tojson.go: proto3 scalars, enums, messages, repeated,
// maps, oneofs, Timestamp) and JSON in the plain forms: names as JSON
// names or as written in the .proto, integers as numbers or strings of
// digits, enums by name or number, bytes in base64, null for an unset
// field. Anything else — an unknown field, a value of the wrong type, a
// field or a map key given twice, two members of a oneof, a number with a
// fraction or an exponent where an integer goes, a lone surrogate — gives
// up (errGeneric), and the generic path encodes the JSON or says what is
// wrong with it, naming the field. TestDirectProtoEncodeMatchesGeneric
// and FuzzProtoDirectEncode compare the two.

// realOneofOrder places the members of real oneofs after the other fields,
// by oneof, as proto.Marshal's deterministic order (the legacy one) does:
// the fields not in a (real) oneof by number, then each oneof's member.
const realOneofOrder = 1 << 30

// espan is one field's encoding in pencoder.buf, to put in order.
type espan struct {
	order      int32
	start, end int
}

// mentry is one map entry's encoding in pencoder.buf, to sort by key.
type mentry struct {
	ks, ke     int    // a string key's bytes in buf
	num        uint64 // an integer or bool key's value
	start, end int
}

type pencoder struct {
	c     *Codec
	js    []byte
	i     int
	buf   []byte
	spans []espan  // a stack of the fields of the messages being written
	ents  []mentry // a stack of the entries of the maps being written
	unesc []byte   // an escaped string, unescaped
	tmp   []byte   // decoded base64
}

var pencPool = sync.Pool{New: func() any { return new(pencoder) }}

// appendBinaryDirect is AppendBinary for a message the direct encoder
// takes. The message is written after dst's bytes, put in order there.
func (c *Codec) appendBinaryDirect(dst, js []byte, m *pmsg) ([]byte, error) {
	e := pencPool.Get().(*pencoder)
	e.c, e.js, e.i, e.buf = c, js, 0, dst
	defer func() {
		e.c, e.js, e.buf, e.spans, e.ents = nil, nil, nil, e.spans[:0], e.ents[:0]
		if cap(e.unesc) > 64<<10 || cap(e.tmp) > 64<<10 {
			e.unesc, e.tmp = nil, nil
		}
		pencPool.Put(e)
	}()
	e.ws()
	if err := e.message(m, 1); err != nil {
		return dst, err
	}
	if e.ws(); e.i != len(e.js) {
		return dst, errGeneric
	}
	return e.buf, nil
}

func (e *pencoder) ws() {
	for e.i < len(e.js) {
		switch e.js[e.i] {
		case ' ', '\t', '\n', '\r':
			e.i++
		default:
			return
		}
	}
}

// eat consumes c, and the whitespace after it.
func (e *pencoder) eat(c byte) bool {
	if e.i < len(e.js) && e.js[e.i] == c {
		e.i++
		e.ws()
		return true
	}
	return false
}

// word consumes a literal (true, false, null).
func (e *pencoder) word(w string) bool {
	if strings.HasPrefix(string(e.js[e.i:min(e.i+len(w), len(e.js))]), w) {
		e.i += len(w)
		return true
	}
	return false
}

// message writes the message m from the JSON object at e.i: its fields as
// they come, then in proto.Marshal's order.
func (e *pencoder) message(m *pmsg, depth int) error {
	if depth >= e.c.limits.MaxDepth-1 {
		return errGeneric // the generic path's limit decides
	}
	if m.timestamp {
		return e.timestamp()
	}
	if len(m.fields) > 256 || m.oneofs > 8 || !e.eat('{') {
		return errGeneric
	}
	base, start := len(e.spans), len(e.buf)
	defer func() { e.spans = e.spans[:base] }()
	var seen [4]uint64
	var oneofs uint8
	for more := !e.eat('}'); more; {
		i, ok := e.fieldName(m)
		if !ok || seen[i>>6]&(1<<(i&63)) != 0 {
			return errGeneric // unknown, or given twice
		}
		seen[i>>6] |= 1 << (i & 63)
		f := &m.fields[i]
		if e.word("null") { // unset
			e.ws()
		} else {
			if f.oneof >= 0 && !f.list && !f.isMap {
				if oneofs&(1<<f.oneof) != 0 {
					return errGeneric // two members
				}
				oneofs |= 1 << f.oneof
			}
			s := len(e.buf)
			if err := e.field(f, depth); err != nil {
				return err
			}
			e.spans = append(e.spans, espan{order: f.order, start: s, end: len(e.buf)})
			e.ws()
		}
		if more = !e.eat('}'); more && !e.eat(',') {
			return errGeneric
		}
	}
	spans := e.spans[base:]
	if !slices.IsSortedFunc(spans, func(x, y espan) int { return int(x.order - y.order) }) {
		slices.SortFunc(spans, func(x, y espan) int { return int(x.order - y.order) })
		e.rearrange(start, len(spans), func(k int) (int, int) { return spans[k].start, spans[k].end })
	}
	return nil
}

// rearrange puts n parts of buf[start:] in the order at gives (each part's
// place), by writing them after buf's end and moving them down.
func (e *pencoder) rearrange(start, n int, at func(k int) (int, int)) {
	end := len(e.buf)
	for k := range n {
		s, t := at(k)
		e.buf = append(e.buf, e.buf[s:t]...)
	}
	e.buf = e.buf[:start+copy(e.buf[start:], e.buf[end:])]
}

// fieldName reads a field's name and the ':' after it.
func (e *pencoder) fieldName(m *pmsg) (int, bool) {
	name, ok := e.str()
	if !ok {
		return 0, false
	}
	i, ok := m.byName[string(name)]
	e.ws()
	return i, ok && e.eat(':')
}

// field writes field f's tag and value (nothing for a zero value without
// presence, an empty list or map).
func (e *pencoder) field(f *pfield, depth int) error {
	switch {
	case f.isMap:
		return e.mapField(f, depth)
	case f.list:
		return e.list(f, depth)
	case f.kind == protoreflect.MessageKind:
		e.buf = protowire.AppendTag(e.buf, f.num, protowire.BytesType)
		return e.sub(f.msg, depth)
	}
	s := len(e.buf)
	e.buf = protowire.AppendTag(e.buf, f.num, wireType(f.kind))
	zero, err := e.scalar(f)
	if zero && !f.presence {
		e.buf = e.buf[:s]
	}
	return err
}

// sub writes a message's length and bytes, as proto.Marshal does: a byte
// set aside for the length, moved over when the length needs more.
func (e *pencoder) sub(m *pmsg, depth int) error {
	pos := len(e.buf)
	e.buf = append(e.buf, 0)
	if err := e.message(m, depth+1); err != nil {
		return err
	}
	e.finishLength(pos)
	return nil
}

func (e *pencoder) finishLength(pos int) {
	n := len(e.buf) - pos - 1
	if size := protowire.SizeVarint(uint64(n)); size > 1 {
		e.buf = append(e.buf, make([]byte, size-1)...)
		copy(e.buf[pos+size:], e.buf[pos+1:pos+1+n])
	}
	protowire.AppendVarint(e.buf[:pos], uint64(n))
}

// list writes a repeated field: packed, or one tag a value.
func (e *pencoder) list(f *pfield, depth int) error {
	if !e.eat('[') {
		return errGeneric
	}
	if e.eat(']') {
		return nil
	}
	pos := -1
	if f.packed {
		e.buf = protowire.AppendTag(e.buf, f.num, protowire.BytesType)
		pos = len(e.buf)
		e.buf = append(e.buf, 0)
	}
	for {
		var err error
		switch {
		case f.packed:
			_, err = e.scalar(f)
		case f.kind == protoreflect.MessageKind:
			e.buf = protowire.AppendTag(e.buf, f.num, protowire.BytesType)
			err = e.sub(f.msg, depth)
		default:
			e.buf = protowire.AppendTag(e.buf, f.num, wireType(f.kind))
			_, err = e.scalar(f)
		}
		if err != nil {
			return err
		}
		e.ws()
		if e.eat(']') {
			break
		}
		if !e.eat(',') {
			return errGeneric
		}
	}
	if pos >= 0 {
		e.finishLength(pos)
	}
	return nil
}

// mapField writes a map's entries (key and value each written, zero or
// not), sorted by key as proto.Marshal sorts them; a key given twice goes
// to the generic path, which refuses it.
func (e *pencoder) mapField(f *pfield, depth int) error {
	if !e.eat('{') {
		return errGeneric
	}
	base, start := len(e.ents), len(e.buf)
	defer func() { e.ents = e.ents[:base] }()
	for more := !e.eat('}'); more; {
		if err := e.mapEntry(f, depth); err != nil {
			return err
		}
		if e.ws(); e.eat('}') {
			break
		}
		if !e.eat(',') {
			return errGeneric
		}
	}
	ents := e.ents[base:]
	cmp := func(x, y mentry) int { return e.compareKeys(f.mkey.kind, x, y) }
	if slices.IsSortedFunc(ents, cmp) {
		for k := 1; k < len(ents); k++ {
			if cmp(ents[k-1], ents[k]) == 0 {
				return errGeneric
			}
		}
		return nil
	}
	slices.SortFunc(ents, cmp)
	for k := 1; k < len(ents); k++ {
		if cmp(ents[k-1], ents[k]) == 0 {
			return errGeneric
		}
	}
	e.rearrange(start, len(ents), func(k int) (int, int) { return ents[k].start, ents[k].end })
	return nil
}

// mapEntry writes one entry: tag, length, key, value.
func (e *pencoder) mapEntry(f *pfield, depth int) error {
	name, ok := e.str()
	if e.ws(); !ok || !e.eat(':') {
		return errGeneric
	}
	ent := mentry{start: len(e.buf)}
	e.buf = protowire.AppendTag(e.buf, f.num, protowire.BytesType)
	pos := len(e.buf)
	e.buf = append(e.buf, 0)
	if ent.num, ok = e.mapKey(f.mkey, name); !ok {
		return errGeneric
	}
	if f.mkey.kind == protoreflect.StringKind {
		ent.ks, ent.ke = len(e.buf)-len(name), len(e.buf)
	}
	if f.mval.kind == protoreflect.MessageKind {
		e.buf = protowire.AppendTag(e.buf, 2, protowire.BytesType)
		if err := e.sub(f.mval.msg, depth); err != nil {
			return err
		}
	} else {
		e.buf = protowire.AppendTag(e.buf, 2, wireType(f.mval.kind))
		if _, err := e.scalar(f.mval); err != nil {
			return err
		}
	}
	shift := len(e.buf)
	e.finishLength(pos)
	shift = len(e.buf) - shift // the length's bytes past the one set aside
	ent.ks, ent.ke, ent.end = ent.ks+shift, ent.ke+shift, len(e.buf)
	e.ents = append(e.ents, ent)
	return nil
}

// mapKey writes a map's key field from name (a JSON object's key, read as
// protojson reads it) and returns an integer key's value for the order.
func (e *pencoder) mapKey(k *pfield, name []byte) (uint64, bool) {
	e.buf = protowire.AppendTag(e.buf, 1, wireType(k.kind))
	switch k.kind {
	case protoreflect.StringKind:
		e.buf = protowire.AppendBytes(e.buf, name)
		return 0, true
	case protoreflect.BoolKind:
		switch string(name) {
		case "true":
			e.buf = append(e.buf, 1)
			return 1, true
		case "false":
			e.buf = append(e.buf, 0)
			return 0, true
		}
		return 0, false
	}
	var u uint64
	bits := 64
	if wireType(k.kind) == protowire.Fixed32Type || k.kind == protoreflect.Int32Kind || k.kind == protoreflect.Sint32Kind || k.kind == protoreflect.Uint32Kind {
		bits = 32
	}
	switch k.kind {
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		n, err := strconv.ParseUint(string(name), 10, bits)
		if err != nil {
			return 0, false
		}
		u = n
	default:
		n, err := strconv.ParseInt(string(name), 10, bits)
		if err != nil {
			return 0, false
		}
		u = uint64(n)
	}
	e.appendInt(k.kind, u)
	return u, true
}

// compareKeys orders map entries as proto.Marshal's deterministic order
// does: strings by bytes, false before true, integers by value.
func (e *pencoder) compareKeys(k protoreflect.Kind, x, y mentry) int {
	switch k {
	case protoreflect.StringKind:
		return bytes.Compare(e.buf[x.ks:x.ke], e.buf[y.ks:y.ke])
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return cmpI(int64(x.num), int64(y.num))
	}
	return cmpU(x.num, y.num)
}

// appendInt writes an integer or enum value in its kind's wire form; u is
// the value (a signed one's two's complement).
func (e *pencoder) appendInt(k protoreflect.Kind, u uint64) {
	switch k {
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		e.buf = protowire.AppendVarint(e.buf, protowire.EncodeZigZag(int64(u)))
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind:
		e.buf = protowire.AppendFixed32(e.buf, uint32(u))
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind:
		e.buf = protowire.AppendFixed64(e.buf, u)
	default:
		e.buf = protowire.AppendVarint(e.buf, u)
	}
}

// scalar writes a scalar or enum value (no tag); zero says whether it is
// the kind's zero value, which proto3 leaves out of a field without
// presence.
func (e *pencoder) scalar(f *pfield) (zero bool, err error) {
	switch f.kind {
	case protoreflect.BoolKind:
		switch {
		case e.word("true"):
			e.buf = append(e.buf, 1)
			return false, nil
		case e.word("false"):
			e.buf = append(e.buf, 0)
			return true, nil
		}
		return false, errGeneric
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return e.float(f.kind)
	case protoreflect.StringKind:
		s, ok := e.str()
		if !ok {
			return false, errGeneric
		}
		e.buf = protowire.AppendBytes(e.buf, s)
		return len(s) == 0, nil
	case protoreflect.BytesKind:
		return e.bytesValue()
	case protoreflect.EnumKind:
		return e.enum(f)
	}
	u, ok := e.integer(f.kind)
	if !ok {
		return false, errGeneric
	}
	e.appendInt(f.kind, u)
	return u == 0, nil
}

// enum reads an enum by name, or by number (a JSON number, not a string).
func (e *pencoder) enum(f *pfield) (bool, error) {
	var n int64
	if e.i < len(e.js) && e.js[e.i] == '"' {
		name, ok := e.str()
		v, known := f.enums[string(name)]
		if !ok || !known {
			return false, errGeneric
		}
		n = int64(v)
	} else {
		raw, isInt := e.number()
		u, ok := parseInt(raw, isInt, protoreflect.Int32Kind)
		if !ok {
			return false, errGeneric
		}
		n = int64(u)
	}
	e.buf = protowire.AppendVarint(e.buf, uint64(n))
	return n == 0, nil
}

// integer reads an integer of kind k: a JSON number without a fraction or
// an exponent, or a string holding one.
func (e *pencoder) integer(k protoreflect.Kind) (uint64, bool) {
	var raw []byte
	isInt := false
	if e.i < len(e.js) && e.js[e.i] == '"' {
		s, ok := e.str()
		if !ok {
			return 0, false
		}
		n, i := numberLen(s)
		raw, isInt = s, i && n == len(s)
	} else {
		raw, isInt = e.number()
	}
	return parseInt(raw, isInt, k)
}

// number reads a JSON number; isInt: one without a fraction or an
// exponent (a number that is not one reads as nothing).
func (e *pencoder) number() (raw []byte, isInt bool) {
	n, isInt := numberLen(e.js[e.i:])
	raw = e.js[e.i : e.i+n]
	e.i += n
	return raw, isInt && n > 0
}

// numberLen is the length of the JSON number b begins with (0: none).
func numberLen(b []byte) (n int, isInt bool) {
	digits := func(i int) int {
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i
	}
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(i)
	default:
		return 0, false
	}
	isInt = true
	if i < len(b) && b[i] == '.' {
		if j := digits(i + 1); j > i+1 {
			i, isInt = j, false
		} else {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		j := i + 1
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if k := digits(j); k > j {
			i, isInt = k, false
		} else {
			return 0, false
		}
	}
	return i, isInt
}

// parseInt reads a JSON integer's digits as a value of kind k (its two's
// complement), refusing one out of the kind's range.
func parseInt(raw []byte, isInt bool, k protoreflect.Kind) (uint64, bool) {
	if !isInt {
		return 0, false
	}
	neg := raw[0] == '-'
	if neg {
		raw = raw[1:]
	}
	var u uint64
	for _, c := range raw {
		d := uint64(c - '0')
		if u > math.MaxUint64/10 || u*10 > math.MaxUint64-d {
			return 0, false
		}
		u = u*10 + d
	}
	var limit uint64
	signed := true
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		limit = math.MaxInt32
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		limit = math.MaxInt64
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		limit, signed = math.MaxUint32, false
	default:
		limit, signed = math.MaxUint64, false
	}
	switch {
	case neg && !signed:
		return 0, false
	case neg && u <= limit+1:
		return uint64(-int64(u)), true
	case !neg && u <= limit:
		return u, true
	}
	return 0, false
}

// float reads a float or double: a JSON number, "NaN", "Infinity",
// "-Infinity", or a string holding a JSON number.
func (e *pencoder) float(k protoreflect.Kind) (bool, error) {
	bits := 64
	if k == protoreflect.FloatKind {
		bits = 32
	}
	var raw []byte
	if e.i < len(e.js) && e.js[e.i] == '"' {
		s, ok := e.str()
		if !ok {
			return false, errGeneric
		}
		raw = s
	} else {
		n, _ := numberLen(e.js[e.i:])
		raw = e.js[e.i : e.i+n]
		e.i += n
	}
	var x float64
	switch string(raw) {
	case "NaN":
		x = math.NaN()
	case "Infinity":
		x = math.Inf(1)
	case "-Infinity":
		x = math.Inf(-1)
	default:
		n, _ := numberLen(raw)
		if n == 0 || n != len(raw) {
			return false, errGeneric
		}
		var err error
		if x, err = strconv.ParseFloat(string(raw), bits); err != nil {
			return false, errGeneric
		}
	}
	if bits == 32 {
		x32 := float32(x)
		e.buf = protowire.AppendFixed32(e.buf, math.Float32bits(x32))
		return x32 == 0 && !math.Signbit(float64(x32)), nil
	}
	e.buf = protowire.AppendFixed64(e.buf, math.Float64bits(x))
	return x == 0 && !math.Signbit(x), nil
}

// bytesValue reads base64 as protojson does: standard or URL alphabet,
// padded or not.
func (e *pencoder) bytesValue() (bool, error) {
	s, ok := e.str()
	if !ok {
		return false, errGeneric
	}
	enc := base64.StdEncoding
	if bytes.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	e.tmp = slices.Grow(e.tmp[:0], enc.DecodedLen(len(s)))[:enc.DecodedLen(len(s))]
	n, err := enc.Decode(e.tmp, s)
	if err != nil {
		return false, errGeneric
	}
	e.buf = protowire.AppendBytes(e.buf, e.tmp[:n])
	return n == 0, nil
}

// timestamp writes a google.protobuf.Timestamp's fields from its RFC 3339
// string, with protojson's checks.
func (e *pencoder) timestamp() error {
	s, ok := e.str()
	if !ok {
		return errGeneric
	}
	secs, nanos, ok := utcTimestamp(s)
	if !ok { // another form (an offset, say): time.Parse reads it, as protojson does
		t, err := time.Parse(time.RFC3339Nano, string(s))
		if err != nil {
			return errGeneric
		}
		secs, nanos = t.Unix(), t.Nanosecond()
	}
	i, j := bytes.LastIndexByte(s, '.'), bytes.LastIndexAny(s, "Z-+")
	if secs < -62135596800 || secs > 253402300799 || i >= 0 && j >= i && j-i > len(".999999999") {
		return errGeneric
	}
	if secs != 0 {
		e.buf = protowire.AppendVarint(protowire.AppendTag(e.buf, 1, protowire.VarintType), uint64(secs))
	}
	if nanos != 0 {
		e.buf = protowire.AppendVarint(protowire.AppendTag(e.buf, 2, protowire.VarintType), uint64(nanos))
	}
	return nil
}

// utcTimestamp reads the form protojson writes, 2006-01-02T15:04:05Z with
// 0 to 9 fractional digits, without the string time.Parse would need; ok
// is false for any other form, and for a field out of its range, which
// time.Parse then refuses.
func utcTimestamp(s []byte) (secs int64, nanos int, ok bool) {
	n := len(s)
	if n < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[n-1] != 'Z' {
		return 0, 0, false
	}
	year, month, day, hour, minute, sec := digitsAt(s, 0, 4), digitsAt(s, 5, 2), digitsAt(s, 8, 2), digitsAt(s, 11, 2), digitsAt(s, 14, 2), digitsAt(s, 17, 2)
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 ||
		day > time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day() {
		return 0, 0, false
	}
	if nanos, ok = fraction(s[19 : n-1]); !ok {
		return 0, 0, false
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, nanos, time.UTC).Unix(), nanos, true
}

// digitsAt is the decimal number of the w digits at s[i:], -1 if one is
// not a digit.
func digitsAt(s []byte, i, w int) int {
	v := 0
	for _, c := range s[i : i+w] {
		if c < '0' || c > '9' {
			return -1
		}
		v = v*10 + int(c-'0')
	}
	return v
}

// fraction reads a timestamp's fractional seconds, "" or "." and 1 to 9
// digits, as nanoseconds.
func fraction(f []byte) (int, bool) {
	if len(f) == 0 {
		return 0, true
	}
	if len(f) < 2 || len(f) > 10 || f[0] != '.' {
		return 0, false
	}
	nanos := digitsAt(f, 1, len(f)-1)
	for range 10 - len(f) {
		nanos *= 10
	}
	return nanos, nanos >= 0
}

// str reads a JSON string: its bytes in the input when it has no escape,
// else unescaped in e.unesc (valid until the next escaped string). Control
// characters, invalid UTF-8 and lone surrogates are refused.
func (e *pencoder) str() ([]byte, bool) {
	if e.i >= len(e.js) || e.js[e.i] != '"' {
		return nil, false
	}
	start := e.i + 1
	for i := start; i < len(e.js); i++ {
		switch c := e.js[i]; {
		case c == '"':
			e.i = i + 1
			s := e.js[start:i]
			return s, utf8.Valid(s)
		case c == '\\':
			return e.strSlow(start, i)
		case c < ' ':
			return nil, false
		}
	}
	return nil, false
}

// strSlow unescapes a string from its first escape, at i.
func (e *pencoder) strSlow(start, i int) ([]byte, bool) {
	out := append(e.unesc[:0], e.js[start:i]...)
	for i < len(e.js) {
		c := e.js[i]
		switch {
		case c == '"':
			e.i, e.unesc = i+1, out
			return out, utf8.Valid(out)
		case c < ' ':
			return nil, false
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(e.js) {
			return nil, false
		}
		if r := unescape(e.js[i+1]); r != 0 {
			out = append(out, r)
			i += 2
			continue
		}
		r, n := e.uEscape(i)
		if n == 0 {
			return nil, false
		}
		out = utf8.AppendRune(out, r)
		i += n
	}
	return nil, false
}

func unescape(c byte) byte {
	switch c {
	case '"', '\\', '/':
		return c
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return 0
}

// uEscape reads \uXXXX at i (a surrogate pair: two), n the bytes read (0:
// none, or a lone surrogate).
func (e *pencoder) uEscape(i int) (rune, int) {
	r := hex4(e.js, i)
	switch {
	case r < 0:
		return 0, 0
	case !utf16.IsSurrogate(r):
		return r, 6
	}
	r2 := hex4(e.js, i+6)
	if r2 < 0 {
		return 0, 0
	}
	if c := utf16.DecodeRune(r, r2); c != utf8.RuneError {
		return c, 12
	}
	return 0, 0
}

// hex4 is the value of the \uXXXX at b[i:], -1 if there is none.
func hex4(b []byte, i int) rune {
	if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range b[i+2 : i+6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}
