package avrocodec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/internal/schemareg/jsonlimit"
)

// wideSchema holds every kind and logical type the direct transcoder reads,
// nested: maps of arrays, records in unions, a recursive field, decimals
// past 8 bytes.
const wideSchema = `{"type":"record","name":"W","namespace":"t","fields":[
 {"name":"n","type":"null"},
 {"name":"b","type":"boolean"},
 {"name":"i","type":"int"},
 {"name":"l","type":"long"},
 {"name":"f","type":"float"},
 {"name":"d","type":"double"},
 {"name":"s","type":"string"},
 {"name":"by","type":"bytes"},
 {"name":"fx","type":{"type":"fixed","name":"Fx","size":3}},
 {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B","C"]}},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"tn","type":{"type":"long","logicalType":"timestamp-nanos"}},
 {"name":"lt","type":{"type":"long","logicalType":"local-timestamp-micros"}},
 {"name":"dt","type":{"type":"int","logicalType":"date"}},
 {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"u","type":{"type":"string","logicalType":"uuid"}},
 {"name":"dec0","type":{"type":"bytes","logicalType":"decimal","precision":4,"scale":0}},
 {"name":"decbig","type":{"type":"bytes","logicalType":"decimal","precision":40,"scale":7}},
 {"name":"decfx","type":{"type":"fixed","name":"DF","size":2,"logicalType":"decimal","precision":4,"scale":3}},
 {"name":"mm","type":{"type":"map","values":{"type":"array","items":["null","int",{"type":"map","values":"string"}]}}},
 {"name":"nul2","type":["string","null"]},
 {"name":"next","type":["null","W"]}
]}`

// testSchemas are the schemas of this package's tests, with their refs.
var testSchemas = []struct {
	name   string
	schema string
	refs   []string
}{
	{"order", orderSchema, nil},
	{"logical", `{"type":"record","name":"L","fields":[
	 {"name":"d","type":{"type":"int","logicalType":"date"}},
	 {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
	 {"name":"tu","type":{"type":"long","logicalType":"timestamp-micros"}},
	 {"name":"lt","type":{"type":"long","logicalType":"local-timestamp-millis"}},
	 {"name":"u","type":{"type":"string","logicalType":"uuid"}},
	 {"name":"neg","type":{"type":"fixed","name":"F","size":4,"logicalType":"decimal","precision":8,"scale":3}},
	 {"name":"b","type":"bytes"},
	 {"name":"f","type":"double"},
	 {"name":"opt","type":["null",{"type":"long","logicalType":"timestamp-millis"},"string"]}
	]}`, nil},
	{"user", `{"type":"record","name":"User","namespace":"x","fields":[
	 {"name":"home","type":["null","Addr",{"type":"map","values":"string"}]},
	 {"name":"next","type":["null","User"],"default":null},
	 {"name":"n","type":["int","long","double"]}]}`,
		[]string{`{"type":"record","name":"Addr","namespace":"x","fields":[{"name":"city","type":"string"}]}`}},
	{"wide", wideSchema, nil},
}

// gen writes random Avro binary values of a schema, in every form the
// encoding allows: blocks of positive and negative counts, repeated map
// keys, invalid UTF-8, extreme numbers.
type gen struct {
	r     *rand.Rand
	depth int
	// dups: a map may repeat a key (the size limit counts a map's values
	// before the repeated ones are dropped, so the tests of the limit
	// leave them out).
	dups bool
}

func (g *gen) long(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

func (g *gen) randLong() int64 {
	switch g.r.IntN(6) {
	case 0:
		return 0
	case 1:
		return math.MaxInt64 - g.r.Int64N(3)
	case 2:
		return math.MinInt64 + g.r.Int64N(3)
	case 3:
		return g.r.Int64N(2e15) - 1e15
	}
	return g.r.Int64N(2000) - 1000
}

func (g *gen) randBytes(max int) []byte {
	const alphabet = "ab\"\\<>&\n\x00\xff\xe2\x80\xa8é"
	b := make([]byte, g.r.IntN(max+1))
	for i := range b {
		if g.r.IntN(4) == 0 {
			b[i] = byte(g.r.IntN(256))
		} else {
			b[i] = alphabet[g.r.IntN(len(alphabet))]
		}
	}
	return b
}

// decimal is the two's complement of an unscaled value within n's
// precision, in size bytes, or as few as hold it when size is 0.
func (g *gen) decimal(n *node, size int) []byte {
	p := min(n.prec, 18)
	if p == 0 {
		p = 18
	}
	v := g.r.Int64N(int64(pow10u64[p])) - g.r.Int64N(int64(pow10u64[p]))
	v /= int64(pow10u64[g.r.IntN(p+1)])
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(v))
	out := buf[:]
	for len(out) > 1 && (out[0] == 0 && out[1]&0x80 == 0 || out[0] == 0xff && out[1]&0x80 != 0) {
		out = out[1:]
	}
	if size > len(out) {
		pad := byte(0)
		if v < 0 {
			pad = 0xff
		}
		out = append(bytes.Repeat([]byte{pad}, size-len(out)), out...)
	}
	return out
}

