package avrocodec

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/avro"

	"github.com/wasmstream/wasmstream/internal/jsonw"
)

// The direct transcoder: Avro binary to JSON in one walk of the prepared
// schema nodes over the payload's bytes, appending JSON as it reads,
// without the Go values of the generic path (one allocation per string,
// map, slice and timestamp there). It writes exactly the bytes the generic
// path writes (TestDirectMatchesGeneric compares them on random values) and
// reads the binary encoding as github.com/twmb/avro does: zigzag varints of
// at most 5 (int) and 10 (long) bytes, lengths that must fit the rest of
// the payload, array and map blocks with negative counts carrying their
// byte size, only 0x01 true.

// maxDecimalBytes bounds a decimal's unscaled value, as the library does on
// its decode path: past it, the base conversion is superlinear.
const maxDecimalBytes = 32 << 10

// maxZeroByteItems bounds an array of items that take no bytes (nulls,
// empty records), which the payload's size does not: as the library does.
const maxZeroByteItems = 4 << 10

var (
	errZeroByteItems = fmt.Errorf("array of zero-byte items exceeds %d-element limit", maxZeroByteItems)
	errShort         = errors.New("payload ends inside the value")
	errVarintLong    = errors.New("varint longer than its type allows")
	errNegativeLen   = errors.New("negative length")
	errBlockCount    = errors.New("invalid block count")
	errBadUnionIdx   = errors.New("union branch index out of range")
	errBadEnumIdx    = errors.New("enum symbol index out of range")
	errDecimalBytes  = fmt.Errorf("decimal value longer than %d bytes", maxDecimalBytes)
)

// directOK says whether the direct transcoder reads every node reachable
// from n: any node without a logical type, and the logical types it renders
// itself on the types the library applies them to (on any other the
// library drops them, and node.logical may still hold them).
func directOK(n *node, seen map[*node]bool) bool {
	if seen[n] {
		return true
	}
	seen[n] = true
	if !logicalOK(n) {
		return false
	}
	if n.kind == kInt || n.kind == kLong || n.logical != "" {
		leaf, err := avro.Parse(leafSchema(n))
		if err != nil {
			return false
		}
		n.leaf = leaf
	}
	n.zero = n.kind == kNull || n.kind == kFixed && n.size == 0 || n.kind == kRecord
	for _, f := range n.fields {
		if !directOK(f.typ, seen) {
			return false
		}
		n.zero = n.zero && f.typ.zero
	}
	for _, b := range n.branches {
		if !directOK(b, seen) {
			return false
		}
	}
	if n.items != nil && !directOK(n.items, seen) {
		return false
	}
	return true
}

// leafSchema is the text of a schema of leaf node n alone.
func leafSchema(n *node) string {
	b := []byte(`{"type":`)
	if n.kind == kFixed {
		b = append(jsonw.AppendString(append(b, `"fixed","name":`...), n.name), `,"size":`...)
		b = strconv.AppendInt(b, int64(n.size), 10)
	} else {
		b = jsonw.AppendString(b, n.branchName())
	}
	if n.logical != "" {
		b = jsonw.AppendString(append(b, `,"logicalType":`...), n.logical)
	}
	if n.logical == "decimal" {
		b = strconv.AppendInt(append(b, `,"precision":`...), int64(n.prec), 10)
		b = strconv.AppendInt(append(b, `,"scale":`...), int64(n.scale), 10)
	}
	return string(append(b, '}'))
}

// logicalOK says whether the direct transcoder renders n's logical type
// (none is one it renders).
func logicalOK(n *node) bool {
	switch n.logical {
	case "":
		return true
	case "timestamp-millis", "timestamp-micros", "timestamp-nanos",
		"local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos":
		return n.kind == kLong
	case "date", "time-millis":
		return n.kind == kInt
	case "uuid":
		return n.kind == kString
	case "decimal":
		return (n.kind == kBytes || n.kind == kFixed) && n.scale >= 0 && n.pow10Scale != nil
	}
	return false
}

func (c *Codec) appendJSONDirect(dst, payload []byte, maxJSON int) ([]byte, error) {
	d := directPool.Get().(*direct)
	d.c, d.limit = c, len(dst)+maxJSON
	defer func() {
		d.c, d.entries = nil, d.entries[:0]
		if cap(d.entries) <= 1024 { // a huge map's scratch is not kept
			directPool.Put(d)
		}
	}()
	b, rest, err := d.value(dst, payload, c.root, 0)
	if err != nil {
		return dst, err
	}
	if len(rest) != 0 {
		return dst, &DecodeError{Err: fmt.Errorf("%d bytes left after the value (%d bytes): written with another schema?", len(rest), len(payload)-len(rest))}
	}
	if len(b) > d.limit {
		return dst, fmt.Errorf("avro: %w (%d bytes)", ErrTooLarge, maxJSON)
	}
	return b, nil
}

