package protocodec

import (
	"encoding/base64"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The direct decoder: Protobuf binary to JSON in one walk of the payload,
// without a dynamicpb message, writing what proto.Unmarshal and protojson
// (then compactJSON) write. It takes the common shapes only: a proto3
// message of scalar, enum, message, repeated and map fields, and
// google.protobuf.Timestamp. For anything else, and for any payload it has
// a doubt about (a field of the wrong wire type, a message field given
// twice, which proto.Unmarshal merges, invalid UTF-8, a timestamp out of
// range, bytes that do not parse), it gives up (errGeneric) and the
// generic path decodes the payload, errors included.
// TestDirectProtoMatchesGeneric compares the two on random payloads.

var errGeneric = errors.New("the generic path decodes this payload")

// pmsg is a message prepared for the direct decoder.
type pmsg struct {
	fields    []pfield // in declaration order
	byNum     map[protowire.Number]int
	byName    map[string]int // by JSON name and by name (the encoder's)
	timestamp bool           // google.protobuf.Timestamp
	oneofs    int            // the number of oneofs (real and synthetic)
}

type pfield struct {
	fd       protoreflect.FieldDescriptor
	kind     protoreflect.Kind
	key      []byte // "name":
	list     bool
	isMap    bool
	presence bool // written when set, even to its zero value
	oneof    int  // index of its oneof, -1: none
	msg      *pmsg
	// for the encoder (fromjson.go)
	num    protowire.Number
	packed bool
	order  int32            // its place in proto.Marshal's deterministic order
	enums  map[string]int32 // an enum's numbers by name
	// a map's key and value
	mkey, mval *pfield
}

// prepareDirect prepares every message of the file the direct decoder
// takes, by full name, once at compile: the map is read-only after.
func (c *Codec) prepareDirect() {
	c.direct = map[protoreflect.FullName]*pmsg{}
	var each func(msgs protoreflect.MessageDescriptors)
	each = func(msgs protoreflect.MessageDescriptors) {
		for i := 0; i < msgs.Len(); i++ {
			md := msgs.Get(i)
			if m := c.build(md, map[protoreflect.FullName]*pmsg{}); m != nil {
				c.direct[md.FullName()] = m
			}
			each(md.Messages())
		}
	}
	each(c.file.Messages())
}

// build prepares md and the messages it holds (built: those under way).
func (c *Codec) build(md protoreflect.MessageDescriptor, built map[protoreflect.FullName]*pmsg) *pmsg {
	if m, ok := c.direct[md.FullName()]; ok {
		return m
	}
	if m, ok := built[md.FullName()]; ok {
		return m
	}
	m := &pmsg{byNum: map[protowire.Number]int{}, byName: map[string]int{}}
	built[md.FullName()] = m
	if md.FullName() == "google.protobuf.Timestamp" {
		m.timestamp = true
	} else if strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return nil // the other well-known types have JSON forms of their own
	}
	if md.Syntax() != protoreflect.Proto3 || md.ExtensionRanges().Len() > 0 {
		return nil
	}
	m.oneofs = md.Oneofs().Len()
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		f, ok := c.buildField(fd, built)
		if !ok {
			return nil
		}
		m.byNum[fd.Number()] = len(m.fields)
		m.fields = append(m.fields, f)
	}
	// protojson takes a field by its JSON name first, then by its name.
	for i := range m.fields {
		m.byName[m.fields[i].fd.TextName()] = i
	}
	for i := range m.fields {
		m.byName[m.fields[i].fd.JSONName()] = i
	}
	return m
}