func (g *gen) value(b []byte, n *node) []byte {
	g.depth++
	defer func() { g.depth-- }()
	switch n.kind {
	case kNull:
		return b
	case kBool:
		return append(b, byte(g.r.IntN(2)))
	case kInt:
		v := int32(g.randLong())
		if g.r.IntN(3) == 0 {
			v = int32(g.r.Uint32())
		}
		return g.long(b, int64(v))
	case kLong:
		return g.long(b, g.randLong())
	case kFloat:
		u := g.r.Uint32()
		if g.r.IntN(2) == 0 {
			u = math.Float32bits(float32(g.r.NormFloat64() * 1e3))
		}
		return binary.LittleEndian.AppendUint32(b, u)
	case kDouble:
		u := g.r.Uint64()
		if g.r.IntN(2) == 0 {
			u = math.Float64bits(g.r.NormFloat64() * 1e6)
		}
		return binary.LittleEndian.AppendUint64(b, u)
	case kString, kBytes:
		v := g.randBytes(12)
		if n.logical == "uuid" && g.r.IntN(4) > 0 {
			v = fmt.Appendf(nil, "%08x-%04x-%04X-%04x-%012x", g.r.Uint32(), g.r.IntN(1<<16), g.r.IntN(1<<16), g.r.IntN(1<<16), g.r.Int64N(1<<48))
		}
		if n.logical == "decimal" && g.r.IntN(4) > 0 {
			v = g.decimal(n, 0)
		}
		return append(g.long(b, int64(len(v))), v...)
	case kFixed:
		if n.logical == "decimal" && g.r.IntN(4) > 0 {
			return append(b, g.decimal(n, n.size)...)
		}
		for range n.size {
			b = append(b, byte(g.r.IntN(256)))
		}
		return b
	case kEnum:
		return g.long(b, int64(g.r.IntN(len(n.symbols))))
	case kRecord:
		for _, f := range n.fields {
			b = g.value(b, f.typ)
		}
		return b
	case kArray, kMap:
		blocks := g.r.IntN(3)
		if g.depth > 6 {
			blocks = 0
		}
		for range blocks {
			count := 1 + g.r.IntN(3)
			var block []byte
			for range count {
				if n.kind == kMap {
					k := []byte{"abc"[g.r.IntN(3)]}
					if !g.dups {
						k = []byte{byte('a' + g.r.IntN(26)), byte('a' + g.r.IntN(26)), byte('a' + g.r.IntN(26)), byte('a' + g.r.IntN(26))}
					}
					block = append(g.long(block, 1), k...)
				}
				block = g.value(block, n.items)
			}
			if g.r.IntN(2) == 0 {
				b = g.long(g.long(b, int64(-count)), int64(len(block)))
			} else {
				b = g.long(b, int64(count))
			}
			b = append(b, block...)
		}
		return append(b, 0)
	case kUnion:
		i := g.r.IntN(len(n.branches))
		if g.depth > 6 {
			for j, br := range n.branches {
				if br.kind == kNull {
					i = j
				}
			}
		}
		return g.value(g.long(b, int64(i)), n.branches[i])
	}
	panic("unknown kind")
}

