package host

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/asyncop"
	"github.com/wasmstream/wasmstream/internal/schemareg"
)

// The engine hands its Env (the process's registry client, SetAsyncEnv)
// to the schema operations of the modules it loads, under the pipeline's
// own section: enabled, the lookup reaches the registry; not enabled, it
// is refused naming the pipeline's key.
func TestEngineAsyncEnvReachesSchemaOps(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("users-value", 1, 4, sr.Schema{Schema: `"string"`, Type: sr.TypeAvro})
	client, err := schemareg.New(schemareg.Config{URL: reg.URL(), RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEngine("", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.SetAsyncEnv(asyncop.Env{Schemas: client})
	for _, tc := range []struct {
		enabled bool
		code    byte
	}{{true, abi.CompletionOK}, {false, abi.CompletionRefused}} {
		cfg := AsyncConfig{Config: asyncop.Config{SchemaRegistry: asyncop.SchemaRegistry{Enabled: tc.enabled}}, Key: "pipelines.lookup.async"}
		cfg.SetDefaults()
		op := e.operations(cfg)[abi.OpSchemaByID]
		got := make(chan []byte, 1)
		if _, err := op.Start(context.Background(), abi.AppendSchemaByID(nil, 4), func(r []byte) { got <- r }); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-got:
			c, err := abi.DecodeCompletion(r)
			if err != nil || c.Code != tc.code {
				t.Fatalf("enabled %v: %+v %v, want code %d", tc.enabled, c, err, tc.code)
			}
			if !tc.enabled && c.Message != "schema registry: pipelines.lookup.async.schema_registry.enabled is false: the pipeline's guests may not use the schema registry" {
				t.Fatalf("refused with %q", c.Message)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no completion")
		}
	}
}

// A Go guest looks schemas up through the SDK (guest.SchemaBySubject, then
// guest.SchemaByID) and reads what the registry holds. While the registry
// does not answer, its instance goes on taking and finishing other
// records; the lookup's record fails retryably at the registry's request
// timeout, and one the section does not grant fails terminally.
func TestSchemaGuest(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("users-value", 1, 4, sr.Schema{Schema: `"string"`, Type: sr.TypeAvro})
	release := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hanging.Close()
	defer close(release)
	wasm := guest(t, "host/testdata/schemaguest")
	load := func(url string, enabled bool) *Instance {
		t.Helper()
		client, err := schemareg.New(schemareg.Config{URL: url, RequestTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		async := AsyncConfig{Config: asyncop.Config{SchemaRegistry: asyncop.SchemaRegistry{Enabled: enabled}}, Key: "pipelines.p.async", Env: asyncop.Env{Schemas: client}}
		m, err := newEngine(t).Load(context.Background(), wasm, ModuleConfig{Name: "p", Limits: Limits{RecordTimeout: 10 * time.Second}, Async: async})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close(context.Background()) })
		return newInstance(t, m)
	}

	in := load(reg.URL(), true)
	if res := in.Process(context.Background(), rec("users-value", ""), 1); res.Status != abi.StatusPending {
		t.Fatalf("lookup: %v %v", res.Status, res.Err)
	}
	res := drain(t, in, 1, 10*time.Second)[1]
	if res.Status != abi.StatusOK || len(res.Outputs) != 1 || string(res.Outputs[0].Value) != `id=4 version=1 type=AVRO refs=0 "string"` {
		t.Fatalf("lookup: %+v", res)
	}

	in = load(hanging.URL, true)
	if res := in.Process(context.Background(), rec("users-value", ""), "hangs"); res.Status != abi.StatusPending {
		t.Fatalf("lookup: %v %v", res.Status, res.Err)
	}
	if res := in.Process(context.Background(), rec("timer", ""), "timer"); res.Status != abi.StatusPending {
		t.Fatalf("timer: %v %v", res.Status, res.Err)
	}
	got := map[any]Result{}
	first := true
	for end := time.Now().Add(10 * time.Second); len(got) < 2; {
		if time.Now().After(end) {
			t.Fatalf("finished %v within 10s", got)
		}
		select {
		case <-in.Ready():
		case <-time.After(20 * time.Millisecond):
		}
		for _, d := range in.Poll(context.Background(), time.Now()) {
			if first && d.Tag != "timer" {
				t.Fatalf("%v finished first: the lookup held the instance", d.Tag)
			}
			first = false
			got[d.Tag] = d.Result
		}
	}
	if r := got["timer"]; r.Status != abi.StatusOK {
		t.Fatalf("timer: %+v", r)
	}
	if r := got["hangs"]; r.Status != abi.StatusRetry || r.Err == nil || !strings.Contains(r.Err.Error(), "schema_registry.request_timeout") {
		t.Fatalf("lookup of a hanging registry: %v %v, want a retry naming the request timeout", r.Status, r.Err)
	}

	in = load(reg.URL(), false)
	in.Process(context.Background(), rec("users-value", ""), 3)
	if r := drain(t, in, 1, 10*time.Second)[3]; r.Status != abi.StatusFail || !strings.Contains(r.Err.Error(), "pipelines.p.async.schema_registry.enabled is false") {
		t.Fatalf("not granted: %v %v, want a terminal failure naming the key", r.Status, r.Err)
	}
}