func (c *Codec) buildField(fd protoreflect.FieldDescriptor, built map[protoreflect.FullName]*pmsg) (pfield, bool) {
	name := fd.JSONName()
	if !c.opts.JSONNames {
		name = fd.TextName()
	}
	f := pfield{fd: fd, kind: fd.Kind(), list: fd.IsList(), isMap: fd.IsMap(), presence: fd.HasPresence(), oneof: -1,
		num: fd.Number(), packed: fd.IsPacked(), order: int32(fd.Number())}
	key, _ := appendString(nil, name)
	f.key = append(key, ':')
	if o := fd.ContainingOneof(); o != nil {
		f.oneof = o.Index()
		if !o.IsSynthetic() {
			f.order = realOneofOrder + int32(o.Index())
		}
	}
	if f.kind == protoreflect.EnumKind {
		vals := fd.Enum().Values()
		f.enums = make(map[string]int32, vals.Len())
		for i := 0; i < vals.Len(); i++ {
			f.enums[string(vals.Get(i).Name())] = int32(vals.Get(i).Number())
		}
	}
	switch f.kind {
	case protoreflect.GroupKind:
		return f, false
	case protoreflect.EnumKind:
		if fd.Enum().FullName() == "google.protobuf.NullValue" {
			return f, false
		}
	case protoreflect.MessageKind:
		if f.isMap {
			k, ok1 := c.buildField(fd.MapKey(), built)
			v, ok2 := c.buildField(fd.MapValue(), built)
			if !ok1 || !ok2 {
				return f, false
			}
			f.mkey, f.mval = &k, &v
			return f, true
		}
		if f.msg = c.build(fd.Message(), built); f.msg == nil {
			return f, false
		}
	}
	return f, true
}

// occ is one occurrence of a field in a message's bytes.
type occ struct {
	field int
	typ   protowire.Type
	val   []byte // a varint's or fixed value's bytes, a length-delimited one's content
}

type pdecoder struct {
	c     *Codec
	limit int
	occs  []occ // a stack of the occurrences of the messages being read
	keys  []mapKV
}

type mapKV struct {
	key        []byte // a string key
	num        uint64 // an integer key's value
	start, end int    // where the value's JSON lies in the output
}

var pdecPool = sync.Pool{New: func() any { return new(pdecoder) }}

// appendJSONDirect is AppendJSON for a message the direct decoder takes.
func (c *Codec) appendJSONDirect(dst, payload []byte, m *pmsg) ([]byte, error) {
	d := pdecPool.Get().(*pdecoder)
	d.c = c
	defer func() {
		d.c, d.occs, d.keys = nil, d.occs[:0], d.keys[:0]
		pdecPool.Put(d)
	}()
	return d.message(dst, payload, m, 1)
}

// message writes the message m in b: its fields in declaration order,
// each from its occurrences.
func (d *pdecoder) message(out, b []byte, m *pmsg, depth int) ([]byte, error) {
	if depth >= d.c.limits.MaxDepth-1 {
		return out, errGeneric // the generic path's limit decides
	}
	base := len(d.occs)
	defer func() { d.occs = d.occs[:base] }()
	if err := d.scan(b, m); err != nil {
		return out, err
	}
	if m.timestamp {
		return d.timestamp(out, d.occs[base:])
	}
	// The member of each oneof set last is the one set.
	var lastOf [8]int
	if err := oneofMembers(d.occs[base:], m, &lastOf); err != nil {
		return out, err
	}
	out = append(out, '{')
	first := true
	var err error
	for i := range m.fields {
		f := &m.fields[i]
		if f.oneof >= 0 && lastOf[f.oneof] != i {
			continue
		}
		mark := len(out)
		if !first {
			out = append(out, ',')
		}
		out = append(out, f.key...)
		var wrote bool
		if out, wrote, err = d.field(out, d.occs[base:], i, f, depth); err != nil {
			return out, err
		}
		if !wrote {
			out = out[:mark]
			continue
		}
		first = false
	}
	return append(out, '}'), nil
}

// scan reads the fields of a message's bytes into occs, in wire order.
func (d *pdecoder) scan(b []byte, m *pmsg) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber {
			return errGeneric
		}
		b = b[n:]
		var val []byte
		switch typ {
		case protowire.VarintType:
			_, n = protowire.ConsumeVarint(b)
			val = b[:max(n, 0)]
		case protowire.Fixed32Type:
			_, n = protowire.ConsumeFixed32(b)
			val = b[:max(n, 0)]
		case protowire.Fixed64Type:
			_, n = protowire.ConsumeFixed64(b)
			val = b[:max(n, 0)]
		case protowire.BytesType:
			val, n = protowire.ConsumeBytes(b)
		default:
			return errGeneric // groups, and what does not parse
		}
		if n < 0 {
			return errGeneric
		}
		b = b[n:]
		i, ok := m.byNum[num]
		if !ok {
			continue // an unknown field: protojson does not write it
		}
		if !wireFits(&m.fields[i], typ) {
			return errGeneric
		}
		d.occs = append(d.occs, occ{field: i, typ: typ, val: val})
	}
	return nil
}

