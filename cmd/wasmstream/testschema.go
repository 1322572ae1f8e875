package main

// Schema-registry data in `wasmstream test` (internal/conformance,
// framed.go, has the vector fields): a vector's JSON key or value is
// encoded to the Confluent wire format with its schema, as a producer's
// serializer would write it to Kafka, and the record then takes the
// host's own decode path (scheduler.SchemaCodec), so the guest reads the
// JSON a running pipeline would give it; its outputs take the host's
// encode path, and an expected output's JSON is encoded with the same
// schema and both are read back to JSON to be compared: an output that
// does not fit fails the record as it would in the pipeline.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/conformance"
	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/internal/schemareg/wire"
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// The parts of a record a schema frames.
const (
	partKey   = "key"
	partValue = "value"
)

// testFramer frames a test's records for its pipeline and reads its
// outputs back. Not safe for concurrent use.
type testFramer struct {
	pc       *config.Pipeline
	dir      string         // schema files of the vectors are relative to it
	local    *localRegistry // the schema files' registry; nil: the config's
	codec    *scheduler.SchemaCodec
	encoders map[encoderKey]*schemareg.Encoder
	// checks are the encoders of expected outputs that name a schema of
	// their own, by case, output and part: the guest's output is encoded
	// with it to be compared (the pipeline does not encode it).
	checks map[checkKey]*schemareg.Encoder
}

type encoderKey struct {
	subject, message string
	version          int
}

type checkKey struct {
	c, out int
	part   string
}

// framedPart is a key or value as framed: its schema id and its size on
// the wire; id 0: not framed.
type framedPart struct{ id, n int }

// testSources are where a test's records and schemas come from: the
// config file and the vectors file ("": none), --registry, --schema; and
// where notes go (stderr).
type testSources struct {
	cfgPath, vectors, registry string
	schemas                    *schemaFlag
	stderr                     io.Writer
}

// newTestFramer readies the framing of cases for pc (scanFrames says
// which parts are framed). Schema files (--schema and those the vectors
// name) are served by a registry in this process, which stands in for
// schema_registry.url. Nil, nil: nothing is framed.
func newTestFramer(ctx context.Context, cfg *config.Config, pc *config.Pipeline, src testSources, cases []conformance.Case) (*testFramer, error) {
	f := &testFramer{pc: pc, encoders: map[encoderKey]*schemareg.Encoder{}, checks: map[checkKey]*schemareg.Encoder{}}
	if src.vectors != "" {
		f.dir = filepath.Dir(src.vectors)
	}
	named, files, err := scanFrames(pc, src, cases)
	if err != nil {
		return nil, err
	}
	if !named && !files && !pc.UsesSchemaRegistry() {
		return nil, nil
	}
	if err := f.useRegistry(cfg, src, files); err != nil {
		return nil, err
	}
	if err := f.openCodec(ctx, cfg); err != nil {
		f.close()
		return nil, err
	}
	for i := range cases {
		if err := f.frameCase(ctx, src.vectors, i, &cases[i]); err != nil {
			f.close()
			return nil, err
		}
	}
	return f, nil
}

// useRegistry points cfg's schema_registry at the registry the test
// reads: the files' registry of this process (with files), else
// --registry or the config's. A registry that is not this process's is
// only read: the pipeline's auto_register is turned off for it (said once
// on stderr), so that a test never writes to a real registry.
func (f *testFramer) useRegistry(cfg *config.Config, src testSources, files bool) error {
	if src.registry != "" {
		if files {
			return fmt.Errorf("--registry %s and schema files (--schema, or a vector's *_schema): the files are served by a registry of this process, which takes the place of any other; give the subjects of --registry (value_subject), or files, not both", src.registry)
		}
		cfg.SchemaRegistry.URL = src.registry
	}
	if !files {
		if cfg.SchemaRegistry.URL == "" {
			return errors.New("the vectors name registry subjects, and there is no registry: give its URL (--registry, or schema_registry.url in the config), or the schema files (--schema SUBJECT=FILE)")
		}
		lookUpOnly(src.stderr, "wasmstream test", cfg.SchemaRegistry.URL, f.pc, nil)
		return nil
	}
	l, err := newLocalRegistry(src.schemas, &cfg.SchemaRegistry)
	if err != nil {
		return err
	}
	f.local = l
	// The files' registry, with the config's codec options and bounds;
	// no credentials or TLS (it is this process's).
	sr := cfg.SchemaRegistry
	cfg.SchemaRegistry = config.SchemaRegistry{URL: l.URL(), RequestTimeout: sr.RequestTimeout, Cache: sr.Cache,
		MaxSchemaBytes: sr.MaxSchemaBytes, RefreshPeriod: sr.RefreshPeriod, Avro: sr.Avro, Protobuf: sr.Protobuf}
	return nil
}

