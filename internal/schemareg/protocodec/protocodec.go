// Package protocodec turns Protobuf binary data into JSON and JSON into
// Protobuf binary data, with one .proto schema text from a registry and the
// texts it imports (its references), each the .proto source or, as
// Confluent's serializers register a schema, its FileDescriptorProto in
// base64, under the JSON contract of
// docs/SCHEMA-REGISTRY.md: the proto3 JSON mapping (protojson), field names
// as written in the .proto by default, 64-bit integers as strings, default
// values left out. github.com/bufbuild/protocompile compiles the text;
// dynamicpb and protojson do the rest, except decoding and encoding the
// common proto3 messages, which tojson.go does directly from the bytes and
// fromjson.go directly from the JSON (writing what protojson and
// proto.Marshal write; anything either is unsure of goes to the library).
//
// A schema file may hold several messages: the Confluent frame's
// message-index array (package wire) picks one, and an encoder names the
// one it writes. A Codec is immutable once compiled and safe for concurrent
// use.
package protocodec

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	"github.com/bufbuild/protocompile/reporter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// Options choose the JSON contract. The zero value is the default contract.
type Options struct {
	// JSONNames writes fields by their JSON names (lowerCamelCase, or the
	// json_name option) instead of their names as written in the .proto.
	// Decoding JSON takes both either way.
	JSONNames bool
}

// Limits bound what one schema and one value may cost.
type Limits struct {
	// MaxDepth bounds the nesting of messages in a value and of braces in
	// the schema text.
	MaxDepth int
}

// DefaultLimits are the bounds used when a field of Limits is zero.
var DefaultLimits = Limits{MaxDepth: 64}

// mainFile is the path the schema text is compiled under; references are
// compiled under their names (their import paths).
const mainFile = "wasmstream-schema-registry-main.proto"

// Codec reads and writes the messages of one .proto schema.
type Codec struct {
	file     linker.File
	resolver linker.Resolver
	opts     Options
	limits   Limits
	// partial: the messages whose values can never lack a required field
	// (none is reachable from them, nor an Any, which may hold one). Their
	// encodes and decodes skip the library's check for missing required
	// fields, a walk of the whole message that finds nothing for them
	// (about a sixth of the time of a proto3 round trip).
	partial map[protoreflect.FullName]bool
	// direct: the messages the direct decoder (tojson.go) takes.
	direct map[protoreflect.FullName]*pmsg
}

// ErrTooLarge is a decoded value whose JSON exceeds the size given.
var ErrTooLarge = errors.New("the decoded JSON exceeds its size limit")

// Compile compiles text, the schema, with refs, the texts of the files it
// imports by import path (a registry reference's name is its import path).
// The well-known types (google/protobuf/*.proto) need no reference.
func Compile(text string, refs map[string]string, opts Options, limits Limits) (*Codec, error) {
	if limits.MaxDepth <= 0 {
		limits.MaxDepth = DefaultLimits.MaxDepth
	}
	files := make(map[string]protocompile.SearchResult, len(refs)+1)
	for name, r := range refs {
		res, err := searchResult(name, r, limits.MaxDepth)
		if err != nil {
			return nil, fmt.Errorf("protobuf schema: referenced file %s: %w", name, err)
		}
		files[name] = res
	}
	res, err := searchResult(mainFile, text, limits.MaxDepth)
	if err != nil {
		return nil, fmt.Errorf("protobuf schema: %w", err)
	}
	files[mainFile] = res
	var errs []string
	comp := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
			if res, ok := files[path]; ok {
				return res, nil
			}
			return protocompile.SearchResult{}, fmt.Errorf("%s: %w (no registry reference of that name)", path, fs.ErrNotExist)
		})),
		MaxParallelism: 1,
		Reporter: reporter.NewReporter(func(err reporter.ErrorWithPos) error {
			if len(errs) < 5 {
				errs = append(errs, strings.ReplaceAll(err.Error(), mainFile+":", ""))
			}
			return nil // go on: report up to five
		}, nil),
	}
	compiled, err := comp.Compile(context.Background(), mainFile)
	if err != nil {
		if len(errs) > 0 {
			return nil, fmt.Errorf("protobuf schema does not compile: %s", strings.Join(errs, "; "))
		}
		return nil, fmt.Errorf("protobuf schema does not compile: %v", err)
	}
	f := compiled[0]
	if f.Messages().Len() == 0 {
		return nil, errors.New("protobuf schema declares no message")
	}
	c := &Codec{file: f, resolver: linker.ResolverFromFile(f), opts: opts, limits: limits, partial: map[protoreflect.FullName]bool{}}
	var each func(msgs protoreflect.MessageDescriptors)
	each = func(msgs protoreflect.MessageDescriptors) {
		for i := 0; i < msgs.Len(); i++ {
			md := msgs.Get(i)
			c.partial[md.FullName()] = !mayLackRequired(md, map[protoreflect.FullName]bool{})
			each(md.Messages())
		}
	}
	each(f.Messages())
	c.prepareDirect()
	return c, nil
}