// oneofMembers sets lastOf[k] to the field of oneof k that is set (-1:
// none). Two members of a oneof go to the generic path: proto.Unmarshal
// reads (and checks) the one it then drops.
func oneofMembers(occs []occ, m *pmsg, lastOf *[8]int) error {
	if m.oneofs > len(lastOf) {
		return errGeneric
	}
	for i := range lastOf {
		lastOf[i] = -1
	}
	for _, o := range occs {
		if f := &m.fields[o.field]; f.oneof >= 0 {
			if lastOf[f.oneof] >= 0 && lastOf[f.oneof] != o.field {
				return errGeneric
			}
			lastOf[f.oneof] = o.field
		}
	}
	return nil
}

// wireFits says whether a field's occurrence has the wire type its kind
// has (a repeated scalar's may be packed).
func wireFits(f *pfield, typ protowire.Type) bool {
	want := wireType(f.kind)
	return typ == want || f.list && typ == protowire.BytesType && want != protowire.BytesType
}

func wireType(k protoreflect.Kind) protowire.Type {
	switch k {
	case protoreflect.BoolKind, protoreflect.EnumKind, protoreflect.Int32Kind, protoreflect.Sint32Kind,
		protoreflect.Uint32Kind, protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Uint64Kind:
		return protowire.VarintType
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		return protowire.Fixed32Type
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		return protowire.Fixed64Type
	}
	return protowire.BytesType
}

// field writes field i's value from its occurrences; wrote is false when
// protojson leaves it out (unset, or a zero value without presence).
func (d *pdecoder) field(out []byte, occs []occ, i int, f *pfield, depth int) (_ []byte, wrote bool, err error) {
	switch {
	case f.isMap:
		return d.mapField(out, occs, i, f, depth)
	case f.list:
		n := 0
		out = append(out, '[')
		for _, o := range occs {
			if o.field != i {
				continue
			}
			if f.kind == protoreflect.MessageKind {
				if n > 0 {
					out = append(out, ',')
				}
				if out, err = d.message(out, o.val, f.msg, depth+1); err != nil {
					return out, false, err
				}
				n++
				continue
			}
			vals, typ := o.val, o.typ
			packed := typ == protowire.BytesType && wireType(f.kind) != protowire.BytesType
			if packed {
				typ = wireType(f.kind)
			}
			for one := !packed; one || len(vals) > 0; one = false {
				v, rest, ok := nextScalar(vals, typ, packed)
				if !ok {
					return out, false, errGeneric
				}
				vals = rest
				if n > 0 {
					out = append(out, ',')
				}
				if out, _, err = scalar(out, f, v); err != nil {
					return out, false, err
				}
				n++
			}
		}
		return append(out, ']'), n > 0, nil
	}
	var last *occ
	count := 0
	for j := range occs {
		if occs[j].field == i {
			last = &occs[j]
			count++
			// Each occurrence is read, the last kept: each is checked.
			if f.kind == protoreflect.StringKind && !utf8.Valid(last.val) {
				return out, false, errGeneric
			}
		}
	}
	if last == nil {
		return out, false, nil
	}
	if f.kind == protoreflect.MessageKind {
		if count > 1 {
			return out, false, errGeneric // proto.Unmarshal merges them
		}
		out, err = d.message(out, last.val, f.msg, depth+1)
		return out, err == nil, err
	}
	out, zero, err := scalar(out, f, last.val)
	return out, !zero || f.presence, err
}

// nextScalar splits one value off vals (a packed field's content, or one
// occurrence's value).
func nextScalar(vals []byte, typ protowire.Type, packed bool) (v, rest []byte, ok bool) {
	if !packed {
		return vals, nil, true
	}
	n := 0
	switch typ {
	case protowire.VarintType:
		_, n = protowire.ConsumeVarint(vals)
	case protowire.Fixed32Type:
		_, n = protowire.ConsumeFixed32(vals)
	case protowire.Fixed64Type:
		_, n = protowire.ConsumeFixed64(vals)
	}
	if n <= 0 {
		return nil, nil, false
	}
	return vals[:n], vals[n:], true
}

