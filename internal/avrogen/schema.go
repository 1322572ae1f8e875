// Package avrogen writes schema-specific Avro codecs: from a record
// schema (an .avsc), a Go or Rust type with an encoder and a decoder of
// its own that read and write the Avro binary encoding field by field,
// with no reflection and no intermediate values (`wasmstream gen avro`).
// The guest SDKs' typed serde (abi/guest/sr, wasmstream::sr) use such a
// codec when a record's writer schema is the one it was generated for
// (the same Parsing Canonical Form fingerprint) and their resolving path
// otherwise.
//
// What is generated: records (nested too), boolean, int, long, float,
// double, string (uuid included), bytes (Go only; a decimal on bytes
// too, as its unscaled integer's bytes), arrays, a union of null and one
// other type, and timestamp-millis / timestamp-micros. A schema with
// anything else (maps, enums, fixed, other unions, other logical types)
// is refused, naming the field: the resolving path reads and writes it.
package avrogen

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/twmb/avro"
)

// kind is a generated field type's shape.
type kind int

const (
	kBool kind = iota
	kInt
	kLong
	kFloat
	kDouble
	kString
	kBytes
	kMillis
	kMicros
	kArray    // elem
	kNullable // elem; nullFirst says which branch is null
	kRecord   // rec
)

type typ struct {
	kind      kind
	elem      *typ
	nullFirst bool
	rec       *record
	decimal   string // kBytes of a decimal: "decimal(P,S)"
}

type field struct {
	name string // the Avro name
	t    *typ
}

type record struct {
	name   string // the simple name: the generated type's
	full   string // with its namespace
	fields []field
}

// schema is a parsed top-level record and every record it holds, in
// the order they are defined.
type schema struct {
	root        *record
	records     []*record
	fingerprint uint64
}

// parser walks a schema's JSON.
type parser struct {
	named   map[string]*record
	records []*record
}

// Parse reads a record schema and computes its fingerprint: CRC-64-AVRO
// of its Parsing Canonical Form, as the SDKs compute the writer schema's.
func parse(text []byte) (*schema, error) {
	compiled, err := avro.Parse(string(text))
	if err != nil {
		return nil, fmt.Errorf("the schema does not parse: %w", err)
	}
	var v any
	if err := json.Unmarshal(text, &v); err != nil {
		return nil, fmt.Errorf("the schema is not JSON: %w", err)
	}
	p := &parser{named: map[string]*record{}}
	t, err := p.typ(v, "", "the schema")
	if err != nil {
		return nil, err
	}
	if t.kind != kRecord {
		return nil, fmt.Errorf("the schema is not a record: codecs are generated for records")
	}
	h := avro.NewRabin()
	h.Write(compiled.Canonical())
	return &schema{root: t.rec, records: p.records, fingerprint: h.Sum64()}, nil
}

var primitives = map[string]kind{
	"boolean": kBool, "int": kInt, "long": kLong, "float": kFloat,
	"double": kDouble, "string": kString, "bytes": kBytes,
}

// typ reads a type at where (a field's path, for errors) in namespace ns.
func (p *parser) typ(v any, ns, where string) (*typ, error) {
	switch v := v.(type) {
	case string:
		if k, ok := primitives[v]; ok {
			return &typ{kind: k}, nil
		}
		full := v
		if !strings.Contains(v, ".") && ns != "" {
			full = ns + "." + v
		}
		if r := p.named[full]; r != nil {
			return &typ{kind: kRecord, rec: r}, nil
		}
		if r := p.named[v]; r != nil {
			return &typ{kind: kRecord, rec: r}, nil
		}
		return nil, fmt.Errorf("%s: type %q is not generated (only records, boolean, int, long, float, double, string, bytes, arrays, [null, T] unions and timestamps are)", where, v)
	case []any:
		return p.union(v, ns, where)
	case map[string]any:
		return p.complex(v, ns, where)
	}
	return nil, fmt.Errorf("%s: a type must be a name, a union or an object", where)
}

func (p *parser) union(v []any, ns, where string) (*typ, error) {
	if len(v) != 2 || (v[0] != "null") == (v[1] != "null") {
		return nil, fmt.Errorf("%s: only a union of null and one other type is generated", where)
	}
	other := v[1]
	if v[1] == "null" {
		other = v[0]
	}
	t, err := p.typ(other, ns, where)
	if err != nil {
		return nil, err
	}
	return &typ{kind: kNullable, elem: t, nullFirst: v[0] == "null"}, nil
}

func (p *parser) complex(v map[string]any, ns, where string) (*typ, error) {
	typeName, _ := v["type"].(string)
	if lt, ok := v["logicalType"].(string); ok {
		switch {
		case lt == "timestamp-millis" && typeName == "long":
			return &typ{kind: kMillis}, nil
		case lt == "timestamp-micros" && typeName == "long":
			return &typ{kind: kMicros}, nil
		case lt == "uuid" && typeName == "string":
			return &typ{kind: kString}, nil
		case lt == "decimal" && typeName == "bytes":
			// The unscaled integer as the wire has it (big-endian two's
			// complement), which twmb/avro reads and writes in a []byte
			// too: no big.Rat a record.
			p, _ := v["precision"].(float64)
			sc, _ := v["scale"].(float64)
			return &typ{kind: kBytes, decimal: fmt.Sprintf("decimal(%d,%d)", int(p), int(sc))}, nil
		}
		return nil, fmt.Errorf("%s: logical type %q on %q is not generated", where, lt, typeName)
	}
	switch typeName {
	case "record":
		return p.record(v, ns, where)
	case "array":
		t, err := p.typ(v["items"], ns, where+"[]")
		if err != nil {
			return nil, err
		}
		return &typ{kind: kArray, elem: t}, nil
	}
	if k, ok := primitives[typeName]; ok {
		return &typ{kind: k}, nil
	}
	return nil, fmt.Errorf("%s: type %q is not generated (only records, boolean, int, long, float, double, string, bytes, arrays, [null, T] unions and timestamps are)", where, typeName)
}

func (p *parser) record(v map[string]any, ns, where string) (*typ, error) {
	name, _ := v["name"].(string)
	if n, ok := v["namespace"].(string); ok {
		ns = n
	}
	full := name
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		ns, name = name[:i], name[i+1:]
	} else if ns != "" {
		full = ns + "." + name
	}
	fields, _ := v["fields"].([]any)
	if len(fields) == 0 {
		return nil, fmt.Errorf("%s: record %s has no fields: not generated", where, full)
	}
	r := &record{name: name, full: full}
	p.named[full] = r // before the fields: a recursive record refers to itself
	for _, f := range fields {
		fm, _ := f.(map[string]any)
		fname, _ := fm["name"].(string)
		t, err := p.typ(fm["type"], ns, full+"."+fname)
		if err != nil {
			return nil, err
		}
		r.fields = append(r.fields, field{name: fname, t: t})
	}
	p.records = append(p.records, r)
	return &typ{kind: kRecord, rec: r}, nil
}