// The direct transcoder writes what the generic path writes, byte for
// byte, for random values of every test schema under every option, and
// fails where it fails for the same values cut short or with a byte
// changed.
func TestDirectMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range testSchemas {
		for _, opts := range []Options{{}, {TaggedUnions: true}, {RawLogicalTypes: true}, {TaggedUnions: true, RawLogicalTypes: true}} {
			c := mustCompile(t, s.schema, opts, s.refs...)
			if !c.direct {
				t.Fatalf("%s: the schema is not read by the direct transcoder", s.name)
			}
			g := &gen{r: r}
			ok := 0
			for range 3000 {
				g.dups = r.IntN(2) == 0
				bin := g.value(nil, c.root)
				want, werr := c.appendJSONGeneric(nil, bin, 1<<20)
				got, gerr := c.appendJSONDirect(nil, bin, 1<<20)
				if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
					t.Fatalf("%s %+v: %x:\ndirect  %s %v\ngeneric %s %v", s.name, opts, bin, got, gerr, want, werr)
				}
				if werr == nil {
					ok++
				}
				// Into a dst already holding bytes, and under a size limit
				// just below and at the JSON's size.
				if werr == nil && !g.dups {
					pre := []byte("prefix")
					got, err := c.appendJSONDirect(pre, bin, len(want))
					if !bytes.Equal(got, append([]byte("prefix"), want...)) {
						t.Fatalf("%s: after a prefix: %s %v", s.name, got, err)
					}
					if _, err := c.appendJSONDirect(nil, bin, len(want)-1); err == nil {
						t.Fatalf("%s: %s written under a limit of %d bytes", s.name, want, len(want)-1)
					}
				}
				mut := append([]byte(nil), bin...)
				switch r.IntN(2) {
				case 0:
					mut = mut[:r.IntN(len(mut)+1)]
				default:
					if len(mut) > 0 {
						mut[r.IntN(len(mut))] = byte(r.IntN(256))
					}
				}
				want, werr = c.appendJSONGeneric(nil, mut, 1<<16)
				got, gerr = c.appendJSONDirect(nil, mut, 1<<16)
				if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
					t.Fatalf("%s %+v: mutated %x:\ndirect  %s %v\ngeneric %s %v", s.name, opts, mut, got, gerr, want, werr)
				}
			}
			// Most values decode: decimals past their precision and the
			// like fail on both paths, not every value.
			if ok < 500 {
				t.Errorf("%s %+v: only %d of 3000 random values decoded", s.name, opts, ok)
			}
		}
	}
}

// The direct transcoder and the generic path agree on any bytes: both fail,
// or both write the same JSON.
func FuzzAvroDirect(f *testing.F) {
	c := mustCompile(f, wideSchema, Options{})
	tagged := mustCompile(f, wideSchema, Options{TaggedUnions: true, RawLogicalTypes: true})
	g := &gen{r: rand.New(rand.NewPCG(3, 4))}
	for range 8 {
		f.Add(g.value(nil, c.root))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, c := range []*Codec{c, tagged} {
			want, werr := c.appendJSONGeneric(nil, b, 1<<16)
			got, gerr := c.appendJSONDirect(nil, b, 1<<16)
			if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
				t.Fatalf("%x:\ndirect  %s %v\ngeneric %s %v", b, got, gerr, want, werr)
			}
		}
	})
}

// jsonEdits are the changes TestDirectEncodeMatchesGeneric makes to valid
// JSON: other types and forms of values, repeated keys, escapes, numbers
// and strings at the edges of what the types take.
var jsonEdits = []string{
	`null`, `true`, `0`, `-0`, `1.5`, `1e3`, `-1E-2`, `1e400`, `2147483648`, `9223372036854775808`,
	`-9223372036854775808`, `"NaN"`, `"Infinity"`, `"x"`, `"+5"`, `"0005"`, `"12"`, `"-7"`, `""`,
	`"AP8"`, `"AP8="`, `"A P8="`, `"\u00e9\ud83d\ude00\ud800x\/"`, "\"\xff\xfe\"", `"1.005"`, `"99999999999"`,
	`"2024-01-15T10:04:05.123Z"`, `"9999-12-31T23:59:59Z"`, `"2024-01-15T10:04:05.123456789+05:30"`, `"1969-12-31T23:59:59.9999999Z"`, `"0001-01-01T00:00:00-01:00"`, `"1.230"`, `"1e300000"`, `1E-300000`, `"-0.5"`, `-12.3`, `"00012"`, `"1e2"`, `"12."`, `"2024-02-29"`, `"10:04:05.123"`, `"B"`, `"PAID"`,
	`"6ba7b810-9dad-11d1-80b4-00c04fd430c8"`, `[]`, `[1,"a",null]`, `{}`, `{"a":1,"a":2}`, `{"string":"s"}`,
	`{"string":"s","string":"t"}`, `{"null":null}`, `{"long":5}`, `{"int":"5"}`, `{"x.Addr":{"city":"c"}}`,
	`{"map":{"k":"v"}}`, `{"t.W":null}`, `{"array":[]}`,
}