// mayLackRequired says whether a value of md can lack a required field: md
// or a message reachable from it has one, or is an Any (whose content the
// schema does not say).
func mayLackRequired(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return false
	}
	seen[md.FullName()] = true
	if md.FullName() == "google.protobuf.Any" || md.RequiredNumbers().Len() > 0 || md.ExtensionRanges().Len() > 0 {
		return true
	}
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		if fd.IsMap() {
			fd = fd.MapValue()
		}
		if m := fd.Message(); m != nil && mayLackRequired(m, seen) {
			return true
		}
	}
	return false
}

// searchResult is how the compiler finds the file at path whose registry
// text is text: the .proto source, or the FileDescriptorProto when text is
// one in base64 (Confluent's serializers register a schema so, and a
// registry that does not convert it, Apicurio's, serves it back so). Either
// is refused before the compiler recurses into it when it nests deeper
// than maxDepth.
func searchResult(path, text string, maxDepth int) (protocompile.SearchResult, error) {
	fd, ok, err := descriptorForm(text, maxDepth)
	switch {
	case err != nil:
		return protocompile.SearchResult{}, err
	case ok:
		fd.Name = proto.String(path) // imports name the file by its reference name
		return protocompile.SearchResult{Proto: fd}, nil
	}
	if err := checkBraces(text, maxDepth); err != nil {
		return protocompile.SearchResult{}, err
	}
	return protocompile.SearchResult{Source: strings.NewReader(text)}, nil
}

// descriptorForm reads text as a base64 FileDescriptorProto. ok is false
// when text is not base64 (a .proto source never is: it has spaces or
// braces); err is set when it is base64 but not a descriptor, or its
// messages nest deeper than maxDepth.
func descriptorForm(text string, maxDepth int) (fd *descriptorpb.FileDescriptorProto, ok bool, err error) {
	text = strings.TrimSpace(text)
	if text == "" || strings.ContainsAny(text, " \t\r\n{;") {
		return nil, false, nil
	}
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, false, nil
	}
	fd = &descriptorpb.FileDescriptorProto{}
	if err := (proto.UnmarshalOptions{RecursionLimit: maxDepth * 4}).Unmarshal(b, fd); err != nil {
		return nil, true, fmt.Errorf("base64 text that is not a FileDescriptorProto: %v", err)
	}
	// Messages nest in messages; every other part of a descriptor is
	// flat or bounded by the recursion limit above.
	var walk func(ms []*descriptorpb.DescriptorProto, d int) error
	walk = func(ms []*descriptorpb.DescriptorProto, d int) error {
		if len(ms) > 0 && d > maxDepth {
			return fmt.Errorf("messages nested deeper than %d levels", maxDepth)
		}
		for _, m := range ms {
			setJSONNames(m.GetField())
			setJSONNames(m.GetExtension())
			if err := walk(m.GetNestedType(), d+1); err != nil {
				return err
			}
		}
		return nil
	}
	setJSONNames(fd.GetExtension())
	if err := walk(fd.GetMessageType(), 1); err != nil {
		return nil, true, err
	}
	return fd, true, nil
}

