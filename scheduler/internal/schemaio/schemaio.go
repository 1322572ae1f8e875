// Package schemaio is a pipeline's side of schema-registry data
// (RATIONALE.md, "Schema-registry data"): it decodes the framed keys and
// values of its input records into the JSON the guest sees, and encodes
// the JSON of the guest's outputs to its output topic into framed bytes,
// with the process's one registry client (internal/schemareg). A pipeline
// whose formats are all raw has none (its Deps.Schema is nil), and its
// record path does not change.
package schemaio

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/internal/schemareg/avrocodec"
	"github.com/wasmstream/wasmstream/internal/schemareg/protocodec"
	"github.com/wasmstream/wasmstream/internal/schemareg/wire"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// KindPrefix starts the failure kind of every schema failure: "schema."
// and the library's kind (schema.decode, schema.bad_frame,
// schema.schema_not_found, schema.registry_unavailable, schema.encode, ...).
const KindPrefix = "schema."

// ClientConfig is the library's config of the schema_registry block.
func ClientConfig(c *config.SchemaRegistry) schemareg.Config {
	return schemareg.Config{
		URL:            c.URL,
		Username:       c.BasicAuth.Username,
		Password:       c.BasicAuth.Password,
		PasswordFile:   c.BasicAuth.PasswordFile,
		TokenFile:      c.TokenFile,
		TLS:            schemareg.TLS{CAFile: c.TLS.CAFile, CertFile: c.TLS.CertFile, KeyFile: c.TLS.KeyFile, ServerName: c.TLS.ServerName, InsecureSkipVerify: c.TLS.InsecureSkipVerify},
		RequestTimeout: c.RequestTimeout,
		CacheEntries:   c.Cache.MaxSchemas,
		CacheBytes:     c.Cache.MaxBytes,
		MaxSchemaBytes: c.MaxSchemaBytes,
		RefreshPeriod:  c.RefreshPeriod,
		Avro:           avrocodec.Options{TaggedUnions: c.Avro.TaggedUnions, RawLogicalTypes: c.Avro.RawLogicalTypes},
		Protobuf:       protocodec.Options{JSONNames: c.Protobuf.JSONNames},
	}
}

// Pipeline decodes and encodes one pipeline's records. Safe for concurrent
// use by its workers.
type Pipeline struct {
	c                *schemareg.Client
	inKey, inValue   bool
	maxJSON          int
	output           string
	outKey, outValue *schemareg.Encoder
	bufs             sync.Pool // of *Buffer
}

// Buffer is where a call's records are decoded to: the JSON the guest
// reads during the call, and where each record's lies. A worker takes one
// for a call (GetBuffer) and gives it back once the call returned
// (PutBuffer): a worker keeps nothing between calls.
type Buffer struct {
	B     []byte
	Spans [][2]Span // per record of a run: key, value
}

// keepBuffer is the largest buffer given back for reuse: a run of large
// records is not held on to while the pipeline idles.
const keepBuffer = 256 << 10

// GetBuffer is an empty buffer.
func (p *Pipeline) GetBuffer() *Buffer {
	if b, ok := p.bufs.Get().(*Buffer); ok {
		return b
	}
	return &Buffer{}
}

// PutBuffer gives b back once nothing reads what it holds.
func (p *Pipeline) PutBuffer(b *Buffer) {
	if cap(b.B) > keepBuffer {
		return
	}
	clear(b.Spans)
	b.B, b.Spans = b.B[:0], b.Spans[:0]
	p.bufs.Put(b)
}

// New makes pc's decoder and encoders with c, or returns nil when pc's
// formats are all raw. The encoders resolve their subjects now: a
// registry that is down or a subject that does not exist fails here,
// naming the pipeline and key. An output part with a schema_file (read
// from cfg's directory) writes with the id its subject holds that schema
// under, registered first only with auto_register: without it nothing is
// ever registered.
func New(ctx context.Context, c *schemareg.Client, cfg *config.Config, pc *config.Pipeline) (*Pipeline, error) {
	if !pc.UsesSchemaRegistry() {
		return nil, nil
	}
	if c == nil {
		return nil, fmt.Errorf("pipeline %s: a confluent format needs schema_registry.url", pc.Name)
	}
	p := &Pipeline{c: c, inKey: pc.InputFormat.Key.Confluent(), inValue: pc.InputFormat.Value.Confluent(),
		maxJSON: pc.InputFormat.MaxJSONBytes, output: pc.Output}
	for _, o := range []struct {
		part string
		cfg  config.OutputPart
		enc  **schemareg.Encoder
	}{{"value", pc.OutputFormat.Value, &p.outValue}, {"key", pc.OutputFormat.Key, &p.outKey}} {
		if !o.cfg.Confluent() {
			continue
		}
		ec := schemareg.EncoderConfig{Subject: o.cfg.SubjectFor(pc.Output, o.part), Version: o.cfg.VersionNumber(), Message: o.cfg.Message}
		key := "output_format." + o.part
		if o.cfg.SchemaFile != "" {
			key += ".schema_file"
			s, err := readSchemaFile(cfg.SchemaFilePath(o.cfg), o.cfg.SchemaFileType(), c.MaxSchemaBytes())
			if err != nil {
				p.Close()
				return nil, fmt.Errorf("pipeline %s: %s: %w", pc.Name, key, err)
			}
			ec.Schema, ec.Register = s, o.cfg.AutoRegister
		}
		e, err := c.NewEncoder(ctx, ec)
		if err != nil {
			p.Close()
			if se := (*schemareg.Error)(nil); errors.As(err, &se) && se.Kind == schemareg.NotFound && ec.Schema.Schema != "" {
				return nil, fmt.Errorf("pipeline %s: %s: %w (register it, or set output_format.%s.auto_register: true to let the host register it at start)", pc.Name, key, err, o.part)
			}
			return nil, fmt.Errorf("pipeline %s: %s: %w", pc.Name, key, err)
		}
		*o.enc = e
	}
	return p, nil
}

