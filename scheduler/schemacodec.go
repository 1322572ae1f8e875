package scheduler

// SchemaCodec is a pipeline's schema-registry steps, the decode before the
// guest's call and the encode of its outputs, as its workers run them
// (scheduler/internal/schemaio), for `wasmstream test`, which runs records
// through the host without Kafka: a record there meets the same code, so
// the JSON its guest reads and the bytes its outputs become are those of a
// running pipeline.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/schemaio"
)

// SchemaCodec decodes a pipeline's input keys and values and encodes its
// outputs with the registry of cfg.SchemaRegistry. Safe for concurrent use;
// Close ends the encoders' refreshes.
type SchemaCodec struct {
	c *schemareg.Client
	p *schemaio.Pipeline // nil: pc's formats are all raw
}

// NewSchemaCodec makes pc's codec with a registry client of cfg's
// schema_registry (the host's one client, made as the runner makes it),
// and resolves pc's output subjects now, as a pipeline's start does. A
// pipeline whose formats are all raw gets a codec that decodes and
// encodes nothing, with a client when schema_registry.url is set (the
// test command frames expected outputs with it), else none.
func NewSchemaCodec(ctx context.Context, cfg *config.Config, pc *config.Pipeline) (*SchemaCodec, error) {
	if cfg.SchemaRegistry.URL == "" && !pc.UsesSchemaRegistry() {
		return &SchemaCodec{}, nil
	}
	c, err := schemareg.New(schemaio.ClientConfig(&cfg.SchemaRegistry))
	if err != nil {
		return nil, err
	}
	p, err := schemaio.New(ctx, c, cfg, pc)
	if err != nil {
		return nil, err
	}
	return &SchemaCodec{c: c, p: p}, nil
}

// Client is the codec's registry client; nil when the pipeline uses none.
func (s *SchemaCodec) Client() *schemareg.Client { return s.c }

// Decodes reports whether input keys or values are decoded.
func (s *SchemaCodec) Decodes() bool { return s.p != nil && s.p.Decodes() }

// Encodes reports whether outputs to the output topic are encoded.
func (s *SchemaCodec) Encodes() bool { return s.p != nil && s.p.Encodes() }

// Decode returns r as the guest is given it: its key and value, those
// whose format is confluent and that are not null, as their JSON; the
// others as they are. Every error is a *schemareg.Error (SchemaFailure
// says what it means for the record).
func (s *SchemaCodec) Decode(ctx context.Context, r abi.Record) (abi.Record, error) {
	if !s.Decodes() {
		return r, nil
	}
	kr := &kgo.Record{Topic: r.Topic, Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	buf, k, v, err := s.p.Decode(ctx, nil, kr)
	if err != nil {
		return r, err
	}
	if k.At >= 0 {
		r.Key = buf[k.At:k.End:k.End]
	}
	if v.At >= 0 {
		r.Value = buf[v.At:v.End:v.End]
	}
	return r, nil
}

// Encode encodes, in place, the keys and values of outs that go to the
// output topic, as a succeeded record's outputs are before its verdict.
func (s *SchemaCodec) Encode(outs []abi.Output) error {
	if !s.Encodes() {
		return nil
	}
	return s.p.Encode(outs)
}

// SchemaFailure is what a SchemaCodec error means for its record: the
// failure kind the host gives it (schema.<kind>), the schema id it is
// about (0: none), and whether the host would retry the record.
func SchemaFailure(err error) (kind string, schemaID int, retryable bool) {
	return schemaio.Failure(err)
}

// Close ends the encoders' refreshes.
func (s *SchemaCodec) Close() { s.p.Close() }