// setJSONNames gives each of fields without a json_name the one protoc
// would: a descriptor from protoc carries them, one built by hand (or by
// a serializer from a hand-built class) may not, and the linker reads an
// absent one as the custom name "", which every field then shares.
func setJSONNames(fields []*descriptorpb.FieldDescriptorProto) {
	for _, f := range fields {
		if f.JsonName == nil {
			f.JsonName = proto.String(jsonCamelCase(f.GetName()))
		}
	}
}

// jsonCamelCase is the default JSON name of a field: underscores out, the
// lower-case letter after one in upper case (placed_at: placedAt).
func jsonCamelCase(name string) string {
	b := make([]byte, 0, len(name))
	under := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '_' {
			if under && 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			b = append(b, c)
		}
		under = c == '_'
	}
	return string(b)
}

// checkBraces refuses a schema text whose braces nest deeper than max
// (outside comments and strings), before the compiler recurses into it.
func checkBraces(s string, max int) error {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '/':
			if i+1 < len(s) && s[i+1] == '/' {
				for i < len(s) && s[i] != '\n' {
					i++
				}
			} else if i+1 < len(s) && s[i+1] == '*' {
				end := strings.Index(s[i+2:], "*/")
				if end < 0 {
					return nil // unterminated: the compiler says so
				}
				i += end + 3
			}
		case '"', '\'':
			for i++; i < len(s) && s[i] != c && s[i] != '\n'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
		case '{':
			if depth++; depth > max {
				return fmt.Errorf("braces nested deeper than %d levels (at byte %d)", max, i)
			}
		case '}':
			depth--
		}
	}
	return nil
}

// firstMessage is the index of the first message (read only): an index
// made for each call would be allocated, as an error may keep it.
var firstMessage = []int{0}