// The direct encoder encodes what the generic path encodes: random values
// of the test schemas, written as the decoder writes them under every
// option, then changed (a value replaced, a member repeated or removed, a
// byte cut), encode on both paths to the same value or fail on both.
func TestDirectEncodeMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, s := range testSchemas {
		for _, opts := range []Options{{}, {TaggedUnions: true}, {RawLogicalTypes: true}, {TaggedUnions: true, RawLogicalTypes: true}} {
			c := mustCompile(t, s.schema, opts, s.refs...)
			g := &gen{r: r}
			encoded := 0
			for range 2000 {
				bin := g.value(nil, c.root)
				js, err := c.appendJSONGeneric(nil, bin, 1<<20)
				if err != nil {
					continue
				}
				for edit := range 4 {
					in := js
					if edit > 0 {
						in = editJSON(r, js)
					}
					want, werr := c.appendBinaryGeneric(nil, in)
					got, gerr := c.appendBinaryDirect(nil, in)
					if (werr == nil) != (gerr == nil) {
						t.Fatalf("%s %+v: %s:\ndirect  %x %v\ngeneric %x %v", s.name, opts, in, got, gerr, want, werr)
					}
					if werr != nil {
						continue
					}
					encoded++
					// Map entries have no fixed order on the generic path:
					// compared as decoded, and byte for byte without maps.
					if bytes.Equal(got, want) {
						continue
					}
					wj, werr := c.appendJSONGeneric(nil, want, 1<<20)
					gj, gerr := c.appendJSONGeneric(nil, got, 1<<20)
					if (werr == nil) != (gerr == nil) || !bytes.Equal(gj, wj) || s.name == "logical" {
						t.Fatalf("%s %+v: %s:\ndirect  %x %s %v\ngeneric %x %s %v", s.name, opts, in, got, gj, gerr, want, wj, werr)
					}
				}
			}
			if encoded < 200 {
				t.Errorf("%s %+v: only %d values encoded", s.name, opts, encoded)
			}
		}
	}
}

// editJSON changes one thing in js: a value replaced by one of jsonEdits,
// an object's member repeated or dropped, or the text cut.
func editJSON(r *rand.Rand, js []byte) []byte {
	// The starts of values: after ':', '[' or ','.
	var at []int
	for i, c := range js {
		if c == ':' || c == '[' || c == ',' {
			at = append(at, i+1)
		}
	}
	if len(at) == 0 || r.IntN(8) == 0 {
		return js[:r.IntN(len(js)+1)]
	}
	i := at[r.IntN(len(at))]
	end := valueEnd(js, i)
	switch r.IntN(4) {
	case 0: // repeat a member, or the value in an array
		if j := bytes.LastIndexByte(js[:i], ','); j >= 0 && js[i-1] == ':' {
			if k := bytes.LastIndexAny(js[:i-1], ",{"); k >= 0 {
				member := js[k+1 : end]
				return append(append(append(append([]byte(nil), js[:end]...), ','), member...), js[end:]...)
			}
		}
	case 1: // drop a member
		if js[i-1] == ':' {
			if k := bytes.LastIndexAny(js[:i-1], ",{"); k >= 0 && end < len(js) && js[end] == ',' {
				return append(append([]byte(nil), js[:k+1]...), js[end+1:]...)
			}
		}
	}
	return append(append(append([]byte(nil), js[:i]...), jsonEdits[r.IntN(len(jsonEdits))]...), js[end:]...)
}