// openCodec makes the pipeline's codec, as the host makes it at start; a
// subject the files' registry lacks is named with the --schema that
// serves it.
func (f *testFramer) openCodec(ctx context.Context, cfg *config.Config) error {
	codec, err := scheduler.NewSchemaCodec(ctx, cfg, f.pc)
	if err != nil {
		var se *schemareg.Error
		if f.local != nil && errors.As(err, &se) && se.Kind == schemareg.NotFound {
			return notServed(cfg, f.pc, se.Subject)
		}
		return err
	}
	f.codec = codec
	return nil
}

// notServed says which --schema a pipeline's output subject needs, when
// the files' registry does not have it.
func notServed(cfg *config.Config, pc *config.Pipeline, subject string) error {
	for _, o := range []struct {
		part string
		out  config.OutputPart
	}{{partValue, pc.OutputFormat.Value}, {partKey, pc.OutputFormat.Key}} {
		if o.out.SchemaFile != "" && o.out.SubjectFor(pc.Output, o.part) == subject {
			return fmt.Errorf("pipeline %s writes its outputs with %s (output_format.%s.schema_file), which the subject %s must hold: serve it with --schema %s=%s, or set output_format.%s.auto_register: true",
				pc.Name, o.out.SchemaFile, o.part, subject, subject, cfg.SchemaFilePath(o.out), o.part)
		}
	}
	return fmt.Errorf("pipeline %s writes its outputs with subject %s (output_format), and no schema file is served as it: add --schema %s=FILE", pc.Name, subject, subject)
}

// scanFrames reports whether the cases name a schema or subject (named)
// and whether schema files are given (files). With a config, a vector's
// schema must be for a part the pipeline decodes; without one, a schema
// named for a key or value turns decoding on for it (pc.InputFormat), as
// input_format would.
func scanFrames(pc *config.Pipeline, src testSources, cases []conformance.Case) (named, files bool, err error) {
	files = len(src.schemas.files) > 0
	for i := range cases {
		c := &cases[i]
		for _, p := range []struct {
			part string
			fr   *conformance.Frame
			in   *config.InputPart
		}{{partKey, &c.KeyFrame, &pc.InputFormat.Key}, {partValue, &c.ValueFrame, &pc.InputFormat.Value}} {
			if !p.fr.Named() {
				continue
			}
			named, files = true, files || p.fr.Schema != ""
			if p.in.Confluent() {
				continue
			}
			if src.cfgPath != "" {
				return false, false, fmt.Errorf("%s: %s_schema/%s_subject: pipeline %s reads record %ss as they are (input_format.%s.format is %s in %s), so the host would give the guest the framed bytes: set input_format.%s.format: confluent, or give %s_base64 for bytes as they are",
					caseWhere(src.vectors, c), p.part, p.part, pc.Name, p.part, p.part, p.in.Format, src.cfgPath, p.part, p.part)
			}
			p.in.Format = config.FormatConfluent
		}
		if c.Expect != nil {
			for _, o := range c.Expect.Outputs {
				named = named || o.KeyFrame.Named() || o.ValueFrame.Named()
				files = files || o.KeyFrame.Schema != "" || o.ValueFrame.Schema != ""
			}
		}
	}
	return named, files, nil
}

// caseWhere names a case in errors: the vectors file and line, or the
// --record flag.
func caseWhere(vectors string, c *conformance.Case) string {
	if c.Line > 0 {
		return fmt.Sprintf("%s:%d", vectors, c.Line)
	}
	return c.Name
}

// decodes reports whether the pipeline decodes the part of its records.
func (f *testFramer) decodes(part string) bool {
	if part == partKey {
		return f.pc.InputFormat.Key.Confluent()
	}
	return f.pc.InputFormat.Value.Confluent()
}

// hostEncodes reports whether the host encodes the part of an output to
// topic ("" is the pipeline's output).
func (f *testFramer) hostEncodes(part, topic string) bool {
	if topic != "" && topic != f.pc.Output {
		return false
	}
	if part == partKey {
		return f.pc.OutputFormat.Key.Confluent()
	}
	return f.pc.OutputFormat.Value.Confluent()
}

