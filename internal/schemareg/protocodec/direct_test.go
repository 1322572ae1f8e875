package protocodec

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// wideProto has every kind the direct decoder takes: each scalar, repeated
// (packed or not), maps keyed by each key kind, a oneof, optional fields,
// a recursive message, timestamps.
const wideProto = `syntax = "proto3";
package w;
import "google/protobuf/timestamp.proto";
enum E { ZERO = 0; ONE = 1; TWO = 2; }
message W {
  int32 i32 = 1; int64 i64 = 2; uint32 u32 = 3; uint64 u64 = 4;
  sint32 s32 = 5; sint64 s64 = 6; fixed32 f32 = 7; fixed64 f64 = 8;
  sfixed32 sf32 = 9; sfixed64 sf64 = 10; float fl = 11; double db = 12;
  bool b = 13; string s = 14; bytes by = 15; E e = 16;
  optional int32 opt = 17; optional string opt_s = 18;
  repeated int32 ri = 19; repeated double rd = 20; repeated string rs = 21;
  repeated E re = 22; repeated W rw = 23;
  map<string, int64> m_s = 24; map<int32, string> m_i = 25; map<bool, W> m_b = 26;
  map<uint64, E> m_u = 27; map<sint32, double> m_z = 28; map<fixed32, bytes> m_f = 29;
  oneof pick { string o_s = 30; W o_w = 31; int64 o_i = 32; }
  W next = 33;
  google.protobuf.Timestamp ts = 34;
  repeated google.protobuf.Timestamp rts = 35;
  map<sfixed64, google.protobuf.Timestamp> m_t = 36;
}
`

// pgen writes random Protobuf payloads of a message in every form the
// wire allows: fields in any order, given twice, packed or not, unknown
// fields, map entries without key or value, out-of-range timestamps,
// invalid UTF-8 now and then.
type pgen struct {
	r     *rand.Rand
	depth int
	// bad: the payload may hold invalid UTF-8 and timestamps out of
	// range (the generic path's errors; a payload holds many of each).
	bad bool
}

func (g *pgen) message(b []byte, md protoreflect.MessageDescriptor) []byte {
	g.depth++
	defer func() { g.depth-- }()
	if md.FullName() == "google.protobuf.Timestamp" {
		secs := g.r.Int64N(253402300799+62135596800) - 62135596800
		nanos := int64(g.r.IntN(1e9))
		switch g.r.IntN(16) {
		case 0:
			if g.bad {
				secs = g.r.Int64()
			}
		case 1:
			if g.bad {
				nanos = -1
			}
		case 2:
			nanos = int64(g.r.IntN(1000)) * 1e6
		}
		if secs != 0 || g.r.IntN(2) == 0 {
			b = protowire.AppendVarint(protowire.AppendTag(b, 1, protowire.VarintType), uint64(secs))
		}
		if nanos != 0 || g.r.IntN(2) == 0 {
			b = protowire.AppendVarint(protowire.AppendTag(b, 2, protowire.VarintType), uint64(nanos))
		}
		return b
	}
	fields := md.Fields()
	order := g.r.Perm(fields.Len())
	oneofs := map[protoreflect.FullName]bool{} // the oneofs given a member
	for _, i := range order {
		fd := fields.Get(i)
		times := g.r.IntN(3)
		if fd.Kind() == protoreflect.MessageKind && !fd.IsList() && !fd.IsMap() && g.r.IntN(10) > 0 {
			times = min(times, 1) // twice: merged, the generic path's
		}
		if o := fd.ContainingOneof(); o != nil && !o.IsSynthetic() {
			if oneofs[o.FullName()] && g.r.IntN(10) > 0 {
				times = 0
			}
			if times > 0 {
				oneofs[o.FullName()] = true
			}
		}
		if g.depth > 2 && fd.Kind() == protoreflect.MessageKind && fd.Message().FullName() != "google.protobuf.Timestamp" {
			times = 0
		}
		for range times {
			b = g.field(b, fd)
		}
	}
	if g.r.IntN(10) == 0 {
		b = protowire.AppendVarint(protowire.AppendTag(b, 1000, protowire.VarintType), 7)
	}
	return b
}

func (g *pgen) field(b []byte, fd protoreflect.FieldDescriptor) []byte {
	switch {
	case fd.IsMap():
		var e []byte
		if g.r.IntN(6) > 0 {
			e = g.value(e, 1, fd.MapKey())
		}
		if g.r.IntN(6) > 0 {
			e = g.value(e, 2, fd.MapValue())
		}
		return protowire.AppendBytes(protowire.AppendTag(b, fd.Number(), protowire.BytesType), e)
	case fd.IsList() && fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.StringKind && fd.Kind() != protoreflect.BytesKind && g.r.IntN(2) == 0:
		var packed []byte
		for range 1 + g.r.IntN(3) {
			packed = g.scalar(packed, fd)
		}
		return protowire.AppendBytes(protowire.AppendTag(b, fd.Number(), protowire.BytesType), packed)
	}
	return g.value(b, fd.Number(), fd)
}

