package avrocodec

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/avro"

	"github.com/wasmstream/wasmstream/internal/jsonw"
)

// ErrTooLarge is a decoded value whose JSON exceeds the size given.
var ErrTooLarge = errors.New("the decoded JSON exceeds its size limit")

// DecodeError is an Avro payload that does not decode with the schema.
type DecodeError struct {
	Path string // the field, "" for the whole value
	Err  error
}

func (e *DecodeError) Error() string {
	if e.Path == "" {
		return "avro: " + e.Err.Error()
	}
	return "avro: field " + e.Path + ": " + e.Err.Error()
}

func (e *DecodeError) Unwrap() error { return e.Err }

// AppendJSON decodes payload, the Avro binary encoding of one value of the
// schema, and appends it as JSON to dst; the JSON appended is at most
// maxJSON bytes.
//
// A schema whose every node the direct transcoder knows (tojson.go) is
// read straight from the bytes into JSON; any other (a logical type such
// as duration or time-micros) takes the generic path, which decodes into Go
// values with the library first. Both write the same bytes.
func (c *Codec) AppendJSON(dst, payload []byte, maxJSON int) ([]byte, error) {
	if c.direct {
		return c.appendJSONDirect(dst, payload, maxJSON)
	}
	return c.appendJSONGeneric(dst, payload, maxJSON)
}

// appendJSONGeneric is AppendJSON through the library's generic decoding.
func (c *Codec) appendJSONGeneric(dst, payload []byte, maxJSON int) ([]byte, error) {
	var v any
	rest, err := c.schema.Decode(payload, &v, avro.TaggedUnions())
	if err != nil {
		return dst, &DecodeError{Err: err}
	}
	if len(rest) != 0 {
		return dst, &DecodeError{Err: fmt.Errorf("%d bytes left after the value (%d bytes): written with another schema?", len(rest), len(payload)-len(rest))}
	}
	w := writer{c: c, limit: len(dst) + maxJSON}
	b, err := w.write(dst, v, c.root, 0)
	if err != nil {
		return dst, err
	}
	if len(b) > w.limit {
		return dst, fmt.Errorf("avro: %w (%d bytes)", ErrTooLarge, maxJSON)
	}
	return b, nil
}

type writer struct {
	c     *Codec
	limit int
}

func (w *writer) write(b []byte, v any, n *node, depth int) ([]byte, error) {
	if len(b) > w.limit {
		return b, fmt.Errorf("avro: %w (%d bytes)", ErrTooLarge, w.limit)
	}
	if depth > w.c.limits.MaxDepth {
		return b, &DecodeError{Err: fmt.Errorf("nested deeper than %d levels", w.c.limits.MaxDepth)}
	}
	switch x := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, x), nil
	case int32:
		return strconv.AppendInt(b, int64(x), 10), nil
	case int64:
		return strconv.AppendInt(b, x, 10), nil
	case float32:
		return appendFloat(b, float64(x), 32), nil
	case float64:
		return appendFloat(b, x, 64), nil
	case string:
		return jsonw.AppendString(b, x), nil
	case []byte:
		return appendBase64(b, x), nil
	case [16]byte: // a uuid on fixed(16)
		if n.logical == "uuid" && !w.c.opts.RawLogicalTypes {
			return jsonw.AppendString(b, uuidString(x)), nil
		}
		return appendBase64(b, x[:]), nil
	case avro.Duration:
		bs := x.Bytes()
		return appendBase64(b, bs[:]), nil
	case time.Time:
		return w.appendTime(b, x, n), nil
	case time.Duration:
		return w.appendTimeOfDay(b, x, n), nil
	case *big.Rat:
		return w.appendDecimal(b, x, n)
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = w.write(b, e, n.items, depth+1); err != nil {
				return b, prefix(err, "["+strconv.Itoa(i)+"]")
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		return w.writeMap(b, x, n, depth)
	}
	return b, &DecodeError{Err: fmt.Errorf("unexpected decoded value %T", v)}
}

func (w *writer) writeMap(b []byte, m map[string]any, n *node, depth int) ([]byte, error) {
	var err error
	switch n.kind {
	case kRecord:
		b = append(b, '{')
		for i, f := range n.fields {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, f.key...)
			if b, err = w.write(b, m[f.name], f.typ, depth+1); err != nil {
				return b, prefix(err, f.name)
			}
		}
		return append(b, '}'), nil
	case kMap:
		b = append(b, '{')
		// Sorted: the same value always gives the same bytes.
		for i, k := range slices.Sorted(maps.Keys(m)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(jsonw.AppendString(b, k), ':')
			if b, err = w.write(b, m[k], n.values, depth+1); err != nil {
				return b, prefix(err, "["+strconv.Quote(k)+"]")
			}
		}
		return append(b, '}'), nil
	case kUnion:
		// Decoded with TaggedUnions: {branch name: value}.
		for name, v := range m {
			i, ok := n.branchIdx[name]
			if !ok || len(m) != 1 {
				break
			}
			if !w.c.opts.TaggedUnions {
				return w.write(b, v, n.branches[i], depth+1)
			}
			b = append(jsonw.AppendString(append(b, '{'), name), ':')
			if b, err = w.write(b, v, n.branches[i], depth+1); err != nil {
				return b, err
			}
			return append(b, '}'), nil
		}
	}
	return b, &DecodeError{Err: fmt.Errorf("unexpected decoded object for a %s", n.branchName())}
}

