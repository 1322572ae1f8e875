package avrocodec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/avro"

	"github.com/wasmstream/wasmstream/internal/schemareg/jsonlimit"
)

// EncodeError is a JSON value that does not fit the schema. Path names the
// field ("items[2].sku"), "" for the whole value.
type EncodeError struct {
	Path string
	Err  error
}

func (e *EncodeError) Error() string {
	if e.Path == "" {
		return "avro: " + e.Err.Error()
	}
	return "avro: field " + e.Path + ": " + e.Err.Error()
}

func (e *EncodeError) Unwrap() error { return e.Err }

func encErr(format string, args ...any) error {
	return &EncodeError{Err: fmt.Errorf(format, args...)}
}

// AppendBinary encodes js, one JSON value under the codec's contract, with
// the schema and appends its Avro binary encoding to dst. A union value may
// be bare or tagged, a timestamp RFC 3339 text or its integer, whatever the
// options; a record field left out takes the schema's default (null for a
// nullable field without one).
//
// A schema the direct transcoder reads (fromjson.go) is encoded from the
// JSON's bytes; any other through Go values, as encoding/json decodes the
// JSON, and the library's encoder. Both write the same bytes.
func (c *Codec) AppendBinary(dst, js []byte) ([]byte, error) {
	if err := jsonlimit.CheckDepth(js, c.limits.MaxDepth); err != nil {
		return dst, &EncodeError{Err: err}
	}
	if c.direct {
		return c.appendBinaryDirect(dst, js)
	}
	return c.appendBinaryGeneric(dst, js)
}

// appendBinaryGeneric is AppendBinary through Go values.
func (c *Codec) appendBinaryGeneric(dst, js []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(js))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return dst, &EncodeError{Err: fmt.Errorf("not JSON: %v", err)}
	}
	if _, err := d.Token(); err != io.EOF {
		return dst, &EncodeError{Err: errors.New("not JSON: more than one value")}
	}
	v, err := c.conv(v, c.root, true, 0)
	if err != nil {
		return dst, err
	}
	out, err := c.schema.AppendEncode(dst, v)
	if err != nil {
		var se *avro.SemanticError
		if errors.As(err, &se) && se.Field != "" {
			inner := se.Err
			if inner == nil {
				inner = fmt.Errorf("cannot use %v as an Avro %s", se.GoType, se.AvroType)
			}
			return dst, &EncodeError{Path: se.Field, Err: inner}
		}
		return dst, &EncodeError{Err: err}
	}
	return out, nil
}

// conv checks v, a JSON value, against n and turns the contract's forms into
// the Go values the Avro encoder takes (base64 into bytes, a tagged union
// for every union value so the branch is the one chosen here). With store
// false it only checks: containers are left as they are.
func (c *Codec) conv(v any, n *node, store bool, depth int) (any, error) {
	if depth > c.limits.MaxDepth {
		return nil, encErr("nested deeper than %d levels", c.limits.MaxDepth)
	}
	switch n.kind {
	case kNull:
		if v != nil {
			return nil, encErr("want null, got %s", jsonType(v))
		}
		return nil, nil
	case kBool:
		if _, ok := v.(bool); !ok {
			return nil, encErr("want a boolean, got %s", jsonType(v))
		}
		return v, nil
	case kInt, kLong:
		return c.convInteger(v, n)
	case kFloat, kDouble:
		return convFloat(v)
	case kString:
		return convString(v, n)
	case kBytes, kFixed:
		return c.convBytes(v, n)
	case kEnum:
		return convEnum(v, n)
	case kArray:
		return c.convArray(v, n, store, depth)
	case kMap:
		return c.convMap(v, n, store, depth)
	case kRecord:
		return c.convRecord(v, n, store, depth)
	case kUnion:
		return c.convUnion(v, n, store, depth)
	}
	return nil, encErr("unsupported schema node")
}

// convFloat checks a float or double: a JSON number, or one of the names
// of the values JSON has no number for.
func convFloat(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		return x, nil
	case string:
		switch x {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
	}
	return nil, encErr("want a number (or \"NaN\", \"Infinity\", \"-Infinity\"), got %s", jsonType(v))
}

// convString checks a string (a uuid's form too).
func convString(v any, n *node) (any, error) {
	s, ok := v.(string)
	if !ok {
		return nil, encErr("want a string, got %s", jsonType(v))
	}
	if n.logical == "uuid" && !isUUID(s) {
		return nil, encErr("%q is not a UUID (want 8-4-4-4-12 hexadecimal digits)", s)
	}
	return s, nil
}

