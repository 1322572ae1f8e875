package schemareg

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/wasmstream/wasmstream/internal/schemareg/avrocodec"
	"github.com/wasmstream/wasmstream/internal/schemareg/jsoncodec"
	"github.com/wasmstream/wasmstream/internal/schemareg/protocodec"
)

// Schema is a registry schema, compiled. Immutable.
type Schema struct {
	ID   int
	Type sr.SchemaType
	Text string
	// References are the schemas it references, transitively, each
	// before those that reference it.
	References []Reference
	// Declared are the references the registry gives for it: the direct
	// ones, by name, subject and version.
	Declared []sr.SchemaReference
	size     int // text bytes, references included

	avro  *avrocodec.Codec
	proto *protocodec.Codec
	json  *jsoncodec.Codec
}

// Reference is a schema referenced by another.
type Reference struct {
	Name, Subject string
	// At is the name the main schema's codec knows it by: Name, or for a
	// JSON Schema's reference made by another reference, Name resolved
	// against that one's (jsoncodec.RefName).
	At      string
	Version int
	Text    string
}

// SchemaByID returns the schema of id, from the cache or from the registry.
func (c *Client) SchemaByID(ctx context.Context, id int) (*Schema, error) {
	s, err := c.cached(id, func() (*Schema, error) {
		ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
		raw, err := c.sr.SchemaByID(ctx, id)
		if err != nil {
			return nil, c.classify(err, id, "", 0, "schema id "+strconv.Itoa(id))
		}
		return c.compile(ctx, id, raw)
	})
	return s, err
}

// compile fetches raw's references and compiles it.
func (c *Client) compile(ctx context.Context, id int, raw sr.Schema) (*Schema, error) {
	s := &Schema{ID: id, Type: raw.Type, Text: raw.Schema, Declared: raw.References, size: len(raw.Schema)}
	bad := func(format string, args ...any) error {
		if id == 0 { // a schema given (a schema file), not yet registered
			return newErr(BadSchema, 0, nil, "the %s schema given: %s", raw.Type, fmt.Sprintf(format, args...))
		}
		return newErr(BadSchema, id, nil, "schema id %d (%s): %s", id, raw.Type, fmt.Sprintf(format, args...))
	}
	if len(raw.Schema) > c.cfg.MaxSchemaBytes {
		return nil, bad("its text is %d bytes, more than schema_registry.max_schema_bytes (%d)", len(raw.Schema), c.cfg.MaxSchemaBytes)
	}
	w := refWalk{c: c, id: id, json: raw.Type == sr.TypeJSON, seen: map[string]bool{}}
	if err := w.walk(ctx, raw.References, "", 1); err != nil {
		return nil, err
	}
	s.References = w.out
	for _, r := range s.References {
		s.size += len(r.Text)
	}
	var err error
	switch raw.Type {
	case sr.TypeAvro:
		texts := make([]string, len(s.References))
		for i, r := range s.References {
			texts[i] = r.Text
		}
		s.avro, err = avrocodec.Compile(raw.Schema, texts, c.cfg.Avro, avrocodec.Limits{MaxDepth: c.cfg.MaxDepth})
	case sr.TypeProtobuf:
		s.proto, err = protocodec.Compile(raw.Schema, refMap(s.References), c.cfg.Protobuf, protocodec.Limits{MaxDepth: c.cfg.MaxDepth})
	case sr.TypeJSON:
		s.json, err = jsoncodec.Compile(raw.Schema, refMap(s.References), jsoncodec.Limits{MaxDepth: c.cfg.MaxDepth})
	default:
		return nil, bad("a schema type wasmstream does not read (want AVRO, PROTOBUF or JSON)")
	}
	if err != nil {
		return nil, bad("%v", err)
	}
	return s, nil
}

func refMap(refs []Reference) map[string]string {
	m := make(map[string]string, len(refs))
	for _, r := range refs {
		m[r.At] = r.Text
	}
	return m
}

// refWalk fetches a schema's references and theirs, depth first,
// appending each to out after the ones it references; seen (subject,
// version and the name it is known by) fetches each once.
type refWalk struct {
	c  *Client
	id int // the schema's, for errors
	// json: the names are JSON Schema $refs, and a reference's own are
	// relative to it ("price.json" in parts/item.json is
	// parts/price.json), as the main schema's codec resolves them.
	json bool
	seen map[string]bool
	out  []Reference
}

// walk fetches refs, made by the reference known as from ("" for the
// schema itself).
func (w *refWalk) walk(ctx context.Context, refs []sr.SchemaReference, from string, depth int) error {
	c, id := w.c, w.id
	for _, ref := range refs {
		at := ref.Name
		if w.json {
			at = jsoncodec.RefName(from, ref.Name)
		}
		key := ref.Subject + "\x00" + strconv.Itoa(ref.Version) + "\x00" + at
		if w.seen[key] {
			continue
		}
		w.seen[key] = true
		if depth > c.cfg.MaxReferenceDepth {
			return newErr(BadSchema, id, nil, "schema id %d: references chain deeper than %d (schema_registry.max_reference_depth) at %s version %d", id, c.cfg.MaxReferenceDepth, ref.Subject, ref.Version)
		}
		if len(w.seen) > c.cfg.MaxReferences {
			return newErr(BadSchema, id, nil, "schema id %d: more than %d references (schema_registry.max_references)", id, c.cfg.MaxReferences)
		}
		ss, err := c.sr.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			e := c.classify(err, id, ref.Subject, ref.Version, fmt.Sprintf("reference %q of schema id %d (subject %s version %d)", ref.Name, id, ref.Subject, ref.Version))
			if e.Kind == NotFound {
				e.Kind = BadSchema // the schema exists; its reference does not
			}
			return e
		}
		if len(ss.Schema.Schema) > c.cfg.MaxSchemaBytes {
			return newErr(BadSchema, id, nil, "schema id %d: reference %s version %d is %d bytes, more than schema_registry.max_schema_bytes (%d)", id, ref.Subject, ref.Version, len(ss.Schema.Schema), c.cfg.MaxSchemaBytes)
		}
		if err := w.walk(ctx, ss.References, at, depth+1); err != nil {
			return err
		}
		w.out = append(w.out, Reference{Name: ref.Name, At: at, Subject: ref.Subject, Version: ref.Version, Text: ss.Schema.Schema})
	}
	return nil
}