// direct is one decode's state: the codec and the length dst may reach.
type direct struct {
	c     *Codec
	limit int
	// entries is scratch for sorting one map's entries (reused by the maps
	// nested in it: each sorts and drops its own before its parent goes on).
	entries []mapEntry
}

// directPool keeps the decode states, so a decode's map scratch is not an
// allocation per map.
var directPool = sync.Pool{New: func() any { return new(direct) }}

// mapEntry is one decoded map entry: its key, and where its JSON value
// lies in the output (written there in wire order, then reordered).
type mapEntry struct {
	key        []byte
	start, end int
}

func readLong(src []byte) (int64, []byte, error) {
	var u uint64
	for i := 0; i < 10; i++ {
		if i >= len(src) {
			return 0, nil, errShort
		}
		c := src[i]
		if i == 9 && c > 1 {
			return 0, nil, errVarintLong
		}
		u |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return int64(u>>1) ^ -int64(u&1), src[i+1:], nil
		}
	}
	return 0, nil, errVarintLong
}

func readInt(src []byte) (int32, []byte, error) {
	var u uint32
	for i := 0; i < 5; i++ {
		if i >= len(src) {
			return 0, nil, errShort
		}
		c := src[i]
		if i == 4 && c > 0xf {
			return 0, nil, errVarintLong
		}
		u |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return int32(u>>1) ^ -int32(u&1), src[i+1:], nil
		}
	}
	return 0, nil, errVarintLong
}

// readBytes reads a length-prefixed byte string (bytes, string).
func readBytes(src []byte) ([]byte, []byte, error) {
	n, src, err := readLong(src)
	if err != nil {
		return nil, nil, err
	}
	if n < 0 {
		return nil, nil, errNegativeLen
	}
	if n > int64(len(src)) {
		return nil, nil, errShort
	}
	return src[:n], src[n:], nil
}

// readBlock reads an array or map block's count: 0 at the end; a negative
// count is followed by the block's size in bytes, which is read and not
// needed.
func readBlock(src []byte) (int64, []byte, error) {
	n, src, err := readLong(src)
	if err != nil {
		return 0, nil, err
	}
	if n < 0 {
		if n == math.MinInt64 {
			return 0, nil, errBlockCount
		}
		n = -n
		if _, src, err = readLong(src); err != nil {
			return 0, nil, err
		}
	}
	return n, src, nil
}

func decErr(err error) error { return &DecodeError{Err: err} }

// value appends the JSON of one value of n read from src and returns the
// rest of src. The checks are the generic writer's: the size limit before
// each value, the depth limit at each level.
func (d *direct) value(b, src []byte, n *node, depth int) ([]byte, []byte, error) {
	if len(b) > d.limit {
		return b, nil, fmt.Errorf("avro: %w (%d bytes)", ErrTooLarge, d.limit)
	}
	if depth > d.c.limits.MaxDepth {
		return b, nil, decErr(fmt.Errorf("nested deeper than %d levels", d.c.limits.MaxDepth))
	}
	switch n.kind {
	case kRecord:
		return d.record(b, src, n, depth)
	case kArray:
		return d.array(b, src, n, depth)
	case kMap:
		return d.mapValue(b, src, n, depth)
	case kUnion:
		return d.union(b, src, n, depth)
	case kString, kBytes, kFixed:
		return d.byteString(b, src, n)
	}
	return d.primitive(b, src, n)
}

// primitive reads a null, boolean, number or enum.
func (d *direct) primitive(b, src []byte, n *node) ([]byte, []byte, error) {
	switch n.kind {
	case kNull:
		return append(b, "null"...), src, nil
	case kBool:
		if len(src) < 1 {
			return b, nil, decErr(errShort)
		}
		return strconv.AppendBool(b, src[0] == 1), src[1:], nil
	case kInt:
		v, rest, err := readInt(src)
		if err != nil {
			return b, nil, decErr(err)
		}
		return d.appendInt(b, v, n), rest, nil
	case kLong:
		v, rest, err := readLong(src)
		if err != nil {
			return b, nil, decErr(err)
		}
		return d.appendLong(b, v, n), rest, nil
	case kFloat:
		if len(src) < 4 {
			return b, nil, decErr(errShort)
		}
		u := uint32(src[0]) | uint32(src[1])<<8 | uint32(src[2])<<16 | uint32(src[3])<<24
		return appendFloat(b, float64(math.Float32frombits(u)), 32), src[4:], nil
	case kDouble:
		if len(src) < 8 {
			return b, nil, decErr(errShort)
		}
		u := uint64(src[0]) | uint64(src[1])<<8 | uint64(src[2])<<16 | uint64(src[3])<<24 |
			uint64(src[4])<<32 | uint64(src[5])<<40 | uint64(src[6])<<48 | uint64(src[7])<<56
		return appendFloat(b, math.Float64frombits(u), 64), src[8:], nil
	case kEnum:
		i, rest, err := readInt(src)
		if err != nil {
			return b, nil, decErr(err)
		}
		if i < 0 || int(i) >= len(n.symbols) {
			return b, nil, decErr(errBadEnumIdx)
		}
		return jsonw.AppendString(b, n.symbols[i]), rest, nil
	}
	return b, nil, decErr(fmt.Errorf("unsupported schema node"))
}

