package protocodec

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// jgen writes random JSON for a message in the forms protojson reads:
// fields in any order under either name, integers as numbers or strings,
// enums by name or number, nulls, empty lists and maps, escapes; and, when
// bad, what it refuses or the direct encoder leaves to it (unknown and
// repeated fields, two members of a oneof, fractions where an integer
// goes, wrong types, lone surrogates).
type jgen struct {
	r     *rand.Rand
	depth int
	bad   bool
}

func (g *jgen) maybe(n int) bool { return g.r.IntN(n) == 0 }

func (g *jgen) message(b []byte, md protoreflect.MessageDescriptor) []byte {
	g.depth++
	defer func() { g.depth-- }()
	if md.FullName() == "google.protobuf.Timestamp" {
		return g.timestamp(b)
	}
	b = append(b, '{')
	fields := md.Fields()
	n := 0
	oneofs := map[protoreflect.FullName]bool{}
	for _, i := range g.r.Perm(fields.Len()) {
		fd := fields.Get(i)
		if g.maybe(2) || g.depth > 3 && fd.Kind() == protoreflect.MessageKind && fd.Message().FullName() != "google.protobuf.Timestamp" {
			continue
		}
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
			if oneofs[o.FullName()] && !(g.bad && g.maybe(4)) {
				continue
			}
			oneofs[o.FullName()] = true
		}
		for range 1 + btoi(g.bad && g.maybe(20)) { // twice: refused
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = g.ws(b)
			name := fd.TextName()
			if g.maybe(2) {
				name = fd.JSONName()
			}
			b = append(jq(b, name), ':')
			b = g.ws(b)
			if g.maybe(12) {
				b = append(b, "null"...)
				continue
			}
			b = g.field(b, fd)
		}
	}
	if g.bad && g.maybe(10) {
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, `"no_such_field":1`...)
	}
	return append(g.ws(b), '}')
}

// jq writes s as a JSON string.
func jq(b []byte, s string) []byte {
	b, _ = appendString(b, s)
	return b
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (g *jgen) ws(b []byte) []byte {
	if g.maybe(8) {
		return append(b, " \n\t\r"[g.r.IntN(4)])
	}
	return b
}

func (g *jgen) field(b []byte, fd protoreflect.FieldDescriptor) []byte {
	switch {
	case fd.IsMap():
		b = append(b, '{')
		keys := map[string]bool{}
		for range g.r.IntN(4) {
			k := g.mapKey(nil, fd.MapKey())
			if keys[string(k)] && !(g.bad && g.maybe(4)) {
				continue // given twice: refused
			}
			if len(keys) > 0 {
				b = append(b, ',')
			}
			keys[string(k)] = true
			b = g.value(append(append(b, k...), ':'), fd.MapValue())
		}
		return append(b, '}')
	case fd.IsList():
		b = append(b, '[')
		for k := range g.r.IntN(4) {
			if k > 0 {
				b = append(b, ',')
			}
			b = g.value(g.ws(b), fd)
		}
		return append(b, ']')
	}
	return g.value(b, fd)
}

func (g *jgen) mapKey(b []byte, fd protoreflect.FieldDescriptor) []byte {
	var s string
	switch fd.Kind() {
	case protoreflect.StringKind:
		s = g.text()
	case protoreflect.BoolKind:
		s = []string{"true", "false", "1"}[g.r.IntN(3-btoi(!g.bad))]
	default:
		s = g.intText(fd.Kind(), false)
		if g.bad && g.maybe(10) {
			s = "+" + s
		}
	}
	return jq(b, s)
}

func (g *jgen) text() string {
	const alphabet = "ab\"\\<>&\n\x00\x1f/é€😀"
	s := make([]byte, 0, 8)
	for range g.r.IntN(6) {
		s = append(s, alphabet[g.r.IntN(len(alphabet))])
	}
	return string(bytes.ToValidUTF8(s, []byte("?")))
}

func (g *jgen) value(b []byte, fd protoreflect.FieldDescriptor) []byte {
	if g.bad && g.maybe(30) {
		return append(b, []string{`true`, `"x"`, `1.5`, `[]`, `{}`, `"\ud800"`, `1e2`, `-0`, `01`, `1e400`}[g.r.IntN(10)]...)
	}
	switch fd.Kind() {
	case protoreflect.MessageKind:
		return g.message(b, fd.Message())
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, g.maybe(2))
	case protoreflect.StringKind:
		if g.maybe(5) {
			return append(b, `"a\u00e9\ud83d\ude00\/\n"`...)
		}
		return jq(b, g.text())
	case protoreflect.BytesKind:
		raw := []byte(g.text())
		enc := []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding}[g.r.IntN(4)]
		return jq(b, enc.EncodeToString(raw))
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		switch g.r.IntN(4) {
		case 0:
			return strconv.AppendInt(b, int64(g.r.IntN(5)-1), 10)
		case 1:
			if g.bad {
				return append(b, `"NO_SUCH"`...)
			}
		}
		return jq(b, string(vals.Get(g.r.IntN(vals.Len())).Name()))
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return g.float(b)
	}
	s := g.intText(fd.Kind(), g.bad)
	if g.maybe(2) {
		return jq(b, s)
	}
	return append(b, s...)
}

