package schemaio

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

const upper = `{"type":"record","name":"Upper","fields":[{"name":"NAME","type":"string"}]}`

// load is a config whose one pipeline encodes its output values as
// outValue says, written in dir with the registry at url.
func load(t *testing.T, dir, url, outValue string) *config.Config {
	t.Helper()
	y := `kafka: {brokers: [embedded], group: g}
schema_registry: {url: ` + url + `}
pipelines:
  - name: p
    module: m.wasm
    inputs: [in]
    output: out
    dead_letter_topic: dlq
    output_format: {value: ` + outValue + `}
`
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	// The module is checked to exist; it is never read here.
	if err := os.WriteFile(filepath.Join(dir, "m.wasm"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestSchemaFile: output_format.value.schema_file is read beside the
// config; without auto_register the registry is only asked whether the
// subject holds it, with it the schema is registered; a missing or empty
// file fails naming the key.
func TestSchemaFile(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	c, err := schemareg.New(schemareg.Config{URL: reg.URL()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "schemas", "upper.avsc"), []byte(upper), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty.avsc"), []byte(" \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct{ out, want string }{
		{"{format: confluent, schema_file: missing.avsc}", "pipeline p: output_format.value.schema_file: open " + filepath.Join(dir, "missing.avsc")},
		{"{format: confluent, schema_file: empty.avsc, auto_register: true}", "pipeline p: output_format.value.schema_file: " + filepath.Join(dir, "empty.avsc") + " is empty"},
		{"{format: confluent, schema_file: schemas/upper.avsc}", "output_format.value.auto_register: true to let the host register it"},
	} {
		cfg := load(t, dir, reg.URL(), tc.out)
		if _, err := New(ctx, c, cfg, &cfg.Pipelines[0]); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.out, err, tc.want)
		}
	}
	if ss, ok := reg.GetSchema("out-value", -1); ok {
		t.Fatalf("registered without auto_register: %+v", ss)
	}
	cfg := load(t, dir, reg.URL(), "{format: confluent, schema_file: schemas/upper.avsc, auto_register: true}")
	p, err := New(ctx, c, cfg, &cfg.Pipelines[0])
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, v := p.outValue.Schema()
	if v != 1 || s.Type != sr.TypeAvro {
		t.Fatalf("registered as version %d, type %v", v, s.Type)
	}
}