// valueEnd is the index after the JSON value starting at i.
func valueEnd(js []byte, i int) int {
	depth, inStr := 0, false
	for j := i; j < len(js); j++ {
		c := js[j]
		switch {
		case inStr:
			if c == '\\' {
				j++
			} else if c == '"' {
				inStr = false
				if depth == 0 {
					return j + 1
				}
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			if depth == 0 {
				return j
			}
			depth--
			if depth == 0 {
				return j + 1
			}
		case c == ',' && depth == 0:
			return j
		}
	}
	return len(js)
}

// The direct encoder and the generic path agree on any JSON text: both
// fail, or both encode the same value.
func FuzzAvroDirectEncode(f *testing.F) {
	codecs := []*Codec{
		mustCompile(f, wideSchema, Options{}),
		mustCompile(f, orderSchema, Options{}),
		mustCompile(f, testSchemas[2].schema, Options{}, testSchemas[2].refs...),
	}
	g := &gen{r: rand.New(rand.NewPCG(7, 8))}
	for _, c := range codecs {
		for range 4 {
			if js, err := c.appendJSONGeneric(nil, g.value(nil, c.root), 1<<20); err == nil {
				f.Add(js)
			}
		}
	}
	f.Add([]byte(orderJSON))
	f.Fuzz(func(t *testing.T, js []byte) {
		for _, c := range codecs {
			if jsonlimit.CheckDepth(js, c.limits.MaxDepth) != nil {
				return
			}
			want, werr := c.appendBinaryGeneric(nil, js)
			got, gerr := c.appendBinaryDirect(nil, js)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%s:\ndirect  %x %v\ngeneric %x %v", js, got, gerr, want, werr)
			}
			if werr != nil || bytes.Equal(got, want) {
				continue
			}
			wj, werr := c.appendJSONGeneric(nil, want, 1<<20)
			gj, gerr := c.appendJSONGeneric(nil, got, 1<<20)
			if (werr == nil) != (gerr == nil) || !bytes.Equal(gj, wj) {
				t.Fatalf("%s:\ndirect  %x %s %v\ngeneric %x %s %v", js, got, gj, gerr, want, wj, werr)
			}
		}
	})
}

// An array of items that take no bytes is bounded by a count, as the
// library bounds it, not by the payload's size: both paths take 4096 of
// them and refuse more, in one block or several.
func TestDirectZeroByteItems(t *testing.T) {
	for _, schema := range []string{`{"type":"array","items":"null"}`, `{"type":"array","items":{"type":"record","name":"E","fields":[]}}`} {
		c := mustCompile(t, schema, Options{})
		for _, tc := range []struct {
			blocks []int64
			ok     bool
		}{
			{[]int64{4096}, true},
			{[]int64{4097}, false},
			{[]int64{4000, 96}, true},
			{[]int64{4000, 97}, false},
			{[]int64{-4097}, false},
			{[]int64{1 << 62}, false},
		} {
			var bin []byte
			for _, n := range tc.blocks {
				bin = binary.AppendVarint(bin, n)
				if n < 0 {
					bin = append(bin, 0) // the block's size in bytes
				}
			}
			bin = append(bin, 0)
			want, werr := c.appendJSONGeneric(nil, bin, 1<<20)
			got, gerr := c.appendJSONDirect(nil, bin, 1<<20)
			if (werr == nil) != tc.ok || (gerr == nil) != tc.ok || !bytes.Equal(got, want) {
				t.Errorf("%s %v: direct %d bytes %v, generic %d bytes %v, want ok %v", schema, tc.blocks, len(got), gerr, len(want), werr, tc.ok)
			}
		}
	}
}

// A decimal's exponent is bounded before big.Rat computes 10^exponent:
// "1e300000" is refused by its text, on both paths, naming the field.
func TestDecimalExponentBounded(t *testing.T) {
	c := mustCompile(t, orderSchema, Options{})
	for _, a := range []string{`"1e300000"`, `1e300000`, `"1E-300000"`} {
		in := []byte(`{"id":1,"items":[],"placed_at":1,"amount":` + a + `,"status":"NEW","tags":{}}`)
		for name, enc := range map[string]func([]byte, []byte) ([]byte, error){"direct": c.appendBinaryDirect, "generic": c.appendBinaryGeneric} {
			if _, err := enc(nil, in); err == nil || !strings.Contains(err.Error(), "field amount: ") || !strings.Contains(err.Error(), "out of the range of the schema's decimal") {
				t.Errorf("%s %s: %v", name, a, err)
			}
		}
	}
	// Within the bound, an exponent is read: 1.5e1 is 15.
	if _, err := c.AppendBinary(nil, []byte(`{"id":1,"items":[],"placed_at":1,"amount":1.5e1,"status":"NEW","tags":{}}`)); err != nil {
		t.Error(err)
	}
}