func (g *jgen) intText(k protoreflect.Kind, bad bool) string {
	signed := k == protoreflect.Int32Kind || k == protoreflect.Sint32Kind || k == protoreflect.Sfixed32Kind ||
		k == protoreflect.Int64Kind || k == protoreflect.Sint64Kind || k == protoreflect.Sfixed64Kind
	wide := k == protoreflect.Int64Kind || k == protoreflect.Sint64Kind || k == protoreflect.Sfixed64Kind ||
		k == protoreflect.Uint64Kind || k == protoreflect.Fixed64Kind
	switch g.r.IntN(6) {
	case 0:
		return "0"
	case 1:
		switch {
		case signed && wide:
			return strconv.FormatInt(int64(g.r.Uint64()), 10)
		case wide:
			return strconv.FormatUint(g.r.Uint64(), 10)
		case signed:
			return strconv.FormatInt(int64(g.r.Int32())*int64(1-2*g.r.IntN(2)), 10)
		}
		return strconv.FormatUint(uint64(g.r.Uint32()), 10)
	case 2:
		if bad { // out of range, or a fraction
			return []string{"4294967296", "-2147483649", "18446744073709551616", "-1", "1.0", "2e3"}[g.r.IntN(6)]
		}
	case 3:
		if signed {
			return strconv.Itoa(-g.r.IntN(5))
		}
	}
	return strconv.Itoa(g.r.IntN(300))
}

func (g *jgen) float(b []byte) []byte {
	switch g.r.IntN(8) {
	case 0:
		return append(b, []string{`"NaN"`, `"Infinity"`, `"-Infinity"`, `0`, `-0`, `-0.0`, `"1.5"`, `1e-7`}[g.r.IntN(8)]...)
	case 1:
		return strconv.AppendInt(b, int64(g.r.IntN(100)), 10)
	}
	x := g.r.NormFloat64() * math.Pow(10, float64(g.r.IntN(60)-30))
	return strconv.AppendFloat(b, x, "geE"[g.r.IntN(3)], -1, 64)
}

func (g *jgen) timestamp(b []byte) []byte {
	t := time.Unix(g.r.Int64N(253402300799+62135596800)-62135596800, int64(g.r.IntN(1e9))).UTC()
	layouts := []string{time.RFC3339Nano, time.RFC3339, "2006-01-02T15:04:05.000Z07:00", "2006-01-02T15:04:05.000000000-07:00"}
	if g.maybe(4) {
		t = t.In(time.FixedZone("", 3600*(g.r.IntN(25)-12)))
	}
	if g.bad && g.maybe(8) {
		return append(b, []string{`"2024-01-01"`, `"10000-01-01T00:00:00Z"`, `"2024-01-01T00:00:00.1234567890Z"`, `12`}[g.r.IntN(4)]...)
	}
	return jq(b, t.Format(layouts[g.r.IntN(len(layouts))]))
}

