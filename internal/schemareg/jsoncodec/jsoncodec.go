// Package jsoncodec checks JSON values against a JSON Schema from a
// registry (github.com/santhosh-tekuri/jsonschema/v6). The payload of a
// JSON Schema record is already JSON: decoding validates it and passes its
// bytes through unchanged, and so does encoding. References are resolved
// only from the texts the registry gave; the compiler loads nothing else
// (no file, no URL).
//
// A Codec is immutable once compiled and safe for concurrent use.
package jsoncodec

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wasmstream/wasmstream/internal/schemareg/jsonlimit"
)

// Limits bound what one schema and one value may cost.
type Limits struct {
	// MaxDepth bounds the nesting of a value and of the schema text.
	MaxDepth int
}

// DefaultLimits are the bounds used when a field of Limits is zero.
var DefaultLimits = Limits{MaxDepth: 64}

// schemaDepthFactor: a schema nests about two levels ("properties", the
// property's schema) per level of the values it describes.
const schemaDepthFactor = 4

// base is where the schema and its references live: a relative reference
// name ("address.json") resolves beside the main schema.
const base = "wasmstream-registry:///schemas/"

// Codec validates the values of one JSON Schema.
type Codec struct {
	schema *jsonschema.Schema
	limits Limits
}

// ErrTooLarge is a value larger than the size given.
var ErrTooLarge = errors.New("the JSON exceeds its size limit")

// Compile compiles text with refs, the texts of the schemas it references by
// name (a registry reference's name is the $ref it answers).
func Compile(text string, refs map[string]string, limits Limits) (*Codec, error) {
	if limits.MaxDepth <= 0 {
		limits.MaxDepth = DefaultLimits.MaxDepth
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuse{})
	add := func(name, text string) error {
		if err := jsonlimit.CheckDepth([]byte(text), limits.MaxDepth*schemaDepthFactor); err != nil {
			return err
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			return fmt.Errorf("not JSON: %v", err)
		}
		return c.AddResource(location(name), doc)
	}
	for name, r := range refs {
		if err := add(name, r); err != nil {
			return nil, fmt.Errorf("json schema: referenced schema %s: %w", name, err)
		}
	}
	if err := add("main.json", text); err != nil {
		return nil, fmt.Errorf("json schema: %w", err)
	}
	s, err := c.Compile(location("main.json"))
	if err != nil {
		return nil, fmt.Errorf("json schema does not compile: %s", strings.ReplaceAll(err.Error(), base, ""))
	}
	return &Codec{schema: s, limits: limits}, nil
}

// location is where a schema named name is added: an absolute URL as it is,
// a relative name beside the main schema.
func location(name string) string {
	if u, err := url.Parse(name); err == nil && u.IsAbs() {
		return name
	}
	return base + name
}

// RefName is the name, among the main schema's references, of the
// reference name made by the reference known as from ("" for the main
// schema): a relative name resolves against from's ("price.json" in
// "parts/item.json" is "parts/price.json"), as the compiler resolves a
// $ref against the schema that makes it; an absolute URL is itself.
func RefName(from, name string) string {
	if from == "" {
		return name
	}
	u, err := url.Parse(name)
	if err != nil || u.IsAbs() {
		return name
	}
	f, err := url.Parse(location(from))
	if err != nil {
		return name
	}
	r := f.ResolveReference(u)
	r.Fragment = ""
	if at, ok := strings.CutPrefix(r.String(), base); ok {
		return at
	}
	return r.String()
}

// refuse is the compiler's loader: every schema it may use was added.
type refuse struct{}

func (refuse) Load(u string) (any, error) {
	return nil, fmt.Errorf("%s is not a reference of the schema in the registry (only the schema's references are resolved; nothing is fetched)", strings.TrimPrefix(u, base))
}

// Validate checks js, one JSON value, against the schema: nested at most
// MaxDepth levels and at most maxBytes long (0: no limit). The error names
// where in the value it failed.
func (c *Codec) Validate(js []byte, maxBytes int) error {
	if maxBytes > 0 && len(js) > maxBytes {
		return fmt.Errorf("json schema: %w (%d bytes)", ErrTooLarge, maxBytes)
	}
	if err := jsonlimit.CheckDepth(js, c.limits.MaxDepth); err != nil {
		return fmt.Errorf("json schema: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(js))
	if err != nil {
		return fmt.Errorf("json schema: the value is not JSON: %v", err)
	}
	if err := c.schema.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return fmt.Errorf("json schema: the value does not fit the schema: %s", strings.ReplaceAll(flatten(ve), base, ""))
		}
		return fmt.Errorf("json schema: %v", err)
	}
	return nil
}

// flatten is the validation error on one line, at most 1,000 bytes: each
// cause says where in the value it is ("at '/items/1': got number, want
// string").
func flatten(ve *jsonschema.ValidationError) string {
	lines := strings.Split(ve.Error(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimLeft(strings.TrimSpace(l), "- ")
	}
	msg := strings.Join(lines, "; ")
	if len(msg) > 1000 {
		msg = msg[:1000] + "..."
	}
	return msg
}

// AppendJSON validates payload and appends it unchanged to dst.
func (c *Codec) AppendJSON(dst, payload []byte, maxJSON int) ([]byte, error) {
	if err := c.Validate(payload, maxJSON); err != nil {
		return dst, err
	}
	return append(dst, payload...), nil
}

// AppendBinary validates js and appends it unchanged to dst: a JSON Schema
// record's payload is its JSON.
func (c *Codec) AppendBinary(dst, js []byte) ([]byte, error) {
	if err := c.Validate(js, 0); err != nil {
		return dst, err
	}
	return append(dst, js...), nil
}
