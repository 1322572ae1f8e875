// Package avrocodec turns Avro binary data into JSON and JSON into Avro
// binary data, with one schema from a registry, under the JSON contract of
// docs/SCHEMA-REGISTRY.md (bare or tagged unions, logical types rendered or
// raw, bytes as base64). github.com/twmb/avro parses the schema; this
// package owns the JSON side, so the contract is the one written down, each
// cost is bounded (schema text and nesting depth at compile, nesting depth
// and output size per value), and an error names the field it is about.
//
// Two paths do the work. The direct one (tojson.go, fromjson.go) reads
// the payload's bytes or the JSON's and writes the other form as it goes,
// with no Go values in between; the generic one (decode.go, encode.go)
// decodes into Go values with the library, or with encoding/json, and
// writes from those. A schema takes the direct path when it reads every
// node of it (directOK); both write the same bytes, which the tests compare.
//
// A Codec is immutable once compiled and safe for concurrent use.
package avrocodec

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/twmb/avro"

	"github.com/wasmstream/wasmstream/internal/schemareg/jsonlimit"
)

// Options choose the JSON contract. The zero value is the default contract.
type Options struct {
	// TaggedUnions renders a non-null union value as {"<branch>": value},
	// the Avro JSON encoding; by default a union value is written bare.
	// Encoding takes both forms either way.
	TaggedUnions bool
	// RawLogicalTypes renders logical types as their underlying type (a
	// timestamp as its integer, a decimal as its two's-complement bytes);
	// by default they are rendered (RFC 3339 text, a decimal string).
	RawLogicalTypes bool
}

// Limits bound what one schema and one value may cost.
type Limits struct {
	// MaxDepth bounds the nesting of a value (records, arrays, maps,
	// unions) on both paths, and of the schema text's JSON.
	MaxDepth int
}

// DefaultLimits are the bounds used when a field of Limits is zero.
var DefaultLimits = Limits{MaxDepth: 64}

// schemaDepthFactor: a schema's JSON nests about three levels (object,
// fields array, field object) per level of the values it describes.
const schemaDepthFactor = 4

type kind uint8

const (
	kNull kind = iota
	kBool
	kInt
	kLong
	kFloat
	kDouble
	kString
	kBytes
	kFixed
	kEnum
	kArray
	kMap
	kRecord
	kUnion
)

var primitives = map[string]kind{
	"null": kNull, "boolean": kBool, "int": kInt, "long": kLong, "float": kFloat,
	"double": kDouble, "string": kString, "bytes": kBytes,
}

// node is a schema node prepared for the JSON walks.
type node struct {
	kind    kind
	logical string
	name    string // full name of a record, enum or fixed
	size    int    // fixed
	scale   int    // decimal
	prec    int    // decimal: at most this many digits (0: unbounded)
	// decimal: 10^scale and 10^prec, computed once per schema rather than
	// per value (the library caps both at parse).
	pow10Scale, pow10Prec *big.Int

	fields   []field
	fieldIdx map[string]int

	items, values *node

	branches  []*node
	branchIdx map[string]int // branch name (as tagged JSON names it) -> index
	nullable  bool           // a union with a null branch

	symbols []string
	symIdx  map[string]int // symbol -> index

	// leaf encodes a value of a leaf node whose JSON forms the library
	// reads (logical types, integers given as text) for the direct
	// encoder (fromjson.go): a schema of the node alone.
	leaf *avro.Schema
	// zero: a value of the node takes no bytes (null, fixed(0), a record
	// of such), for the direct decoder's bound on arrays of them.
	zero bool
}

type field struct {
	name       string
	key        []byte // "name": pre-escaped
	typ        *node
	hasDefault bool
	// defaultNull: the default is null (the direct encoder writes it
	// itself; any other default takes the generic path).
	defaultNull bool
}

// Codec reads and writes the values of one Avro schema.
type Codec struct {
	schema *avro.Schema
	root   *node
	opts   Options
	limits Limits
	// direct: every node of the schema is one the direct transcoder
	// (tojson.go) reads.
	direct bool
}

// Compile parses text, the schema, after refs, the texts of the schemas it
// references (each before the schemas that reference it, as the registry's
// reference resolution orders them).
func Compile(text string, refs []string, opts Options, limits Limits) (*Codec, error) {
	if limits.MaxDepth <= 0 {
		limits.MaxDepth = DefaultLimits.MaxDepth
	}
	var cache avro.SchemaCache
	for i, r := range append(refs[:len(refs):len(refs)], text) {
		if err := jsonlimit.CheckDepth([]byte(r), limits.MaxDepth*schemaDepthFactor); err != nil {
			return nil, fmt.Errorf("avro schema: %w", err)
		}
		s, err := cache.Parse(r)
		if err != nil {
			if i < len(refs) {
				return nil, fmt.Errorf("avro schema: referenced schema %d: %w", i+1, err)
			}
			return nil, fmt.Errorf("avro schema: %w", err)
		}
		if i == len(refs) {
			b := &builder{names: map[string]*node{}}
			root := s.Root()
			n, err := b.build(root, "", 0)
			if err != nil {
				return nil, fmt.Errorf("avro schema: %w", err)
			}
			return &Codec{schema: s, root: n, opts: opts, limits: limits, direct: directOK(n, map[*node]bool{})}, nil
		}
	}
	panic("unreachable")
}