// readSchemaFile reads the schema file at path, of type typ (AVRO,
// PROTOBUF or JSON), refusing one larger than max bytes.
func readSchemaFile(path, typ string, max int) (sr.Schema, error) {
	var t sr.SchemaType
	if typ == "" || t.UnmarshalText([]byte(typ)) != nil {
		return sr.Schema{}, fmt.Errorf("%s: want a .avsc, .proto or .json file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return sr.Schema{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	switch {
	case err != nil:
		return sr.Schema{}, err
	case len(b) > max:
		return sr.Schema{}, fmt.Errorf("%s is larger than schema_registry.max_schema_bytes (%d)", path, max)
	case len(bytes.TrimSpace(b)) == 0:
		return sr.Schema{}, fmt.Errorf("%s is empty", path)
	}
	return sr.Schema{Schema: string(b), Type: t}, nil
}

// Close ends the encoders' refreshes.
func (p *Pipeline) Close() {
	if p == nil {
		return
	}
	for _, e := range []*schemareg.Encoder{p.outKey, p.outValue} {
		if e != nil {
			e.Close()
		}
	}
}

// Decodes reports whether input records are decoded (a key or value
// format is confluent).
func (p *Pipeline) Decodes() bool { return p.inKey || p.inValue }

// Encodes reports whether outputs are encoded.
func (p *Pipeline) Encodes() bool { return p.outKey != nil || p.outValue != nil }

// MaxJSON is input_format.max_json_bytes: the most JSON one decoded key
// or value appends.
func (p *Pipeline) MaxJSON() int { return p.maxJSON }

// Span is where a decoded key or value lies in the buffer Decode appended
// to: buf[At:End]; At < 0: not decoded (the raw bytes stand).
type Span struct{ At, End int }

// Decode appends the JSON of r's key and value, those whose format is
// confluent and that are not null, to buf. A null key or value (a
// tombstone) stays null. Every error is a *schemareg.Error.
func (p *Pipeline) Decode(ctx context.Context, buf []byte, r *kgo.Record) (_ []byte, key, value Span, err error) {
	key, value = Span{-1, -1}, Span{-1, -1}
	var header func(string) bool
	if len(r.Headers) > 0 {
		header = func(name string) bool {
			for _, h := range r.Headers {
				if h.Key == name {
					return true
				}
			}
			return false
		}
	}
	if p.inKey && r.Key != nil {
		at := len(buf)
		if buf, _, err = p.c.AppendJSON(ctx, buf, r.Key, wire.Key, header, p.maxJSON); err != nil {
			return buf, key, value, err
		}
		key = Span{at, len(buf)}
	}
	if p.inValue && r.Value != nil {
		at := len(buf)
		if buf, _, err = p.c.AppendJSON(ctx, buf, r.Value, wire.Value, header, p.maxJSON); err != nil {
			return buf, key, value, err
		}
		value = Span{at, len(buf)}
	}
	return buf, key, value, nil
}

// Encode encodes, in place, the key and value of each of outs that goes
// to the pipeline's output topic (Topic "" or the output's name) and is
// not null; outputs to other topics (allowed_outputs) are left as the
// guest wrote them. An output that does not fit its schema is an error
// naming the output and the field, a *schemareg.Error.
func (p *Pipeline) Encode(outs []abi.Output) error {
	for i := range outs {
		o := &outs[i]
		if o.Topic != "" && o.Topic != p.output {
			continue
		}
		if p.outValue != nil && o.Value != nil {
			b, err := p.outValue.AppendFramed(frameBuffer(o.Value), o.Value)
			if err != nil {
				return p.encodeErr(i, "value", err)
			}
			o.Value = b
		}
		if p.outKey != nil && o.Key != nil {
			b, err := p.outKey.AppendFramed(frameBuffer(o.Key), o.Key)
			if err != nil {
				return p.encodeErr(i, "key", err)
			}
			o.Key = b
		}
	}
	return nil
}

// frameRoom is what a frame adds before its payload: the magic byte,
// the schema id and a Protobuf message index of a few entries.
const frameRoom = 16

// frameBuffer is the buffer the framed encoding of the JSON js is
// appended to, one allocation per output: sized to js, which the binary
// encoding is almost always shorter than (field names are not written,
// integers are varints), so the append rarely grows it. Appended to nil,
// the frame grew through 8, 16, 32, 64 and 128 bytes, four or five
// allocations of a 7-field record (BENCHMARKS.md, "The schema-registry
// pipeline on a broker"). Its spare capacity is at most the JSON's
// length, which the JSON itself held until now.
func frameBuffer(js []byte) []byte { return make([]byte, 0, len(js)+frameRoom) }

func (p *Pipeline) encodeErr(i int, part string, err error) error {
	var se *schemareg.Error
	if errors.As(err, &se) {
		e := *se
		e.Msg = fmt.Sprintf("output %d %s: %s", i, part, se.Msg)
		return &e
	}
	return fmt.Errorf("output %d %s: %w", i, part, err)
}

// Failure is what a schema error means for its record: the failure kind
// (KindPrefix and the library's kind), the schema id it is about (0:
// none), and whether the record may succeed later (the registry was down
// or refused the credentials).
func Failure(err error) (kind string, schemaID int, retryable bool) {
	var se *schemareg.Error
	if !errors.As(err, &se) {
		return KindPrefix + "decode", 0, false
	}
	return KindPrefix + se.Kind.String(), se.SchemaID, se.Retryable()
}
