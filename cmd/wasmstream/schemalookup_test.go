package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// recordingRegistry is a registry (srfake) behind a proxy that records
// every request's method and path.
type recordingRegistry struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []string
}

func newRecordingRegistry(t *testing.T, schemas map[string]string) *recordingRegistry {
	t.Helper()
	reg := srfake.New()
	t.Cleanup(reg.Close)
	for subject, schema := range schemas {
		if _, _, err := reg.RegisterSchema(subject, sr.Schema{Schema: schema, Type: sr.TypeAvro}); err != nil {
			t.Fatal(err)
		}
	}
	u, err := url.Parse(reg.URL())
	if err != nil {
		t.Fatal(err)
	}
	rr := &recordingRegistry{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	rr.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rr.mu.Lock()
		rr.reqs = append(rr.reqs, r.Method+" "+r.URL.Path)
		rr.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(rr.srv.Close)
	return rr
}

// writes are the requests that would change the registry: a
// registration (POST …/versions), or any PUT or DELETE.
func (rr *recordingRegistry) writes() (w []string, all []string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for _, r := range rr.reqs {
		if strings.HasPrefix(r, "PUT ") || strings.HasPrefix(r, "DELETE ") || (strings.HasPrefix(r, "POST ") && strings.HasSuffix(r, "/versions")) {
			w = append(w, r)
		}
	}
	return w, append([]string(nil), rr.reqs...)
}

// schemaFileConfig is a pipeline that encodes its output values with
// upper.avsc (output_format.value.schema_file) and auto_register, against
// the registry at url.
func schemaFileConfig(t *testing.T, dir, url string) string {
	writeFile(t, dir, "upper.avsc", []byte(upperAvsc))
	return writeFile(t, dir, "config.yaml", []byte(`kafka: {brokers: [embedded], group: g}
admin: {enabled: false}
schema_registry: {url: "`+url+`", request_timeout: 2s}
pipelines:
  - name: up
    module: uppercase.wasm
    inputs: [users]
    output: shouted
    dead_letter_topic: dlq
    input_format: {value: {format: confluent}}
    output_format: {value: {format: confluent, schema_file: upper.avsc, auto_register: true}}
`))
}

// wasmstream test against a real registry (the config's) with
// output_format.value.schema_file and auto_register: the registry is only
// read, the schema file looked up under its subject (which holds it), and
// the note that auto_register was not followed is on stderr once.
func TestTestCommandNeverRegisters(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	rr := newRecordingRegistry(t, map[string]string{"users-value": userAvsc, "shouted-value": upperAvsc})
	mod := writeFile(t, dir, "uppercase.wasm", uppercaseWasm(t))
	cfg := schemaFileConfig(t, dir, rr.srv.URL)
	vectors := writeFile(t, dir, "v.jsonl", []byte(`{"value": {"name": "ada", "id": 1}, "expect": {"outcome": "ok", "outputs": [{"value": {"NAME": "ADA", "ID": 1}}]}}`+"\n"))
	code, out, errs := runCLI(t, "test", "--config", cfg, mod, "--file", vectors)
	if code != 0 || !strings.Contains(out, "expectations: 1 passed, 0 failed") {
		t.Fatalf("code %d\n%s\n%s", code, out, errs)
	}
	note := "wasmstream test: pipeline up: output_format.value.auto_register not followed: the schema registry at " + rr.srv.URL + " is not this process's"
	if n := strings.Count(errs, note); n != 1 {
		t.Errorf("the note %d times on stderr, want once:\n%s", n, errs)
	}
	if w, all := rr.writes(); len(w) > 0 {
		t.Errorf("the test wrote to the registry: %q (all requests: %q)", w, all)
	}
}

// wasmstream demo against a real registry (the config's) with
// auto_register: the host is told not to register (a --set on the
// pipeline's key) and the demo's own check of the subjects only reads.
func TestDemoNeverRegisters(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rr := newRecordingRegistry(t, map[string]string{"users-value": userAvsc, "shouted-value": upperAvsc})
	writeFile(t, dir, "uppercase.wasm", uppercaseWasm(t))
	var errb strings.Builder
	d := &demoCmd{cf: commonFlags{config: schemaFileConfig(t, dir, rr.srv.URL), brokers: "embedded"}, stderr: &errb}
	ds, err := d.prepareSchemas(nil)
	if err != nil {
		t.Fatal(err)
	}
	ds.close()
	if w, all := rr.writes(); len(w) > 0 {
		t.Errorf("the demo wrote to the registry: %q (all requests: %q)", w, all)
	}
	cfg, err := d.cf.load()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Pipelines[0].OutputFormat.Value.AutoRegister {
		t.Errorf("the host would register: sets %q", d.cf.sets)
	}
	if n := strings.Count(errb.String(), "wasmstream demo: pipeline up: output_format.value.auto_register not followed"); n != 1 {
		t.Errorf("the note %d times on stderr, want once:\n%s", n, errb.String())
	}
}