// convEnum checks an enum's symbol.
func convEnum(v any, n *node) (any, error) {
	s, ok := v.(string)
	if !ok {
		return nil, encErr("want one of the symbols of enum %s, got %s", n.name, jsonType(v))
	}
	if _, ok := n.symIdx[s]; !ok {
		return nil, encErr("%q is not a symbol of enum %s (%s)", s, n.name, symbolList(n.symbols))
	}
	return s, nil
}

// convArray converts an array's items.
func (c *Codec) convArray(v any, n *node, store bool, depth int) (any, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, encErr("want an array, got %s", jsonType(v))
	}
	for i, e := range a {
		e, err := c.conv(e, n.items, store, depth+1)
		if err != nil {
			return nil, prefix(err, "["+strconv.Itoa(i)+"]")
		}
		if store {
			a[i] = e
		}
	}
	return a, nil
}

// convMap converts a map's values.
func (c *Codec) convMap(v any, n *node, store bool, depth int) (any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, encErr("want an object (an Avro map), got %s", jsonType(v))
	}
	for k, e := range m {
		e, err := c.conv(e, n.values, store, depth+1)
		if err != nil {
			return nil, prefix(err, "["+strconv.Quote(k)+"]")
		}
		if store {
			m[k] = e
		}
	}
	return m, nil
}

func (c *Codec) convRecord(v any, n *node, store bool, depth int) (any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, encErr("want an object (record %s), got %s", n.name, jsonType(v))
	}
	for k := range m {
		if _, ok := n.fieldIdx[k]; !ok {
			return nil, prefix(encErr("not a field of record %s (its fields: %s)", n.name, fieldList(n.fields)), k)
		}
	}
	for _, f := range n.fields {
		e, ok := m[f.name]
		if !ok {
			if !f.hasDefault && !(f.typ.kind == kUnion && f.typ.nullable) && f.typ.kind != kNull {
				return nil, prefix(encErr("missing, and the schema gives it no default"), f.name)
			}
			continue
		}
		e, err := c.conv(e, f.typ, store, depth+1)
		if err != nil {
			return nil, prefix(err, f.name)
		}
		if store {
			m[f.name] = e
		}
	}
	return m, nil
}

// convUnion picks the union's branch: the one a tagged value names, else
// the first branch, in the schema's order, that the bare value fits.
func (c *Codec) convUnion(v any, n *node, store bool, depth int) (any, error) {
	if v == nil {
		if !n.nullable {
			return nil, encErr("null is not a branch of the union (%s)", branchList(n))
		}
		return nil, nil
	}
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		for name, e := range m {
			if i, ok := n.branchIdx[name]; ok {
				e, err := c.conv(e, n.branches[i], store, depth+1)
				if err != nil {
					return nil, err
				}
				if !store {
					return m, nil
				}
				m[name] = e
				return m, nil
			}
		}
	}
	var candidates []int
	for i, b := range n.branches {
		if fits(v, b) {
			candidates = append(candidates, i)
		}
	}
	var first error
	for _, i := range candidates {
		b := n.branches[i]
		// Try without storing when another branch may still take the
		// value: a failed try must leave the value as it was.
		if _, err := c.conv(v, b, false, depth+1); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		e, err := c.conv(v, b, store, depth+1)
		if err != nil {
			return nil, err
		}
		if !store {
			return v, nil
		}
		return map[string]any{b.branchName(): e}, nil
	}
	if len(candidates) == 1 && first != nil {
		return nil, first // the one branch it could be says why not
	}
	return nil, encErr("%s fits no branch of the union (%s)", jsonType(v), branchList(n))
}

// fits says whether a JSON value's type is one a branch can take.
func fits(v any, b *node) bool {
	switch v.(type) {
	case bool:
		return b.kind == kBool
	case json.Number:
		return b.kind >= kInt && b.kind <= kDouble || b.logical == "decimal"
	case string:
		return b.kind != kNull && b.kind != kBool && b.kind < kArray || b.kind == kEnum
	case []any:
		return b.kind == kArray
	case map[string]any:
		return b.kind == kMap || b.kind == kRecord
	}
	return false
}

func (c *Codec) convInteger(v any, n *node) (any, error) {
	bits := 64
	if n.kind == kInt {
		bits = 32
	}
	switch x := v.(type) {
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, bits); err != nil {
			return nil, encErr("%s is not an integer that fits an Avro %s", x, map[int]string{32: "int", 64: "long"}[bits])
		}
		return x, nil
	case string:
		if t, ok, err := parseLogical(x, n.logical); ok {
			if err != nil {
				return nil, &EncodeError{Err: err}
			}
			return t, nil
		}
		// A 64-bit integer as a string, the way the Protobuf JSON
		// mapping and JavaScript producers write them.
		if _, err := strconv.ParseInt(x, 10, bits); err == nil {
			return json.Number(x), nil
		}
	}
	want := "an integer"
	if n.logical != "" {
		want = "an integer or the " + n.logical + " text"
	}
	return nil, encErr("want %s, got %s", want, jsonType(v))
}