// directEncodeCheck compares the direct encoder with the generic path on
// js: the direct one gives up, or writes the generic one's bytes.
func directEncodeCheck(c *Codec, md protoreflect.MessageDescriptor, dm *pmsg, js []byte) (direct bool, err error) {
	got, gerr := c.appendBinaryDirect([]byte("dst"), js, dm)
	if gerr == errGeneric {
		return false, nil
	}
	want, werr := c.appendBinaryGeneric([]byte("dst"), js, md)
	if gerr != nil || werr != nil || !bytes.Equal(got, want) {
		return true, fmt.Errorf("%s:\ndirect  %x %v\ngeneric %x %v", js, got, gerr, want, werr)
	}
	return true, nil
}

// The direct encoder writes what the generic path (protojson, dynamicpb,
// proto.Marshal) writes, byte for byte, for random JSON of every message
// it takes; JSON it gives up on is the generic path's to encode or refuse.
func TestDirectProtoEncodeMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, s := range []struct {
		text string
		refs map[string]string
		msg  []int
	}{
		{orderProto, map[string]string{"common/money.proto": moneyProto}, []int{0}},
		{orderProto, map[string]string{"common/money.proto": moneyProto}, []int{1}},
		{wideProto, nil, []int{0}},
	} {
		c, err := Compile(s.text, s.refs, Options{}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		md, _ := c.Message(s.msg)
		dm := c.direct[md.FullName()]
		g := &jgen{r: r}
		direct, refused := 0, 0
		for range 2500 {
			g.bad = r.IntN(6) == 0
			js := g.message(nil, md)
			ok, err := directEncodeCheck(c, md, dm, js)
			if err != nil {
				t.Fatalf("%s: %v", md.FullName(), err)
			}
			if ok {
				direct++
			} else if _, err := c.appendBinaryGeneric(nil, js, md); err != nil {
				refused++
			}
		}
		t.Logf("%s: %d of 2500 JSON values encoded directly, %d refused", md.FullName(), direct, refused)
		if direct < 1000 || refused == 0 {
			t.Errorf("%s: %d of 2500 JSON values encoded directly, %d refused", md.FullName(), direct, refused)
		}
	}
	// And what the decoders write, under both naming options.
	pg := &pgen{r: r}
	for _, opts := range []Options{{}, {JSONNames: true}} {
		c, _ := Compile(wideProto, nil, opts, Limits{})
		md, _ := c.Message(nil)
		for range 1000 {
			js, err := c.AppendJSON(nil, pg.message(nil, md), nil, 1<<20)
			if err != nil {
				continue
			}
			if ok, err := directEncodeCheck(c, md, c.direct[md.FullName()], js); err != nil || !ok {
				t.Fatalf("%+v: decoded JSON not encoded directly (%v): %v", opts, ok, err)
			}
		}
	}
}

// An error from AppendBinary is the library's, naming the field, whether
// the message is the direct encoder's or not.
func TestDirectProtoEncodeErrors(t *testing.T) {
	c := compile(t, Options{})
	for js, want := range map[string]string{
		`{"id":"1","nope":2}`:               `unknown field "nope"`,
		`{"status":"LOST"}`:                 `invalid value for enum field status: "LOST"`,
		`{"id":1.5}`:                        `invalid value for int64 field id: 1.5`,
		`{"tags":{"a":1,"a":2}}`:            `duplicate map key "a"`,
		`{"items":"book"}`:                  `unexpected token "book"`,
		`{"placed_at":"yesterday"}`:         `invalid google.protobuf.Timestamp value "yesterday"`,
		`{"id":"1","placedAt":null,"id":2}`: `duplicate field "id"`,
	} {
		_, err := c.AppendBinary(nil, []byte(js), nil)
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("%s: %v, want %q", js, err, want)
		}
	}
}

