package protocodec

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
)

// descriptorText is the registry text of c's file as Confluent's
// serializers register a schema: its FileDescriptorProto in base64; strip
// leaves out the fields' JSON names.
func descriptorText(t *testing.T, c *Codec, name string, strip bool) string {
	t.Helper()
	fd := protodesc.ToFileDescriptorProto(c.file)
	fd.Name = proto.String(name)
	if strip {
		// As a descriptor built by hand has them: no json_name.
		var walk func([]*descriptorpb.DescriptorProto)
		walk = func(ms []*descriptorpb.DescriptorProto) {
			for _, m := range ms {
				for _, f := range m.Field {
					f.JsonName = nil
				}
				walk(m.NestedType)
			}
		}
		walk(fd.MessageType)
	}
	b, err := proto.Marshal(fd)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// TestDescriptorForm: a schema (and a reference) registered as a base64
// FileDescriptorProto, as Confluent's serializers register one and
// Apicurio serves it back, reads and writes the same bytes and JSON as its
// .proto text.
func TestDescriptorForm(t *testing.T) {
	text := compile(t, Options{})
	money, err := Compile(moneyProto, nil, Options{}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		main string
		refs map[string]string
	}{
		"reference as text":       {descriptorText(t, text, "shop/order.proto", false), map[string]string{"common/money.proto": moneyProto}},
		"reference as descriptor": {descriptorText(t, text, "shop/order.proto", false), map[string]string{"common/money.proto": descriptorText(t, money, "common/money.proto", false)}},
		"without json_name":       {descriptorText(t, text, "shop/order.proto", true), map[string]string{"common/money.proto": descriptorText(t, money, "common/money.proto", true)}},
	} {
		c, err := Compile(tc.main, tc.refs, Options{}, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, err := text.AppendBinary(nil, []byte(orderJSON), []int{0})
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.AppendBinary(nil, []byte(orderJSON), []int{0})
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: encoded %x (%v), want %x", name, got, err, want)
		}
		js, err := c.AppendJSON(nil, want, []int{0}, 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		same(t, js, orderJSON)
		// The JSON names are protoc's: placed_at is placedAt.
		if js, err := c.AppendJSON(nil, want, []int{0}, 1<<16); err != nil || !strings.Contains(string(js), `"placed_at"`) {
			t.Fatalf("%s: %s %v", name, js, err)
		}
		if named, err := Compile(tc.main, tc.refs, Options{JSONNames: true}, Limits{}); err != nil {
			t.Fatal(err)
		} else if js, err := named.AppendJSON(nil, want, []int{0}, 1<<16); err != nil || !strings.Contains(string(js), `"placedAt"`) {
			t.Fatalf("%s: with JSON names %s %v", name, js, err)
		}
		if idx, err := c.Index("Ping"); err != nil || len(idx) != 1 || idx[0] != 1 {
			t.Fatalf("%s: index of Ping %v %v", name, idx, err)
		}
	}
}

func TestDescriptorFormRefused(t *testing.T) {
	// Base64 that is no descriptor.
	if _, err := Compile(base64.StdEncoding.EncodeToString([]byte{0xff, 0xff, 0xff}), nil, Options{}, Limits{}); err == nil || !strings.Contains(err.Error(), "FileDescriptorProto") {
		t.Fatalf("garbage: %v", err)
	}
	// Messages nested past the depth limit are refused before linking.
	fd := &descriptorpb.FileDescriptorProto{Name: proto.String("deep.proto"), Syntax: proto.String("proto3")}
	m := &descriptorpb.DescriptorProto{Name: proto.String("M")}
	fd.MessageType = []*descriptorpb.DescriptorProto{m}
	for range 20 {
		n := &descriptorpb.DescriptorProto{Name: proto.String("M")}
		m.NestedType = []*descriptorpb.DescriptorProto{n}
		m = n
	}
	b, err := proto.Marshal(fd)
	if err != nil {
		t.Fatal(err)
	}
	deep := base64.StdEncoding.EncodeToString(b)
	if _, err := Compile(deep, nil, Options{}, Limits{MaxDepth: 8}); err == nil || !strings.Contains(err.Error(), "deeper") && !strings.Contains(err.Error(), "recursion") {
		t.Fatalf("20 nested messages with max depth 8: %v", err)
	}
	if _, err := Compile(deep, nil, Options{}, Limits{MaxDepth: 64}); err != nil {
		t.Fatalf("20 nested messages with max depth 64: %v", err)
	}
}

// FuzzDescriptorCompile: a registry (or whoever registered the schema)
// controls a descriptor's bytes; whatever they are, Compile returns a codec
// or an error, and a codec decodes the empty message it encodes.
func FuzzDescriptorCompile(f *testing.F) {
	text := compile(f, Options{})
	fd := protodesc.ToFileDescriptorProto(text.file)
	fd.Dependency = nil // no references: the fuzzer changes one file
	fd.MessageType = fd.MessageType[len(fd.MessageType)-1:]
	fd.EnumType = nil
	seed, err := proto.Marshal(fd)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte{0x0a, 0x01, 'x', 0x22, 0x03, 0x0a, 0x01, 'M'})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Compile(base64.StdEncoding.EncodeToString(b), nil, Options{}, Limits{})
		if err != nil {
			return
		}
		bin, err := c.AppendBinary(nil, []byte(`{}`), []int{0})
		if err != nil {
			return // a proto2 message with required fields, say
		}
		if _, err := c.AppendJSON(nil, bin, []int{0}, 1<<16); err != nil {
			t.Fatalf("an empty message encoded (%x) does not decode: %v", bin, err)
		}
	})
}