func (g *pgen) value(b []byte, num protowire.Number, fd protoreflect.FieldDescriptor) []byte {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), g.message(nil, fd.Message()))
	case protoreflect.StringKind, protoreflect.BytesKind:
		const alphabet = "ab\"\\<>&\n\x00\x1f/é€😀"
		s := make([]byte, 0, 8)
		for range g.r.IntN(8) {
			s = append(s, alphabet[g.r.IntN(len(alphabet))])
		}
		if fd.Kind() == protoreflect.StringKind && (!g.bad || g.r.IntN(30) > 0) {
			s = bytes.ToValidUTF8(s, []byte("?"))
		}
		return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), s)
	}
	var typ protowire.Type
	switch wireType(fd.Kind()) {
	case protowire.Fixed32Type:
		typ = protowire.Fixed32Type
	case protowire.Fixed64Type:
		typ = protowire.Fixed64Type
	default:
		typ = protowire.VarintType
	}
	return g.scalar(protowire.AppendTag(b, num, typ), fd)
}

func (g *pgen) scalar(b []byte, fd protoreflect.FieldDescriptor) []byte {
	var u uint64
	switch g.r.IntN(5) {
	case 0:
		u = 0
	case 1:
		u = g.r.Uint64()
	case 2:
		u = uint64(g.r.IntN(5))
	case 3:
		u = uint64(-int64(g.r.IntN(5)))
	default:
		u = uint64(g.r.Int32())
	}
	switch wireType(fd.Kind()) {
	case protowire.Fixed32Type:
		if fd.Kind() == protoreflect.FloatKind && g.r.IntN(2) == 0 {
			u = uint64(math.Float32bits(float32(g.r.NormFloat64() * math.Pow(10, float64(g.r.IntN(50)-25)))))
		}
		return protowire.AppendFixed32(b, uint32(u))
	case protowire.Fixed64Type:
		if fd.Kind() == protoreflect.DoubleKind && g.r.IntN(2) == 0 {
			u = math.Float64bits(g.r.NormFloat64() * math.Pow(10, float64(g.r.IntN(60)-30)))
		}
		return protowire.AppendFixed64(b, u)
	}
	return protowire.AppendVarint(b, u)
}

// The direct decoder writes what the generic path (dynamicpb, protojson,
// compactJSON) writes, byte for byte, for random payloads of every message
// it takes, under both naming options; a payload it gives up on is the
// generic path's to decode.
func TestDirectProtoMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, opts := range []Options{{}, {JSONNames: true}} {
		for _, s := range []struct {
			text string
			refs map[string]string
			msg  []int
		}{
			{orderProto, map[string]string{"common/money.proto": moneyProto}, []int{0}},
			{orderProto, map[string]string{"common/money.proto": moneyProto}, []int{1}},
			{wideProto, nil, []int{0}},
		} {
			c, err := Compile(s.text, s.refs, opts, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			md, err := c.Message(s.msg)
			if err != nil {
				t.Fatal(err)
			}
			dm := c.direct[md.FullName()]
			if dm == nil {
				t.Fatalf("%s is not taken by the direct decoder", md.FullName())
			}
			g := &pgen{r: r}
			direct := 0
			for range 3000 {
				g.bad = r.IntN(10) == 0
				bin := g.message(nil, md)
				if r.IntN(8) == 0 {
					bin = bin[:r.IntN(len(bin)+1)]
				}
				want, werr := c.appendJSONGeneric(nil, bin, md, 1<<20)
				got, gerr := c.appendJSONDirect(nil, bin, dm)
				if gerr == errGeneric {
					continue
				}
				direct++
				if gerr != nil || werr != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s %+v: %x:\ndirect  %s %v\ngeneric %s %v", md.FullName(), opts, bin, got, gerr, want, werr)
				}
			}
			if direct < 500 {
				t.Errorf("%s %+v: only %d of 3000 payloads decoded directly", md.FullName(), opts, direct)
			}
		}
	}
}

// The direct decoder and the generic path agree on any bytes: the direct
// one gives up, or writes what the generic one writes.
func FuzzProtoDirect(f *testing.F) {
	c, err := Compile(wideProto, nil, Options{}, Limits{})
	if err != nil {
		f.Fatal(err)
	}
	md, _ := c.Message([]int{0})
	dm := c.direct[md.FullName()]
	g := &pgen{r: rand.New(rand.NewPCG(11, 12))}
	for range 8 {
		f.Add(g.message(nil, md))
	}
	f.Fuzz(func(t *testing.T, bin []byte) {
		got, gerr := c.appendJSONDirect(nil, bin, dm)
		if gerr == errGeneric {
			return
		}
		want, werr := c.appendJSONGeneric(nil, bin, md, 1<<20)
		if gerr != nil || werr != nil || !bytes.Equal(got, want) {
			t.Fatalf("%x:\ndirect  %s %v\ngeneric %s %v", bin, got, gerr, want, werr)
		}
	})
}

func BenchmarkProtoOrderDecode(b *testing.B) {
	c := compile(b, Options{})
	bin, _ := c.AppendBinary(nil, []byte(orderJSON), nil)
	var js []byte
	b.ReportAllocs()
	for b.Loop() {
		js, _ = c.AppendJSON(js[:0], bin, []int{0}, 1<<20)
	}
}

func BenchmarkProtoOrderEncode(b *testing.B) {
	c := compile(b, Options{})
	in := []byte(orderJSON)
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		out, _ = c.AppendBinary(out[:0], in, nil)
	}
}