// scalar writes a scalar or enum value from its wire bytes; zero says
// whether it is the kind's zero value.
func scalar(out []byte, f *pfield, v []byte) (_ []byte, zero bool, err error) {
	var u uint64
	switch wireType(f.kind) {
	case protowire.VarintType:
		u, _ = protowire.ConsumeVarint(v)
	case protowire.Fixed32Type:
		x, _ := protowire.ConsumeFixed32(v)
		u = uint64(x)
	case protowire.Fixed64Type:
		u, _ = protowire.ConsumeFixed64(v)
	}
	switch f.kind {
	case protoreflect.BoolKind:
		return strconv.AppendBool(out, u != 0), u == 0, nil
	case protoreflect.Int32Kind, protoreflect.Sfixed32Kind:
		return strconv.AppendInt(out, int64(int32(u)), 10), int32(u) == 0, nil
	case protoreflect.Sint32Kind:
		x := int32(protowire.DecodeZigZag(u & math.MaxUint32))
		return strconv.AppendInt(out, int64(x), 10), x == 0, nil
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return strconv.AppendUint(out, uint64(uint32(u)), 10), uint32(u) == 0, nil
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		return append(strconv.AppendInt(append(out, '"'), int64(u), 10), '"'), u == 0, nil
	case protoreflect.Sint64Kind:
		x := protowire.DecodeZigZag(u)
		return append(strconv.AppendInt(append(out, '"'), x, 10), '"'), x == 0, nil
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return append(strconv.AppendUint(append(out, '"'), u, 10), '"'), u == 0, nil
	case protoreflect.FloatKind:
		x := math.Float32frombits(uint32(u))
		return appendFloat(out, float64(x), 32), x == 0 && !math.Signbit(float64(x)), nil
	case protoreflect.DoubleKind:
		x := math.Float64frombits(u)
		return appendFloat(out, x, 64), x == 0 && !math.Signbit(x), nil
	case protoreflect.EnumKind:
		n := protoreflect.EnumNumber(int32(u))
		if ev := f.fd.Enum().Values().ByNumber(n); ev != nil {
			out, _ = appendString(out, string(ev.Name()))
			return out, n == 0, nil
		}
		return strconv.AppendInt(out, int64(n), 10), n == 0, nil
	case protoreflect.StringKind:
		if !utf8.Valid(v) {
			return out, false, errGeneric // proto.Unmarshal refuses it
		}
		out, _ = appendString(out, string(v))
		return out, len(v) == 0, nil
	case protoreflect.BytesKind:
		out = append(out, '"')
		out = base64.StdEncoding.AppendEncode(out, v)
		return append(out, '"'), len(v) == 0, nil
	}
	return out, false, errGeneric
}

// timestamp writes a google.protobuf.Timestamp as protojson does: RFC
// 3339 in UTC with 0, 3, 6 or 9 fractional digits.
func (d *pdecoder) timestamp(out []byte, occs []occ) ([]byte, error) {
	var secs, nanos int64
	for _, o := range occs {
		u, _ := protowire.ConsumeVarint(o.val)
		switch o.field {
		case 0:
			secs = int64(u)
		case 1:
			nanos = int64(int32(u))
		}
	}
	if secs < -62135596800 || secs > 253402300799 || nanos < 0 || nanos > 999999999 {
		return out, errGeneric
	}
	var buf [40]byte
	x := time.Unix(secs, nanos).UTC().AppendFormat(buf[:0], "2006-01-02T15:04:05.000000000")
	for range 2 {
		if n := len(x); string(x[n-3:]) == "000" {
			x = x[:n-3]
		}
	}
	if n := len(x); string(x[n-4:]) == ".000" {
		x = x[:n-4]
	}
	out = append(append(out, '"'), x...)
	return append(out, 'Z', '"'), nil
}