// frameCase frames c's key and value where the pipeline decodes them, and
// sets what its expected outputs are compared with.
func (f *testFramer) frameCase(ctx context.Context, vectors string, i int, c *conformance.Case) error {
	where := caseWhere(vectors, c)
	for _, p := range []struct {
		part string
		fr   *conformance.Frame
		b    *[]byte
	}{{partKey, &c.KeyFrame, &c.Record.Key}, {partValue, &c.ValueFrame, &c.Record.Value}} {
		if !f.decodes(p.part) || p.fr.Raw || p.fr.JSON == nil {
			continue
		}
		enc, what, err := f.encoder(where, p.part, p.fr, c.Record.Topic+"-"+p.part, -1)
		if err != nil {
			return err
		}
		b, err := enc.AppendFramed(nil, p.fr.JSON)
		if err != nil {
			return fmt.Errorf("%s: %s: does not fit %s: %v", where, p.part, what, encodeReason(err))
		}
		*p.b = b
	}
	if c.Expect == nil {
		return nil
	}
	return f.frameExpected(ctx, where, i, c.Expect)
}

// frameExpected sets what case i's expected outputs are compared with:
// each key and value the host encodes (with its own encoder, as it
// encodes the guest's outputs), or that names a schema of its own, as its
// JSON encoded with that schema and read back.
func (f *testFramer) frameExpected(ctx context.Context, where string, i int, e *conformance.Expect) error {
	for j := range e.Outputs {
		o := &e.Outputs[j]
		for _, p := range []struct {
			part string
			fr   *conformance.Frame
			out  config.OutputPart
		}{{partKey, &o.KeyFrame, f.pc.OutputFormat.Key}, {partValue, &o.ValueFrame, f.pc.OutputFormat.Value}} {
			field := fmt.Sprintf("expect.outputs[%d].%s", j, p.part)
			host := f.hostEncodes(p.part, o.Topic)
			switch {
			case host && p.fr.Named():
				return fmt.Errorf("%s: %s_schema/%s_subject: pipeline %s writes output %ss with subject %s (output_format.%s): the expected %s is encoded with it; leave the schema out",
					where, field, field, f.pc.Name, p.part, p.out.SubjectFor(f.pc.Output, p.part), p.part, p.part)
			case !host && !p.fr.Named():
				continue
			}
			var enc *schemareg.Encoder
			if !host {
				var err error
				if enc, _, err = f.encoder(where, field, p.fr, "", -1); err != nil {
					return err
				}
				f.checks[checkKey{i, j, p.part}] = enc
			}
			if p.fr.JSON == nil {
				continue // null stays null: the host encodes no null
			}
			b, err := f.encodeExpected(enc, p.part, p.out, p.fr)
			if err != nil {
				return fmt.Errorf("%s: %s: %w", where, field, err)
			}
			js, _, err := f.readBack(ctx, b, p.part)
			if err != nil {
				return fmt.Errorf("%s: %s: %v", where, field, err)
			}
			o.Compare(p.part, js, true)
		}
	}
	return nil
}

// encodeExpected frames an expected key or value with enc, or, nil, as
// the host frames an output's (the pipeline's encoder for out).
func (f *testFramer) encodeExpected(enc *schemareg.Encoder, part string, out config.OutputPart, fr *conformance.Frame) ([]byte, error) {
	if enc != nil {
		b, err := enc.AppendFramed(nil, fr.JSON)
		if err != nil {
			what := fr.Schema
			if what == "" {
				what = "subject " + fr.Subject
			}
			return nil, fmt.Errorf("does not fit %s: %v", what, encodeReason(err))
		}
		return b, nil
	}
	o := []abi.Output{{Partition: -1}}
	if part == partKey {
		o[0].Key = fr.JSON
	} else {
		o[0].Value = fr.JSON
	}
	if err := f.codec.Encode(o); err != nil {
		subject := out.SubjectFor(f.pc.Output, part)
		what := "subject " + subject
		if file := f.local.subjectFile(subject); file != "" {
			what += " (" + file + ")"
		} else if out.SchemaFile != "" {
			what += " (" + out.SchemaFile + ")"
		}
		return nil, fmt.Errorf("does not fit %s: %v", what, encodeReason(err))
	}
	if part == partKey {
		return o[0].Key, nil
	}
	return o[0].Value, nil
}

// encoder is the encoder of fr's schema (a file, a subject, or else
// defSubject) at version; what names the schema in errors.
func (f *testFramer) encoder(where, field string, fr *conformance.Frame, defSubject string, version int) (*schemareg.Encoder, string, error) {
	subject, what := fr.Subject, "subject "+fr.Subject
	switch {
	case fr.Schema != "":
		path := fr.Schema
		if !filepath.IsAbs(path) {
			path = filepath.Join(f.dir, path)
		}
		var err error
		if subject, err = f.local.fileSubject(path, fmt.Sprintf("%s: %s_schema", where, field)); err != nil {
			return nil, "", err
		}
		what = fr.Schema
	case subject == "":
		subject, what = defSubject, "subject "+defSubject
	}
	if file := f.local.subjectFile(subject); file != "" && fr.Schema == "" {
		what += " (" + file + ")"
	}
	k := encoderKey{subject, fr.Message, version}
	if e, ok := f.encoders[k]; ok {
		return e, what, nil
	}
	e, err := f.codec.Client().NewEncoder(context.Background(), schemareg.EncoderConfig{Subject: subject, Version: version, Message: fr.Message})
	if err != nil {
		var se *schemareg.Error
		if errors.As(err, &se) && se.Kind == schemareg.NotFound && f.local != nil {
			return nil, "", fmt.Errorf("%s: %s: no schema for subject %s: give %s_schema (a file) or serve the subject with --schema %s=FILE", where, field, subject, field, subject)
		}
		return nil, "", fmt.Errorf("%s: %s: %v", where, field, err)
	}
	f.encoders[k] = e
	return e, what, nil
}