// The direct encoder and the generic path agree on any JSON: the direct
// one gives up, or writes what the generic one writes.
func FuzzProtoDirectEncode(f *testing.F) {
	c, err := Compile(wideProto, nil, Options{}, Limits{})
	if err != nil {
		f.Fatal(err)
	}
	md, _ := c.Message(nil)
	dm := c.direct[md.FullName()]
	g := &jgen{r: rand.New(rand.NewPCG(15, 16))}
	for k := range 12 {
		g.bad = k%3 == 0
		f.Add(g.message(nil, md))
	}
	f.Add([]byte(`{"m_s":{"b":"1","a":"-2"},"oS":"x","ts":"2024-01-15T10:04:05.123+01:00","by":"-_8","e":"TWO","opt":0}`))
	f.Fuzz(func(t *testing.T, js []byte) {
		if _, err := directEncodeCheck(c, md, dm, js); err != nil {
			t.Fatal(err)
		}
	})
}

// BenchmarkProtoOrderEncodeGeneric is BenchmarkProtoOrderEncode through the
// library (protojson, dynamicpb, proto.Marshal), as before the direct
// encoder.
func BenchmarkProtoOrderEncodeGeneric(b *testing.B) {
	c := compile(b, Options{})
	md, _ := c.Message(nil)
	in := []byte(orderJSON)
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		out, _ = c.appendBinaryGeneric(out[:0], in, md)
	}
}

// BenchmarkProtoOrderGenericEncode is BenchmarkProtoOrder's round trip as
// it was before the direct encoder: the direct decode, then the library's
// encode.
func BenchmarkProtoOrderGenericEncode(b *testing.B) {
	c := compile(b, Options{})
	md, _ := c.Message(nil)
	bin, _ := c.AppendBinary(nil, []byte(orderJSON), nil)
	var js, out []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if js, err = c.AppendJSON(js[:0], bin, []int{0}, 1<<20); err != nil {
			b.Fatal(err)
		}
		if out, err = c.appendBinaryGeneric(out[:0], js, md); err != nil {
			b.Fatal(err)
		}
	}
}

// utcTimestamp reads what time.Parse reads, the same instant, or leaves
// the text to it: on random instants and on dates and times out of range.
func TestUTCTimestampMatchesTimeParse(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	texts := []string{"2023-02-29T00:00:00Z", "2024-02-29T23:59:59.5Z", "2024-04-31T00:00:00Z", "2024-01-01T24:00:00Z",
		"2024-01-01T00:60:00Z", "2024-01-01T00:00:60Z", "2024-13-01T00:00:00Z", "2024-00-10T00:00:00Z", "2024-01-00T00:00:00Z",
		"0000-01-01T00:00:00Z", "2024-01-01T00:00:00.Z", "2024-01-01T00:00:00.1234567891Z", "2024-01-01t00:00:00Z", "2024-1-01T00:00:00Z"}
	for range 20000 {
		ts := time.Unix(r.Int64N(253402300799+62135596800)-62135596800, int64(r.IntN(1e9))).UTC()
		texts = append(texts, ts.Format(time.RFC3339Nano), ts.Format("2006-01-02T15:04:05.000Z"))
	}
	read := 0
	for _, s := range texts {
		secs, nanos, ok := utcTimestamp([]byte(s))
		if !ok {
			continue
		}
		read++
		want, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || want.Unix() != secs || want.Nanosecond() != nanos {
			t.Fatalf("%s: %d s %d ns, time.Parse %d s %d ns (%v)", s, secs, nanos, want.Unix(), want.Nanosecond(), err)
		}
	}
	if read < 40000 {
		t.Errorf("%d of the 40000 instants in protojson's form read", read)
	}
}