// appendTime renders a timestamp, local timestamp or date: as text, or as
// its integer with RawLogicalTypes and for a time outside the years
// 0000-9999, which RFC 3339 cannot write (the encoder takes either form, so
// whatever decodes encodes back).
func (w *writer) appendTime(b []byte, t time.Time, n *node) []byte {
	t = t.UTC()
	if y := t.Year(); w.c.opts.RawLogicalTypes || y < 0 || y > 9999 {
		switch n.logical {
		case "date":
			return strconv.AppendInt(b, int64(math.Floor(float64(t.Unix())/86400)), 10)
		case "timestamp-micros", "local-timestamp-micros":
			return strconv.AppendInt(b, t.UnixMicro(), 10)
		case "timestamp-nanos", "local-timestamp-nanos":
			return strconv.AppendInt(b, t.UnixNano(), 10)
		}
		return strconv.AppendInt(b, t.UnixMilli(), 10)
	}
	b = append(b, '"')
	switch n.logical {
	case "date":
		b = t.AppendFormat(b, time.DateOnly)
	case "local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos":
		b = t.AppendFormat(b, "2006-01-02T15:04:05.999999999")
	default:
		b = t.AppendFormat(b, time.RFC3339Nano)
	}
	return append(b, '"')
}

// appendTimeOfDay renders time-millis and time-micros.
func (w *writer) appendTimeOfDay(b []byte, d time.Duration, n *node) []byte {
	if w.c.opts.RawLogicalTypes {
		if n.logical == "time-micros" {
			return strconv.AppendInt(b, d.Microseconds(), 10)
		}
		return strconv.AppendInt(b, d.Milliseconds(), 10)
	}
	return append(time.Unix(0, 0).UTC().Add(d).AppendFormat(append(b, '"'), "15:04:05.999999"), '"')
}

// appendDecimal renders a decimal as a string with exactly the schema's
// scale of fractional digits (a string: a JSON number would lose digits in
// most parsers), or raw as the two's-complement bytes of its unscaled value.
//
// A value with more digits than the schema's precision does not decode:
// its writer broke the schema, and the encoder would refuse the same JSON,
// so the contract is one both ways.
func (w *writer) appendDecimal(b []byte, r *big.Rat, n *node) ([]byte, error) {
	unscaled := new(big.Int).Mul(r.Num(), n.pow10Scale)
	unscaled.Quo(unscaled, r.Denom())
	if n.pow10Prec != nil && unscaled.CmpAbs(n.pow10Prec) >= 0 {
		return b, fmt.Errorf("decimal value has more than %d digits (the schema's precision)", n.prec)
	}
	if !w.c.opts.RawLogicalTypes {
		return append(append(append(b, '"'), r.FloatString(n.scale)...), '"'), nil
	}
	size := 0
	if n.kind == kFixed {
		size = n.size
	}
	return appendBase64(b, twosComplement(unscaled, size)), nil
}

// twosComplement is the big-endian two's-complement encoding of v, in size
// bytes when size > 0 (sign-extended), else in as few as hold it.
func twosComplement(v *big.Int, size int) []byte {
	n := v.BitLen()/8 + 1
	if size > n {
		n = size
	}
	out := make([]byte, n)
	if v.Sign() >= 0 {
		v.FillBytes(out)
	} else {
		// 2^(8n) + v
		m := new(big.Int).Lsh(big.NewInt(1), uint(8*n))
		m.Add(m, v).FillBytes(out)
	}
	if size == 0 { // trim redundant sign bytes
		for len(out) > 1 && (out[0] == 0 && out[1]&0x80 == 0 || out[0] == 0xff && out[1]&0x80 != 0) {
			out = out[1:]
		}
	}
	return out
}

func appendFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"Infinity"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Infinity"`...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits)
}

func appendBase64(b, v []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

func appendString(b []byte, s string) []byte { return jsonw.AppendString(b, s) }

func uuidString(u [16]byte) string {
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, hex[c>>4], hex[c&0xf])
	}
	return string(out)
}

// prefix puts a path segment before the path of a DecodeError or an
// EncodeError.
func prefix(err error, seg string) error {
	join := func(p string) string {
		switch {
		case p == "":
			return seg
		case p[0] == '[':
			return seg + p
		}
		return seg + "." + p
	}
	switch e := err.(type) {
	case *DecodeError:
		return &DecodeError{Path: join(e.Path), Err: e.Err}
	case *EncodeError:
		return &EncodeError{Path: join(e.Path), Err: e.Err}
	}
	return err
}