// byteString reads a string, bytes or a fixed (a decimal's too).
func (d *direct) byteString(b, src []byte, n *node) ([]byte, []byte, error) {
	switch n.kind {
	case kString:
		s, rest, err := readBytes(src)
		if err != nil {
			return b, nil, decErr(err)
		}
		return jsonw.AppendString(b, s), rest, nil
	case kBytes:
		v, rest, err := readBytes(src)
		if err != nil {
			return b, nil, decErr(err)
		}
		if n.logical == "decimal" {
			b, err = d.appendDecimal(b, v, n)
			return b, rest, err
		}
		return appendBase64(b, v), rest, nil
	case kFixed:
		if n.size > len(src) {
			return b, nil, decErr(errShort)
		}
		if n.logical == "decimal" {
			b, err := d.appendDecimal(b, src[:n.size], n)
			return b, src[n.size:], err
		}
		return appendBase64(b, src[:n.size]), src[n.size:], nil
	}
	return b, nil, decErr(fmt.Errorf("unsupported schema node"))
}

func (d *direct) record(b, src []byte, n *node, depth int) ([]byte, []byte, error) {
	var err error
	b = append(b, '{')
	for i := range n.fields {
		f := &n.fields[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, f.key...)
		if b, src, err = d.value(b, src, f.typ, depth+1); err != nil {
			return b, nil, prefix(err, f.name)
		}
	}
	return append(b, '}'), src, nil
}

func (d *direct) array(b, src []byte, n *node, depth int) ([]byte, []byte, error) {
	b = append(b, '[')
	i := 0
	for {
		count, rest, err := readBlock(src)
		if err != nil {
			return b, nil, decErr(err)
		}
		src = rest
		if count == 0 {
			return append(b, ']'), src, nil
		}
		if n.items.zero && count > maxZeroByteItems-int64(i) {
			return b, nil, decErr(errZeroByteItems)
		}
		// Every item writes at least a byte, so the size limit checked
		// before each bounds a count that claims more than the payload.
		for ; count > 0; count-- {
			if i > 0 {
				b = append(b, ',')
			}
			if b, src, err = d.value(b, src, n.items, depth+1); err != nil {
				return b, nil, prefix(err, "["+strconv.Itoa(i)+"]")
			}
			i++
		}
	}
}

// mapValue writes a map's entries sorted by key (the same value always
// gives the same bytes), a key written twice taking its last value, as the
// generic path's Go map does. The values are written in wire order after
// b and moved into place; the size limit counts them before duplicates
// are dropped.
func (d *direct) mapValue(b, src []byte, n *node, depth int) ([]byte, []byte, error) {
	base := len(d.entries)
	defer func() { d.entries = d.entries[:base] }()
	start := len(b)
	for {
		count, rest, err := readBlock(src)
		if err != nil {
			return b, nil, decErr(err)
		}
		src = rest
		if count == 0 {
			break
		}
		for ; count > 0; count-- {
			k, rest, err := readBytes(src)
			if err != nil {
				return b, nil, decErr(err)
			}
			src = rest
			at := len(b)
			if b, src, err = d.value(b, src, n.values, depth+1); err != nil {
				return b, nil, prefix(err, "["+strconv.Quote(string(k))+"]")
			}
			d.entries = append(d.entries, mapEntry{key: k, start: at, end: len(b)})
		}
	}
	entries := d.entries[base:]
	if len(entries) == 0 {
		return append(b, '{', '}'), src, nil
	}
	// Stable: of equal keys the last stays last, and is the one kept.
	slices.SortStableFunc(entries, func(x, y mapEntry) int { return bytes.Compare(x.key, y.key) })
	// The output goes after the values, reading them where they lie, then
	// moves down over them: no allocation once b has grown to hold both.
	end := len(b)
	b = append(b, '{')
	for i, e := range entries {
		if i+1 < len(entries) && bytes.Equal(e.key, entries[i+1].key) {
			continue
		}
		if len(b) > end+1 {
			b = append(b, ',')
		}
		b = append(jsonw.AppendString(b, e.key), ':')
		b = append(b, b[e.start:e.end]...)
	}
	b = append(b, '}')
	return b[:start+copy(b[start:], b[end:])], src, nil
}

