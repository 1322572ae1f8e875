//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// upperAvroBreaking is not backward compatible with upperAvro1: a field
// without a default, which records written with v1 do not have.
const upperAvroBreaking = `{"type":"record","name":"Upper","namespace":"it","fields":[{"name":"NAME","type":"string"},{"name":"ID","type":"long"},{"name":"EMAIL","type":["null","string"],"default":null},{"name":"REGION","type":"string"}]}`

// TestSchemaAutoRegisterRealRegistry: an output schema given as a file
// (output_format.value.schema_file, beside the config) on the real broker
// and Apicurio. Without auto_register the host never registers: a subject
// that does not hold the file's schema fails the start, naming the key
// and auto_register, and the subject stays empty. With auto_register:
// true the file's schema is registered at start and the outputs are
// framed with its id. A file the registry refuses (compatibility BACKWARD,
// an incompatible schema) fails the start with the registry's reason.
func TestSchemaAutoRegisterRealRegistry(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	url := registryURL(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	subject := out + "-value"
	kafkatest.CreateTopic(t, brokers, 2, in, out, dlq)
	admin, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := ctxTimeout(3 * time.Minute)
	defer cancel()
	if _, err := admin.CreateSchema(ctx, in+"-value", sr.Schema{Schema: userAvro, Type: sr.TypeAvro}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, text := range map[string]string{"upper.avsc": upperAvro1, "upper-breaking.avsc": upperAvroBreaking} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	config := func(file string, autoRegister bool) string {
		return schemaPipelineYAML(brokers, n, fmt.Sprintf("  url: %s\n", url), schemaPipe{name: "p", inputs: []string{in}, out: out, dlq: dlq,
			outputValue: fmt.Sprintf("{format: confluent, schema_file: %s, auto_register: %t}", file, autoRegister)})
	}
	versions := func() []int {
		vs, err := admin.SubjectVersions(ctx, subject)
		if err != nil && !strings.Contains(err.Error(), "404") && !strings.Contains(strings.ToLower(err.Error()), "not found") {
			t.Fatalf("versions of %s: %v", subject, err)
		}
		return vs
	}

	// Without auto_register: the start fails and nothing is registered.
	if r, _, err := newSchemaHost(t, dir, config("upper.avsc", false)); err == nil {
		r.Stop(context.Background())
		t.Fatal("the host started with a schema file its subject does not hold, without auto_register")
	} else if msg := err.Error(); !strings.Contains(msg, "output_format.value.schema_file") || !strings.Contains(msg, "does not hold the schema") || !strings.Contains(msg, "auto_register: true") {
		t.Fatalf("the start's error does not name the key, the subject's want and auto_register: %v", err)
	} else {
		t.Logf("without auto_register: %v", err)
	}
	if vs := versions(); len(vs) != 0 {
		t.Fatalf("without auto_register the subject has versions %v", vs)
	}

	// With auto_register: registered at start, outputs framed with its id.
	r, _, err := newSchemaHost(t, dir, config("upper.avsc", true))
	if err != nil {
		t.Fatalf("the host with auto_register: %v", err)
	}
	r.Start()
	defer r.Stop(context.Background())
	registered, err := admin.SchemaByVersion(ctx, subject, -1)
	if err != nil || registered.Version != 1 {
		t.Fatalf("after a start with auto_register, the subject's latest is %+v (%v), want version 1", registered, err)
	}
	c, err := schemareg.New(schemareg.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := c.NewEncoder(ctx, schemareg.EncoderConfig{Subject: in + "-value"})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	const records = 100
	produceUsers(t, ctx, kafkatest.Client(t, brokers), enc, 0, records, func(int) string { return in })
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= records })
	for _, rec := range rd.Recs {
		if doc, id := upperOutput(t, ctx, c, rec); id != registered.ID {
			t.Fatalf("output %s: %v framed with id %d, want the registered %d", rec.Key, doc, id, registered.ID)
		}
	}
	if s := r.Snapshots()[0]; s.DeadLetter != 0 {
		t.Fatalf("%d dead letters", s.DeadLetter)
	}

	// A file the registry refuses: the start fails with its reason.
	for _, res := range admin.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatBackward}, subject) {
		if res.Err != nil {
			t.Fatalf("compatibility BACKWARD on %s: %v", subject, res.Err)
		}
	}
	if r2, _, err := newSchemaHost(t, dir, config("upper-breaking.avsc", true)); err == nil {
		r2.Stop(context.Background())
		t.Fatal("the host started with an incompatible schema file auto-registered")
	} else if msg := err.Error(); !strings.Contains(msg, "output_format.value.schema_file") || !strings.Contains(msg, "HTTP 409") || !strings.Contains(msg, "REGION") {
		t.Fatalf("the start's error does not name the key and give the registry's reason: %v", err)
	} else {
		t.Logf("an incompatible schema file: %v", err)
	}
	if vs := versions(); len(vs) != 1 {
		t.Fatalf("after the refused registration the subject has versions %v, want [1]", vs)
	}
}