// parseLogical reads the rendered text of an int or long logical type; ok
// is false when the logical type has no text form.
func parseLogical(s, logical string) (v any, ok bool, err error) {
	switch logical {
	case "timestamp-millis", "timestamp-micros", "timestamp-nanos",
		"local-timestamp-millis", "local-timestamp-micros", "local-timestamp-nanos":
		t, err := parseTimestamp(s, logical)
		if err != nil {
			return nil, true, err
		}
		return t, true, nil
	case "date":
		t, err := time.ParseInLocation(time.DateOnly, s, time.UTC)
		if err != nil {
			return nil, true, fmt.Errorf("%q is not a date (as 2024-01-15)", s)
		}
		return t, true, nil
	case "time-millis", "time-micros":
		t, err := time.ParseInLocation("15:04:05.999999", s, time.UTC)
		if err != nil {
			return nil, true, fmt.Errorf("%q is not a time of day (as 10:04:05.123) for %s", s, logical)
		}
		return t.Sub(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)), true, nil
	}
	return nil, false, nil
}

// parseTimestamp reads the text of a timestamp or local timestamp.
func parseTimestamp(s, logical string) (time.Time, error) {
	if strings.HasPrefix(logical, "local-") {
		t, err := time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.UTC)
		if err != nil {
			return t, fmt.Errorf("%q is not a local timestamp (as 2024-01-15T10:04:05.123, no zone) for %s", s, logical)
		}
		return t, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return t, fmt.Errorf("%q is not an RFC 3339 timestamp (as 2024-01-15T10:04:05.123Z) for %s", s, logical)
	}
	return t, nil
}

func (c *Codec) convBytes(v any, n *node) (any, error) {
	if n.logical == "decimal" && !c.opts.RawLogicalTypes {
		var s string
		switch x := v.(type) {
		case json.Number:
			s = string(x)
		case string:
			s = x
		default:
			return nil, encErr("want a decimal number or its text, got %s", jsonType(v))
		}
		// The length and the exponent are bounded before the text is
		// read: big.Rat computes 10^exponent, and the library counts the
		// digits of what it gets, so "1e300000" would cost tens of
		// milliseconds to refuse. An exponent past the text's length plus
		// the precision and scale cannot give a value the schema takes.
		if len(s) > 400 {
			return nil, encErr("%q is not a decimal number", truncate(s))
		}
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			if e, err := strconv.Atoi(s[i+1:]); err == nil && (e > len(s)+n.prec+n.scale || -e > len(s)+n.prec+n.scale) {
				return nil, encErr("%s is out of the range of the schema's decimal (precision %d, scale %d)", truncate(s), n.prec, n.scale)
			}
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			return nil, encErr("%q is not a decimal number", truncate(s))
		}
		scaled := new(big.Rat).Mul(r, new(big.Rat).SetInt(n.pow10Scale))
		if !scaled.IsInt() {
			return nil, encErr("%s has more than %d decimal places (the schema's scale)", truncate(s), n.scale)
		}
		return r, nil
	}
	s, ok := v.(string)
	if !ok {
		return nil, encErr("want base64 text (%s), got %s", n.branchName(), jsonType(v))
	}
	if n.kind == kFixed && n.logical == "uuid" && isUUID(s) {
		return s, nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(s); err != nil {
			return nil, encErr("%q is not base64 (standard alphabet)", truncate(s))
		}
	}
	if n.kind == kFixed && len(b) != n.size {
		return nil, encErr("%d bytes, want %d (fixed %s)", len(b), n.size, n.name)
	}
	return b, nil
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
		default:
			return false
		}
	}
	return true
}

func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "the number " + truncate(string(x))
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// list names at most 10 items.
func list(items []string) string {
	if len(items) > 10 {
		return strings.Join(items[:10], ", ") + fmt.Sprintf(" and %d more", len(items)-10)
	}
	return strings.Join(items, ", ")
}

func symbolList(s []string) string { return "symbols: " + list(s) }

func fieldList(fs []field) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	return list(names)
}

func branchList(n *node) string {
	names := make([]string, len(n.branches))
	for i, b := range n.branches {
		names[i] = b.branchName()
	}
	return "branches: " + list(names)
}