func (d *direct) union(b, src []byte, n *node, depth int) ([]byte, []byte, error) {
	i, rest, err := readLong(src)
	if err != nil {
		return b, nil, decErr(err)
	}
	if i < 0 || i >= int64(len(n.branches)) {
		return b, nil, decErr(errBadUnionIdx)
	}
	br := n.branches[i]
	if br.kind == kNull {
		// A null branch reads no bytes; it is null bare or tagged.
		return append(b, "null"...), rest, nil
	}
	if !d.c.opts.TaggedUnions {
		return d.value(b, rest, br, depth+1)
	}
	b = append(jsonw.AppendString(append(b, '{'), br.branchName()), ':')
	if b, rest, err = d.value(b, rest, br, depth+1); err != nil {
		return b, nil, err
	}
	return append(b, '}'), rest, nil
}

func (d *direct) appendInt(b []byte, v int32, n *node) []byte {
	switch n.logical {
	case "date":
		return (&writer{c: d.c}).appendTime(b, time.Unix(int64(v)*86400, 0).UTC(), n)
	case "time-millis":
		return (&writer{c: d.c}).appendTimeOfDay(b, time.Duration(v)*time.Millisecond, n)
	}
	return strconv.AppendInt(b, int64(v), 10)
}

func (d *direct) appendLong(b []byte, v int64, n *node) []byte {
	var t time.Time
	switch n.logical {
	case "timestamp-millis", "local-timestamp-millis":
		t = time.UnixMilli(v)
	case "timestamp-micros", "local-timestamp-micros":
		t = time.UnixMicro(v)
	case "timestamp-nanos", "local-timestamp-nanos":
		t = time.Unix(v/1e9, v%1e9)
	default:
		return strconv.AppendInt(b, v, 10)
	}
	return (&writer{c: d.c}).appendTime(b, t.UTC(), n)
}

// appendDecimal renders a decimal from its two's-complement unscaled bytes
// as the generic path's writer.appendDecimal does; one of at most 8 bytes
// (precision 18 and below) without big.Int.
func (d *direct) appendDecimal(b, v []byte, n *node) ([]byte, error) {
	if len(v) > maxDecimalBytes {
		return b, decErr(errDecimalBytes)
	}
	if len(v) > 8 || d.c.opts.RawLogicalTypes {
		unscaled := new(big.Int)
		if len(v) > 0 {
			unscaled.SetBytes(v)
			if v[0]&0x80 != 0 {
				unscaled.Sub(unscaled, new(big.Int).Lsh(big.NewInt(1), uint(8*len(v))))
			}
		}
		r := new(big.Rat).SetFrac(unscaled, n.pow10Scale)
		return (&writer{c: d.c}).appendDecimal(b, r, n)
	}
	var u int64
	if len(v) > 0 && v[0]&0x80 != 0 {
		u = -1
	}
	for _, c := range v {
		u = u<<8 | int64(c)
	}
	abs := uint64(u)
	if u < 0 {
		abs = -abs
	}
	if n.prec > 0 && n.prec < 20 && abs >= pow10u64[n.prec] {
		return b, fmt.Errorf("decimal value has more than %d digits (the schema's precision)", n.prec)
	}
	b = append(b, '"')
	if u < 0 {
		b = append(b, '-')
	}
	// The digits of abs, at least scale+1 of them, with the point before
	// the last scale.
	var digits [20]byte
	ds := strconv.AppendUint(digits[:0], abs, 10)
	for pad := n.scale + 1 - len(ds); pad > 0; pad-- {
		b = append(b, '0')
		if len(ds)+pad-1 == n.scale && n.scale > 0 {
			b = append(b, '.')
		}
	}
	if len(ds) > n.scale {
		b = append(b, ds[:len(ds)-n.scale]...)
		if n.scale > 0 {
			b = append(b, '.')
		}
		b = append(b, ds[len(ds)-n.scale:]...)
	} else {
		b = append(b, ds...)
	}
	return append(b, '"'), nil
}

var pow10u64 = func() (p [20]uint64) {
	p[0] = 1
	for i := 1; i < 20; i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()
