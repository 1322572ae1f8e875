package host

import (
	"context"
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