// Message is the descriptor of the message at index, a path through the
// schema's messages (index [1, 0]: the first message nested in the second
// top-level one), as a Confluent frame carries it.
func (c *Codec) Message(index []int) (protoreflect.MessageDescriptor, error) {
	if len(index) == 0 {
		index = firstMessage
	}
	msgs := c.file.Messages()
	var md protoreflect.MessageDescriptor
	for depth, i := range index {
		if i < 0 || i >= msgs.Len() {
			where := "the schema's top level"
			if md != nil {
				where = "message " + string(md.FullName())
			}
			return nil, fmt.Errorf("message index %v: %s has %d messages, no message %d (at depth %d)", index, where, msgs.Len(), i, depth)
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	return md, nil
}

// Index is the message-index path of the message named name (its full name,
// package included, or its name relative to the package); "" is the first
// message of the file.
func (c *Codec) Index(name string) ([]int, error) {
	if name == "" {
		return []int{0}, nil
	}
	full := protoreflect.FullName(name)
	if pkg := c.file.Package(); pkg != "" && !strings.HasPrefix(name, string(pkg)+".") {
		full = protoreflect.FullName(string(pkg) + "." + name)
	}
	var find func(msgs protoreflect.MessageDescriptors, path []int) []int
	find = func(msgs protoreflect.MessageDescriptors, path []int) []int {
		for i := 0; i < msgs.Len(); i++ {
			m := msgs.Get(i)
			p := append(path[:len(path):len(path)], i)
			if m.FullName() == full {
				return p
			}
			if r := find(m.Messages(), p); r != nil {
				return r
			}
		}
		return nil
	}
	if p := find(c.file.Messages(), nil); p != nil {
		return p, nil
	}
	var names []string
	for i := 0; i < c.file.Messages().Len() && i < 10; i++ {
		names = append(names, string(c.file.Messages().Get(i).FullName()))
	}
	return nil, fmt.Errorf("protobuf schema has no message %s (its top-level messages: %s)", full, strings.Join(names, ", "))
}

// AppendJSON decodes payload, the Protobuf encoding of the message at
// index, and appends it as JSON to dst; the JSON appended is at most
// maxJSON bytes.
func (c *Codec) AppendJSON(dst, payload []byte, index []int, maxJSON int) ([]byte, error) {
	md, err := c.Message(index)
	if err != nil {
		return dst, fmt.Errorf("protobuf: %w", err)
	}
	if dm := c.direct[md.FullName()]; dm != nil {
		out, err := c.appendJSONDirect(dst, payload, dm)
		switch {
		case err == nil && len(out)-len(dst) > maxJSON:
			return dst, fmt.Errorf("protobuf: %w (%d bytes)", ErrTooLarge, maxJSON)
		case err == nil:
			return out, nil
		}
		// errGeneric: the generic path decodes it, errors included.
	}
	return c.appendJSONGeneric(dst, payload, md, maxJSON)
}

// appendJSONGeneric is AppendJSON through a dynamicpb message and protojson.
func (c *Codec) appendJSONGeneric(dst, payload []byte, md protoreflect.MessageDescriptor, maxJSON int) ([]byte, error) {
	partial := c.partial[md.FullName()]
	m := dynamicpb.NewMessage(md)
	if err := (proto.UnmarshalOptions{RecursionLimit: c.limits.MaxDepth, Resolver: c.resolver, AllowPartial: partial}).Unmarshal(payload, m); err != nil {
		return dst, fmt.Errorf("protobuf: %s does not decode: %v", md.FullName(), err)
	}
	// The JSON of a decoded message is bounded by the payload's size
	// times the longest field name (a field is at least two bytes on the
	// wire), so it is checked once written.
	out, err := protojson.MarshalOptions{UseProtoNames: !c.opts.JSONNames, Resolver: c.resolver, AllowPartial: partial}.MarshalAppend(dst, m)
	if err != nil {
		return dst, fmt.Errorf("protobuf: %s: %v", md.FullName(), err)
	}
	out = compactJSON(out, len(dst))
	if len(out)-len(dst) > maxJSON {
		return dst, fmt.Errorf("protobuf: %w (%d bytes)", ErrTooLarge, maxJSON)
	}
	return out, nil
}

// compactJSON removes the whitespace outside strings from b[from:], in
// place. protojson's output is deliberately unstable: it adds a space after
// some ':' and ',' chosen per build of the binary, so that nobody compares
// its bytes; a processor should see the same JSON for the same record from
// any build of the host (replays byte-identical), so it is compacted.
func compactJSON(b []byte, from int) []byte {
	w, inStr, esc := from, false, false
	for _, c := range b[from:] {
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			continue
		}
		b[w] = c
		w++
	}
	return b[:w]
}

// AppendBinary encodes js, the JSON of the message at index, and appends
// its Protobuf encoding (deterministic: map entries sorted) to dst. A field
// the message does not have, or a value of the wrong type, is an error
// naming the field.
func (c *Codec) AppendBinary(dst, js []byte, index []int) ([]byte, error) {
	md, err := c.Message(index)
	if err != nil {
		return dst, fmt.Errorf("protobuf: %w", err)
	}
	if dm := c.direct[md.FullName()]; dm != nil {
		if out, err := c.appendBinaryDirect(dst, js, dm); err == nil {
			return out, nil
		}
		// errGeneric: the generic path encodes it, errors included.
	}
	return c.appendBinaryGeneric(dst, js, md)
}

// appendBinaryGeneric is AppendBinary through protojson and a dynamicpb
// message.
func (c *Codec) appendBinaryGeneric(dst, js []byte, md protoreflect.MessageDescriptor) ([]byte, error) {
	partial := c.partial[md.FullName()]
	m := dynamicpb.NewMessage(md)
	if err := (protojson.UnmarshalOptions{RecursionLimit: c.limits.MaxDepth, Resolver: c.resolver, AllowPartial: partial}).Unmarshal(js, m); err != nil {
		return dst, fmt.Errorf("protobuf: the JSON does not fit message %s: %v", md.FullName(), err)
	}
	out, err := proto.MarshalOptions{Deterministic: true, AllowPartial: partial}.MarshalAppend(dst, m)
	if err != nil {
		return dst, fmt.Errorf("protobuf: %s: %v", md.FullName(), err)
	}
	return out, nil
}
