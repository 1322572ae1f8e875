package main

// Schema-registry data in `wasmstream demo`: with --schema, the schema
// files are served by a registry in this process (schemafiles.go), which
// the host takes as schema_registry.url; the --input lines, JSON, are
// framed with the input topic's subject (<topic>-value) for the topics a
// pipeline decodes (input_format.value), as a producer's serializer would,
// and the values of the outputs a pipeline encodes (output_format.value)
// are read back to JSON to be printed.

import (
	"context"
	"errors"
	"fmt"

	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/internal/schemareg/wire"
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// demoSchemas is the demo's side of schema-registry data: the input lines
// framed per topic, and the client that reads the outputs back. The tail
// goroutine reads outputs with it while seed reads framed: both only read
// once prepare has made it.
type demoSchemas struct {
	local  *localRegistry // nil: the config's registry
	client *schemareg.Client
	framed map[string][][]byte // the --input lines framed, by input topic
	ids    map[string]int      // the schema id they are framed with, by topic
	// outputs are the topics whose values a pipeline encodes; decoders
	// the pipelines that decode their inputs' values.
	outputs  map[string]bool
	decoders []string
	maxJSON  int
}

// prepareSchemas serves --schema's files as schema_registry.url (a --set
// for the host), or else turns auto_register off against the config's
// registry, and frames lines for the topics a pipeline decodes. A
// line that does not fit, or a subject no file serves, is an error naming
// them. Nil, nil: no pipeline uses a registry and no --schema was given.
func (d *demoCmd) prepareSchemas(lines [][]byte) (*demoSchemas, error) {
	cfg, err := d.cf.load()
	if err != nil {
		return nil, err
	}
	ds := &demoSchemas{framed: map[string][][]byte{}, ids: map[string]int{}, outputs: map[string]bool{}}
	if len(d.schemas.files) > 0 {
		if ds.local, err = newLocalRegistry(&d.schemas, &cfg.SchemaRegistry); err != nil {
			return nil, err
		}
		d.cf.sets = append(d.cf.sets, "schema_registry.url="+ds.local.URL())
		if cfg, err = d.cf.load(); err != nil {
			ds.close()
			return nil, err
		}
	} else if cfg.SchemaRegistry.URL != "" {
		// The config's registry is read, never written (lookUpOnly),
		// here and by the host, which loads the config with these sets.
		for i := range cfg.Pipelines {
			d.cf.sets = lookUpOnly(d.stderr, "wasmstream demo", cfg.SchemaRegistry.URL, &cfg.Pipelines[i], d.cf.sets)
		}
	}
	if err := ds.frame(cfg, lines, d.input); err != nil {
		ds.close()
		return nil, err
	}
	if ds.client == nil && ds.local == nil {
		return nil, nil
	}
	return ds, nil
}

// frame checks each pipeline's subjects (as the host will at start) and
// frames lines for each topic a pipeline decodes.
func (ds *demoSchemas) frame(cfg *config.Config, lines [][]byte, input string) error {
	ctx := context.Background()
	for i := range cfg.Pipelines {
		pc := &cfg.Pipelines[i]
		if !pc.UsesSchemaRegistry() {
			continue
		}
		codec, err := scheduler.NewSchemaCodec(ctx, cfg, pc)
		if err != nil {
			var se *schemareg.Error
			if ds.local != nil && errors.As(err, &se) && se.Kind == schemareg.NotFound {
				return notServed(cfg, pc, se.Subject)
			}
			return err
		}
		codec.Close()
		if ds.client == nil {
			ds.client, ds.maxJSON = codec.Client(), pc.InputFormat.MaxJSONBytes
		}
		if pc.OutputFormat.Value.Confluent() {
			ds.outputs[pc.Output] = true
		}
		if !pc.InputFormat.Value.Confluent() {
			continue
		}
		ds.decoders = append(ds.decoders, pc.Name)
		if len(lines) == 0 {
			continue
		}
		for _, topic := range pc.Inputs {
			if _, ok := ds.framed[topic]; ok {
				continue
			}
			if err := ds.frameTopic(ctx, pc, topic, lines, input); err != nil {
				return err
			}
		}
	}
	return nil
}

// frameTopic frames lines for topic with its subject's latest schema.
func (ds *demoSchemas) frameTopic(ctx context.Context, pc *config.Pipeline, topic string, lines [][]byte, input string) error {
	subject := topic + "-value"
	enc, err := ds.client.NewEncoder(ctx, schemareg.EncoderConfig{Subject: subject})
	if err != nil {
		return ds.notServed(err, "pipeline "+pc.Name+" decodes the values of "+topic+" (input_format.value), and --input's lines are framed for it with subject %s")
	}
	defer enc.Close()
	what := "subject " + subject
	if file := ds.local.subjectFile(subject); file != "" {
		what += " (" + file + ")"
	}
	framed := make([][]byte, len(lines))
	for n, l := range lines {
		if framed[n], err = enc.AppendFramed(nil, l); err != nil {
			return fmt.Errorf("--input %s: record %d: does not fit %s: %v", input, n+1, what, encodeReason(err))
		}
	}
	s, _ := enc.Schema()
	ds.framed[topic], ds.ids[topic] = framed, s.ID
	return nil
}

// notServed says, for a subject the files' registry does not have, which
// --schema to add (what says where the subject is used, with a %s for
// it); other errors are as they are.
func (ds *demoSchemas) notServed(err error, what string) error {
	var se *schemareg.Error
	if ds.local != nil && errors.As(err, &se) && se.Kind == schemareg.NotFound {
		return fmt.Errorf(what+", and no schema file is served as it: add --schema %s=FILE", se.Subject, se.Subject)
	}
	return err
}

// show is an output's value for the terminal: its JSON read back, with
// its schema id, where the pipeline encodes the topic's values.
func (ds *demoSchemas) show(topic string, value []byte) string {
	if ds == nil || !ds.outputs[topic] || value == nil {
		return printable(value)
	}
	js, dec, err := ds.client.AppendJSON(context.Background(), nil, value, wire.Value, nil, ds.maxJSON)
	if err != nil {
		return printable(value) + "  (does not read back: " + printable([]byte(err.Error())) + ")"
	}
	return fmt.Sprintf("%s  (framed: schema id %d)", printable(js), dec.SchemaID)
}

// close stops the files' registry.
func (ds *demoSchemas) close() {
	if ds != nil && ds.local != nil {
		ds.local.Close()
	}
}
