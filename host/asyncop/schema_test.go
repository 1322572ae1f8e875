package asyncop

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/internal/schemareg"
)

const (
	addrAvro = `{"type":"record","name":"Addr","namespace":"x","fields":[{"name":"city","type":"string"}]}`
	userAvro = `{"type":"record","name":"User","namespace":"x","fields":[{"name":"name","type":"string"},{"name":"addr","type":"x.Addr"}]}`
)

func schemaClient(t testing.TB, url string, timeout time.Duration) *schemareg.Client {
	t.Helper()
	c, err := schemareg.New(schemareg.Config{URL: url, RequestTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// schemaOps are the schema operations of section s over client, as a module
// of pipeline "p" has them.
func schemaOps(s SchemaRegistry, client *schemareg.Client) map[abi.OpKind]Operation {
	return s.Operations("pipelines.p.async.schema_registry", Env{Schemas: client})
}

// complete starts op with req and returns its completion, failing the test
// if Start fails or no completion comes within 10 s.
func complete(t *testing.T, op Operation, req []byte) abi.Completion {
	t.Helper()
	got := make(chan []byte, 1)
	if _, err := op.Start(context.Background(), req, func(r []byte) { got <- r }); err != nil {
		t.Fatalf("Start: %v", err)
	}
	select {
	case r := <-got:
		c, err := abi.DecodeCompletion(r)
		if err != nil {
			t.Fatal(err)
		}
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no completion within 10s")
	}
	return abi.Completion{}
}

// A schema looked up by id comes as Redpanda's schema definition: its
// type, text and direct references; by subject, with its id and version
// (-1 the latest). A second lookup of an id asks the registry nothing: the
// client's cache by id holds it.
func TestSchemaLookups(t *testing.T) {
	t.Parallel()
	reg := srfake.New()
	defer reg.Close()
	var requests atomic.Int64
	reg.Intercept(func(http.ResponseWriter, *http.Request) bool { requests.Add(1); return false })
	reg.SeedSchema("addr", 1, 3, sr.Schema{Schema: addrAvro, Type: sr.TypeAvro})
	ref := []sr.SchemaReference{{Name: "x.Addr", Subject: "addr", Version: 1}}
	reg.SeedSchema("users-value", 1, 4, sr.Schema{Schema: userAvro, Type: sr.TypeAvro, References: ref})
	reg.SeedSchema("users-value", 2, 5, sr.Schema{Schema: `"string"`, Type: sr.TypeAvro})
	ops := schemaOps(SchemaRegistry{Enabled: true}, schemaClient(t, reg.URL(), 5*time.Second))

	c := complete(t, ops[abi.OpSchemaByID], abi.AppendSchemaByID(nil, 4))
	if c.Code != abi.CompletionOK {
		t.Fatalf("by id: %+v", c)
	}
	def, err := abi.DecodeSchemaDef(c.Payload)
	if err != nil || def.Type != abi.SchemaAvro || def.Schema != userAvro || len(def.References) != 1 || def.References[0] != (abi.SchemaReference{Name: "x.Addr", Subject: "addr", Version: 1}) {
		t.Fatalf("by id: %+v %v", def, err)
	}
	before := requests.Load()
	if c := complete(t, ops[abi.OpSchemaByID], abi.AppendSchemaByID(nil, 4)); c.Code != abi.CompletionOK {
		t.Fatalf("by id again: %+v", c)
	}
	if n := requests.Load() - before; n != 0 {
		t.Errorf("a cached id asked the registry %d times", n)
	}

	for _, tc := range []struct{ version, id, want int }{{-1, 5, 2}, {1, 4, 1}} {
		c := complete(t, ops[abi.OpSchemaBySubject], abi.AppendSchemaBySubject(nil, "users-value", tc.version))
		if c.Code != abi.CompletionOK {
			t.Fatalf("version %d: %+v", tc.version, c)
		}
		ss, err := abi.DecodeSubjectSchema(c.Payload)
		if err != nil || ss.ID != tc.id || ss.Version != tc.want {
			t.Fatalf("version %d: %+v %v", tc.version, ss, err)
		}
	}
	// Unknown ids, subjects and versions give the same answer every time:
	// code 3, naming what was asked.
	for name, tc := range map[string]struct {
		kind abi.OpKind
		req  []byte
	}{
		"id":      {abi.OpSchemaByID, abi.AppendSchemaByID(nil, 99)},
		"subject": {abi.OpSchemaBySubject, abi.AppendSchemaBySubject(nil, "nobody-value", -1)},
		"version": {abi.OpSchemaBySubject, abi.AppendSchemaBySubject(nil, "users-value", 9)},
	} {
		if c := complete(t, ops[tc.kind], tc.req); c.Code != abi.CompletionRefused || !strings.Contains(c.Message, "not found") {
			t.Errorf("unknown %s: %+v", name, c)
		}
	}
}

// Nothing is granted by default: without enabled every operation is
// refused naming the key, without a registry naming schema_registry.url,
// and a registration needs its subject in register_subjects. A schema
// over max_schema_bytes or max_references is refused, never handed over.
func TestSchemaOpsRefused(t *testing.T) {
	t.Parallel()
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("big-value", 1, 8, sr.Schema{Schema: `{"type":"record","name":"Big","fields":[{"name":"` + strings.Repeat("b", 200) + `","type":"string"}]}`, Type: sr.TypeAvro})
	client := schemaClient(t, reg.URL(), 5*time.Second)
	def := abi.SchemaDef{Type: abi.SchemaAvro, Schema: `"string"`}
	for _, tc := range []struct {
		name   string
		s      SchemaRegistry
		client *schemareg.Client
		kind   abi.OpKind
		req    []byte
		want   string
	}{
		{"disabled", SchemaRegistry{}, client, abi.OpSchemaByID, abi.AppendSchemaByID(nil, 8), "pipelines.p.async.schema_registry.enabled is false"},
		{"disabled register", SchemaRegistry{RegisterSubjects: []string{"*"}}, client, abi.OpSchemaRegister, abi.AppendSchemaRegister(nil, "a", &def), ".enabled is false"},
		{"no registry", SchemaRegistry{Enabled: true}, nil, abi.OpSchemaBySubject, abi.AppendSchemaBySubject(nil, "big-value", 1), "schema_registry.url"},
		{"no subject allowed", SchemaRegistry{Enabled: true}, client, abi.OpSchemaRegister, abi.AppendSchemaRegister(nil, "a-value", &def), "register_subjects is empty"},
		{"subject not allowed", SchemaRegistry{Enabled: true, RegisterSubjects: []string{"audit-*", "b-value"}}, client, abi.OpSchemaRegister, abi.AppendSchemaRegister(nil, "a-value", &def), "register_subjects: audit-*, b-value"},
		{"text over", SchemaRegistry{Enabled: true, MaxSchemaBytes: 100}, client, abi.OpSchemaByID, abi.AppendSchemaByID(nil, 8), "max_schema_bytes (100)"},
		{"register over", SchemaRegistry{Enabled: true, MaxSchemaBytes: 4, RegisterSubjects: []string{"a-value"}}, client, abi.OpSchemaRegister, abi.AppendSchemaRegister(nil, "a-value", &def), "max_schema_bytes (4)"},
		{"references over", SchemaRegistry{Enabled: true, MaxReferences: 1, RegisterSubjects: []string{"a-value"}}, client, abi.OpSchemaRegister,
			abi.AppendSchemaRegister(nil, "a-value", &abi.SchemaDef{Schema: "x", References: make([]abi.SchemaReference, 2)}), "max_references (1)"},
		{"bad type", SchemaRegistry{Enabled: true, RegisterSubjects: []string{"a-value"}}, client, abi.OpSchemaRegister, abi.AppendSchemaRegister(nil, "a-value", &abi.SchemaDef{Type: 7, Schema: "x"}), "schema type 7"},
		{"bad version", SchemaRegistry{Enabled: true}, client, abi.OpSchemaBySubject, abi.AppendSchemaBySubject(nil, "big-value", 0), "version 0"},
	} {
		c := complete(t, schemaOps(tc.s, tc.client)[tc.kind], tc.req)
		if c.Code != abi.CompletionRefused || !strings.Contains(c.Message, tc.want) {
			t.Errorf("%s: %+v, want code 3 with %q", tc.name, c, tc.want)
		}
	}
	// A malformed request is async_start's error, not a completion.
	if _, err := schemaOps(SchemaRegistry{Enabled: true}, client)[abi.OpSchemaByID].Start(context.Background(), []byte{1}, func([]byte) { t.Error("done called") }); err == nil {
		t.Error("a 1-byte request started")
	}
}

// A registration under an allowed subject (a name, or a prefix ending in
// "*") answers the schema's id and version, and the registry then holds it.
func TestSchemaRegister(t *testing.T) {
	t.Parallel()
	reg := srfake.New()
	defer reg.Close()
	client := schemaClient(t, reg.URL(), 5*time.Second)
	ops := schemaOps(SchemaRegistry{Enabled: true, RegisterSubjects: []string{"audit-*"}}, client)
	def := abi.SchemaDef{Type: abi.SchemaAvro, Schema: addrAvro}
	c := complete(t, ops[abi.OpSchemaRegister], abi.AppendSchemaRegister(nil, "audit-addr", &def))
	if c.Code != abi.CompletionOK {
		t.Fatalf("register: %+v", c)
	}
	id, version, err := abi.DecodeSchemaRegistered(c.Payload)
	if err != nil || id <= 0 || version != 1 {
		t.Fatalf("registered %d %d %v", id, version, err)
	}
	c = complete(t, ops[abi.OpSchemaBySubject], abi.AppendSchemaBySubject(nil, "audit-addr", -1))
	ss, err := abi.DecodeSubjectSchema(c.Payload)
	if c.Code != abi.CompletionOK || err != nil || ss.ID != id || ss.Schema != addrAvro {
		t.Fatalf("looked up %+v %+v %v", c, ss, err)
	}
}

// A registry that does not answer never holds the instance: Start returns
// while the request hangs, and the operation completes with code 1 (retry
// later) at the request timeout, naming it. One that refuses connections
// completes with code 1 too.
func TestSchemaRegistryDown(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hanging.Close()
	defer close(release)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + l.Addr().String()
	l.Close()

	for name, url := range map[string]string{"hanging": hanging.URL, "refusing": closedURL} {
		op := schemaOps(SchemaRegistry{Enabled: true}, schemaClient(t, url, 300*time.Millisecond))[abi.OpSchemaByID]
		got := make(chan []byte, 1)
		start := time.Now()
		if _, err := op.Start(context.Background(), abi.AppendSchemaByID(nil, 1), func(r []byte) { got <- r }); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 250*time.Millisecond {
			t.Errorf("%s: Start took %s: it waited on the registry", name, took)
		}
		select {
		case r := <-got:
			c, _ := abi.DecodeCompletion(r)
			if c.Code != abi.CompletionError || !strings.Contains(c.Message, "schema registry") {
				t.Errorf("%s: %+v, want code 1", name, c)
			}
			if name == "hanging" && !strings.Contains(c.Message, "schema_registry.request_timeout") {
				t.Errorf("%s: %q does not name the timeout", name, c.Message)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no completion within 10s", name)
		}
	}
}

// The section's checks name each key; its defaults pass them.
func TestSchemaRegistryCheck(t *testing.T) {
	var keys []string
	s := SchemaRegistry{RegisterSubjects: []string{"a*b", ""}, MaxReferences: 5000}
	s.SetDefaults()
	s.Check("pipelines[0].async.schema_registry", func(key, _ string, _ ...any) { keys = append(keys, key) })
	want := "pipelines[0].async.schema_registry.register_subjects pipelines[0].async.schema_registry.register_subjects[0] pipelines[0].async.schema_registry.register_subjects[1] pipelines[0].async.schema_registry.max_references"
	if got := strings.Join(keys, " "); got != want {
		t.Fatalf("problems name %s\nwant %s", got, want)
	}
}

// Lookups by subject ask the registry once per subject and version: a
// fixed version's answer is kept, the latest's for
// schema_registry.refresh_period; a registration through the module
// drops its subject's latest answer, so the next lookup sees it.
func TestSchemaBySubjectCached(t *testing.T) {
	t.Parallel()
	reg := srfake.New()
	defer reg.Close()
	var bySubject atomic.Int64
	reg.Intercept(func(_ http.ResponseWriter, r *http.Request) bool {
		if strings.HasPrefix(r.URL.Path, "/subjects/users-value/versions/") {
			bySubject.Add(1)
		}
		return false
	})
	reg.SeedSchema("users-value", 1, 4, sr.Schema{Schema: `"string"`, Type: sr.TypeAvro})
	const ttl = 300 * time.Millisecond
	client, err := schemareg.New(schemareg.Config{URL: reg.URL(), RequestTimeout: 5 * time.Second, RefreshPeriod: ttl})
	if err != nil {
		t.Fatal(err)
	}
	ops := schemaOps(SchemaRegistry{Enabled: true, RegisterSubjects: []string{"users-value"}}, client)
	lookup := func(version int) abi.SubjectSchema {
		t.Helper()
		c := complete(t, ops[abi.OpSchemaBySubject], abi.AppendSchemaBySubject(nil, "users-value", version))
		ss, err := abi.DecodeSubjectSchema(c.Payload)
		if c.Code != abi.CompletionOK || err != nil {
			t.Fatalf("version %d: %+v %v", version, c, err)
		}
		return ss
	}
	for range 3 {
		lookup(-1)
		lookup(1)
	}
	if n := bySubject.Load(); n != 2 {
		t.Fatalf("6 lookups of 2 keys asked the registry %d times, want 2", n)
	}
	def := abi.SchemaDef{Type: abi.SchemaAvro, Schema: `"bytes"`}
	if c := complete(t, ops[abi.OpSchemaRegister], abi.AppendSchemaRegister(nil, "users-value", &def)); c.Code != abi.CompletionOK {
		t.Fatalf("register: %+v", c)
	}
	if ss := lookup(-1); ss.Version != 2 || ss.Schema != `"bytes"` {
		t.Fatalf("latest after a registration: %+v", ss)
	}
	n := bySubject.Load()
	lookup(-1)
	if bySubject.Load() != n {
		t.Fatal("the latest answer was not kept")
	}
	time.Sleep(ttl)
	lookup(-1)
	lookup(1)
	if got := bySubject.Load() - n; got != 1 {
		t.Fatalf("after refresh_period: %d requests, want 1 (the latest again, version 1 kept)", got)
	}
}