type builder struct {
	names map[string]*node
}

func fullName(name, ns string) string {
	if strings.Contains(name, ".") || ns == "" {
		return name
	}
	return ns + "." + name
}

func (b *builder) build(sn *avro.SchemaNode, ns string, depth int) (*node, error) {
	if depth > 4*DefaultLimits.MaxDepth*schemaDepthFactor {
		return nil, fmt.Errorf("nested too deep")
	}
	if k, ok := primitives[sn.Type]; ok {
		return decimalPowers(&node{kind: k, logical: sn.LogicalType, scale: sn.Scale, prec: sn.Precision}), nil
	}
	switch sn.Type {
	case "record", "error", "enum", "fixed":
		return b.buildNamed(sn, ns, depth)
	case "array", "map":
		return b.buildContainer(sn, ns, depth)
	case "union":
		return b.buildUnion(sn, ns, depth)
	}
	// A reference to a named type defined earlier (or in a referenced
	// schema), by full name or by name in the enclosing namespace.
	if n, ok := b.names[sn.Type]; ok {
		return n, nil
	}
	if n, ok := b.names[fullName(sn.Type, ns)]; ok {
		return n, nil
	}
	return nil, fmt.Errorf("unknown type %q", sn.Type)
}

// decimalPowers fills a decimal node's powers of ten.
func decimalPowers(n *node) *node {
	if n.logical == "decimal" {
		n.pow10Scale = new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.scale)), nil)
		if n.prec > 0 {
			n.pow10Prec = new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n.prec)), nil)
		}
	}
	return n
}

// buildNamed builds a record (or error), an enum or a fixed, registering
// its full name before its fields: a record may refer to itself.
func (b *builder) buildNamed(sn *avro.SchemaNode, ns string, depth int) (*node, error) {
	full := fullName(sn.Name, sn.Namespace)
	if sn.Namespace == "" && strings.Contains(sn.Name, ".") {
		ns = sn.Name[:strings.LastIndexByte(sn.Name, '.')]
	} else {
		ns = sn.Namespace
	}
	n := decimalPowers(&node{name: full, logical: sn.LogicalType, scale: sn.Scale, prec: sn.Precision, size: sn.Size})
	b.names[full] = n
	switch sn.Type {
	case "enum":
		n.kind = kEnum
		n.symbols = sn.Symbols
		n.symIdx = make(map[string]int, len(sn.Symbols))
		for i, s := range sn.Symbols {
			n.symIdx[s] = i
		}
	case "fixed":
		n.kind = kFixed
	default:
		n.kind = kRecord
		n.fieldIdx = make(map[string]int, len(sn.Fields))
		for i := range sn.Fields {
			f := &sn.Fields[i]
			t, err := b.build(&f.Type, ns, depth+1)
			if err != nil {
				return nil, err
			}
			key := append(appendString(nil, f.Name), ':')
			n.fields = append(n.fields, field{name: f.Name, key: key, typ: t, hasDefault: f.HasDefault, defaultNull: f.HasDefault && f.Default == nil})
			n.fieldIdx[f.Name] = i
		}
	}
	return n, nil
}

// buildContainer builds an array or a map and its element type.
func (b *builder) buildContainer(sn *avro.SchemaNode, ns string, depth int) (*node, error) {
	var child *avro.SchemaNode
	n := &node{kind: kArray}
	if sn.Type == "map" {
		n.kind, child = kMap, sn.Values
	} else {
		child = sn.Items
	}
	if child == nil {
		return nil, fmt.Errorf("%s without its element type", sn.Type)
	}
	c, err := b.build(child, ns, depth+1)
	if err != nil {
		return nil, err
	}
	n.items, n.values = c, c
	return n, nil
}

// buildUnion builds a union and its branches.
func (b *builder) buildUnion(sn *avro.SchemaNode, ns string, depth int) (*node, error) {
	n := &node{kind: kUnion, branchIdx: map[string]int{}}
	for i := range sn.Branches {
		c, err := b.build(&sn.Branches[i], ns, depth+1)
		if err != nil {
			return nil, err
		}
		n.branches = append(n.branches, c)
		n.branchIdx[c.branchName()] = i
		if c.kind == kNull {
			n.nullable = true
		}
	}
	return n, nil
}

// branchName is the name a tagged union value carries: the full name of a
// named type, the type's name otherwise (a logical type's underlying one).
func (n *node) branchName() string {
	switch n.kind {
	case kRecord, kEnum, kFixed:
		return n.name
	case kArray:
		return "array"
	case kMap:
		return "map"
	case kUnion:
		return "union"
	}
	for name, k := range primitives {
		if k == n.kind {
			return name
		}
	}
	return ""
}