// encodeReason is why JSON did not fit a schema: the codec's words
// (naming the field), without the registry's framing of them.
func encodeReason(err error) error {
	var se *schemareg.Error
	if errors.As(err, &se) && se.Kind == schemareg.Encode && se.Err != nil {
		return se.Err
	}
	return err
}

func wirePart(part string) wire.Part {
	if part == partKey {
		return wire.Key
	}
	return wire.Value
}

// readBack decodes framed bytes to the JSON the host's decode path gives.
func (f *testFramer) readBack(ctx context.Context, b []byte, part string) ([]byte, framedPart, error) {
	js, d, err := f.codec.Client().AppendJSON(ctx, nil, b, wirePart(part), nil, f.pc.InputFormat.MaxJSONBytes)
	return js, framedPart{id: d.SchemaID, n: len(b)}, err
}

// decode is c's record as the guest is given it, and how its key and
// value were framed; the error is the host's (the record fails without a
// call).
func (f *testFramer) decode(ctx context.Context, c *conformance.Case) (abi.Record, [2]framedPart, error) {
	var fp [2]framedPart
	rec, err := f.codec.Decode(ctx, c.Record)
	if err != nil {
		return rec, fp, err
	}
	for i, p := range []struct {
		part      string
		raw, json []byte
	}{{partKey, c.Record.Key, rec.Key}, {partValue, c.Record.Value, rec.Value}} {
		if f.decodes(p.part) && p.raw != nil {
			id, _, _ := wire.ParseHeader(p.raw, wirePart(p.part), nil)
			fp[i] = framedPart{id: id, n: len(p.raw)}
		}
	}
	return rec, fp, nil
}

// outputs encodes a succeeded record's outputs as the host does (the
// error fails the record), and returns them read back to JSON for the
// eye and the expectation, with how each key and value was framed.
func (f *testFramer) outputs(ctx context.Context, outs []abi.Output) ([]abi.Output, [][2]framedPart, error) {
	if err := f.codec.Encode(outs); err != nil {
		return nil, nil, err
	}
	shown := make([]abi.Output, len(outs))
	fps := make([][2]framedPart, len(outs))
	for i, o := range outs {
		shown[i] = o
		for k, p := range []struct {
			part string
			b    *[]byte
		}{{partKey, &shown[i].Key}, {partValue, &shown[i].Value}} {
			if *p.b == nil || !f.hostEncodes(p.part, o.Topic) {
				continue
			}
			js, fp, err := f.readBack(ctx, *p.b, p.part)
			if err != nil {
				return nil, nil, fmt.Errorf("output %d %s: read back: %w", i, p.part, err)
			}
			*p.b, fps[i][k] = js, fp
		}
	}
	return shown, fps, nil
}

// checkOwn encodes, with the schema an expected output names (when the
// pipeline does not encode it), the guest's output i of case ci, and reads
// it back for the comparison; a part that does not fit is a difference.
func (f *testFramer) checkOwn(ctx context.Context, ci int, outs []abi.Output) (diff []string) {
	for i := range outs {
		for _, p := range []struct {
			part string
			b    *[]byte
		}{{partKey, &outs[i].Key}, {partValue, &outs[i].Value}} {
			enc := f.checks[checkKey{ci, i, p.part}]
			if enc == nil || *p.b == nil {
				continue
			}
			b, err := enc.AppendFramed(nil, *p.b)
			if err != nil {
				diff = append(diff, fmt.Sprintf("output %d %s: does not fit the expected output's schema: %v", i, p.part, encodeReason(err)))
				continue
			}
			if js, _, err := f.readBack(ctx, b, p.part); err == nil {
				*p.b = js
			}
		}
	}
	return diff
}

// close ends the encoders and stops the files' registry.
func (f *testFramer) close() {
	for _, e := range f.encoders {
		e.Close()
	}
	if f.codec != nil {
		f.codec.Close()
	}
	if f.local != nil {
		f.local.Close()
	}
}