// mapField writes a map's entries, sorted by key as protojson sorts them,
// a key given twice taking its last value.
func (d *pdecoder) mapField(out []byte, occs []occ, i int, f *pfield, depth int) (_ []byte, wrote bool, err error) {
	base := len(d.keys)
	defer func() { d.keys = d.keys[:base] }()
	// The values' JSON is written after out as the entries come, then
	// the object after them, which moves down over them.
	start := len(out)
	for _, o := range occs {
		if o.field != i {
			continue
		}
		key, val, hasKey, hasVal, eerr := mapEntry(o.val, f)
		if eerr != nil {
			return out, false, eerr
		}
		kv := mapKV{start: len(out)}
		if kv.key, kv.num, err = mapKey(f.mkey, key, hasKey); err != nil {
			return out, false, err
		}
		switch {
		case f.mval.kind == protoreflect.MessageKind:
			// (no value: the empty message, "{}" or a timestamp's epoch)
			out, err = d.message(out, val, f.mval.msg, depth+1)
		case !hasVal:
			out, _, err = scalar(out, f.mval, zeroWire(f.mval.kind))
		default:
			out, _, err = scalar(out, f.mval, val)
		}
		if err != nil {
			return out, false, err
		}
		kv.end = len(out)
		d.keys = append(d.keys, kv)
	}
	keys := d.keys[base:]
	if len(keys) == 0 {
		return out, false, nil
	}
	// Stable: of equal keys the last stays last, and is the one kept.
	slices.SortStableFunc(keys, func(x, y mapKV) int { return compareKeys(f.mkey.kind, x, y) })
	end := len(out)
	out = append(out, '{')
	n := 0
	for j, kv := range keys {
		if j+1 < len(keys) && compareKeys(f.mkey.kind, kv, keys[j+1]) == 0 {
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = appendMapKey(out, f.mkey, kv)
		out = append(append(out, ':'), out[kv.start:kv.end]...)
		n++
	}
	out = append(out, '}')
	return out[:start+copy(out[start:], out[end:])], true, nil
}

// mapEntry reads a map entry's key and value (their content, for a
// length-delimited one).
func mapEntry(e []byte, f *pfield) (key, val []byte, hasKey, hasVal bool, err error) {
	for len(e) > 0 {
		num, typ, n := protowire.ConsumeTag(e)
		if n < 0 || num > protowire.MaxValidNumber {
			return nil, nil, false, false, errGeneric
		}
		e = e[n:]
		n = protowire.ConsumeFieldValue(num, typ, e)
		if n < 0 {
			return nil, nil, false, false, errGeneric
		}
		raw := e[:n]
		e = e[n:]
		var kv *pfield
		switch num {
		case 1:
			kv = f.mkey
		case 2:
			kv = f.mval
		default:
			continue
		}
		if typ != wireType(kv.kind) || num == 2 && hasVal && f.mval.kind == protoreflect.MessageKind {
			return nil, nil, false, false, errGeneric // (a message value given twice is merged)
		}
		if typ == protowire.BytesType {
			raw, _ = protowire.ConsumeBytes(raw)
		}
		if kv.kind == protoreflect.StringKind && !utf8.Valid(raw) {
			// Every occurrence, as proto.Unmarshal checks them: a key
			// or value given twice is the last, but an invalid first
			// one still refuses the message.
			return nil, nil, false, false, errGeneric
		}
		if num == 1 {
			key, hasKey = raw, true
		} else {
			val, hasVal = raw, true
		}
	}
	return key, val, hasKey, hasVal, nil
}

// mapKey is a map key for the order: a string key's bytes, or an
// integer key's value.
func mapKey(k *pfield, key []byte, hasKey bool) ([]byte, uint64, error) {
	var u uint64
	switch {
	case k.kind == protoreflect.StringKind:
		if !utf8.Valid(key) {
			return nil, 0, errGeneric
		}
		return key, 0, nil
	case !hasKey:
	case wireType(k.kind) == protowire.VarintType:
		u, _ = protowire.ConsumeVarint(key)
	case wireType(k.kind) == protowire.Fixed32Type:
		x, _ := protowire.ConsumeFixed32(key)
		u = uint64(x)
	default:
		u, _ = protowire.ConsumeFixed64(key)
	}
	return nil, u, nil
}

func zeroWire(k protoreflect.Kind) []byte {
	switch wireType(k) {
	case protowire.Fixed32Type:
		return make([]byte, 4)
	case protowire.Fixed64Type:
		return make([]byte, 8)
	case protowire.BytesType:
		return nil
	}
	return []byte{0}
}

func compareKeys(k protoreflect.Kind, x, y mapKV) int {
	switch k {
	case protoreflect.StringKind:
		return strings.Compare(string(x.key), string(y.key))
	case protoreflect.BoolKind:
		return cmpU(boolU(x.num), boolU(y.num))
	case protoreflect.Int32Kind, protoreflect.Sfixed32Kind:
		return cmpI(int64(int32(x.num)), int64(int32(y.num)))
	case protoreflect.Sint32Kind:
		return cmpI(int64(int32(protowire.DecodeZigZag(x.num&math.MaxUint32))), int64(int32(protowire.DecodeZigZag(y.num&math.MaxUint32))))
	case protoreflect.Int64Kind, protoreflect.Sfixed64Kind:
		return cmpI(int64(x.num), int64(y.num))
	case protoreflect.Sint64Kind:
		return cmpI(protowire.DecodeZigZag(x.num), protowire.DecodeZigZag(y.num))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return cmpU(uint64(uint32(x.num)), uint64(uint32(y.num)))
	}
	return cmpU(x.num, y.num)
}

func boolU(u uint64) uint64 {
	if u != 0 {
		return 1
	}
	return 0
}

func cmpI(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// appendMapKey writes a map key as protojson does: always a JSON string.
func appendMapKey(out []byte, k *pfield, kv mapKV) []byte {
	if k.kind == protoreflect.StringKind {
		out, _ = appendString(out, string(kv.key))
		return out
	}
	var buf [24]byte
	s, _, _ := scalar(buf[:0], k, wireBytes(k.kind, kv.num))
	if len(s) > 0 && s[0] == '"' {
		return append(out, s...)
	}
	return append(append(append(out, '"'), s...), '"')
}

// wireBytes is an integer key's value as its kind's wire bytes.
func wireBytes(k protoreflect.Kind, u uint64) []byte {
	switch wireType(k) {
	case protowire.Fixed32Type:
		return protowire.AppendFixed32(nil, uint32(u))
	case protowire.Fixed64Type:
		return protowire.AppendFixed64(nil, u)
	}
	return protowire.AppendVarint(nil, u)
}

// appendFloat writes a float as protojson does.
func appendFloat(out []byte, n float64, bitSize int) []byte {
	switch {
	case math.IsNaN(n):
		return append(out, `"NaN"`...)
	case math.IsInf(n, +1):
		return append(out, `"Infinity"`...)
	case math.IsInf(n, -1):
		return append(out, `"-Infinity"`...)
	}
	f := byte('f')
	if abs := math.Abs(n); abs != 0 {
		if bitSize == 64 && (abs < 1e-6 || abs >= 1e21) || bitSize == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			f = 'e'
		}
	}
	out = strconv.AppendFloat(out, n, f, -1, bitSize)
	if f == 'e' {
		n := len(out)
		if n >= 4 && out[n-4] == 'e' && out[n-3] == '-' && out[n-2] == '0' {
			out[n-2] = out[n-1]
			out = out[:n-1]
		}
	}
	return out
}

// appendString writes a string as protojson does: '"', '\\' and control
// characters escaped, nothing else; invalid UTF-8 is an error.
func appendString(out []byte, s string) ([]byte, error) {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				return out, errGeneric
			}
			out = append(out, s[i:i+n]...)
			i += n
			continue
		}
		switch {
		case c == '"' || c == '\\':
			out = append(out, '\\', c)
		case c == '\b':
			out = append(out, '\\', 'b')
		case c == '\f':
			out = append(out, '\\', 'f')
		case c == '\n':
			out = append(out, '\\', 'n')
		case c == '\r':
			out = append(out, '\\', 'r')
		case c == '\t':
			out = append(out, '\\', 't')
		case c < ' ':
			out = append(out, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			out = append(out, c)
		}
		i++
	}
	return append(out, '"'), nil
}
