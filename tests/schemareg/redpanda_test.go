//go:build integration

package schemareg_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/host/asyncop"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/internal/schemareg"
)

// Unmodified Redpanda Data Transforms reading the registry through the Go
// SDK v1.1.0's sr package (tests/redpanda/redpanda-go-sr) and the Rust
// crate redpanda-transform-sdk-sr 1.1.0 (tests/redpanda/redpanda-rust-sr),
// run by the host against Apicurio: a framed record decoded by its schema
// id, a lookup by subject and version, a registration under an allowed
// subject and one under a subject the pipeline does not allow, and an
// unknown id.
func TestApicurioRedpandaTransform(t *testing.T) {
	for _, sdk := range []struct {
		name             string
		build            func(t *testing.T) []byte
		refused, unknown string
	}{
		{"go", buildGoTransform, "error: unable to create new schema", "error: unable to find a schema definition with id"},
		{"rust", func(t *testing.T) []byte { return wt.BuildRustGuest(t, "tests/redpanda/redpanda-rust-sr") },
			"error: writing record failed with errno: -1", "error: writing record failed with errno: -1"},
	} {
		t.Run(sdk.name, func(t *testing.T) { testApicurioRedpanda(t, sdk.build(t), sdk.refused, sdk.unknown) })
	}
}

func buildGoTransform(t *testing.T) []byte {
	dir := filepath.Join(wt.RepoRoot(t), "tests/redpanda/redpanda-go-sr")
	out := filepath.Join(t.TempDir(), "redpanda_go_sr.wasm")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", dir, err, b)
	}
	wasm, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return wasm
}

func testApicurioRedpanda(t *testing.T, wasm []byte, refused, unknown string) {
	url, admin, run := registry(t)
	subject := "rp-" + run + "-orders-value"
	ss := create(t, admin, subject, sr.Schema{Schema: orderV1, Type: sr.TypeAvro})

	client, err := schemareg.New(schemareg.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	e, err := host.NewEngine("", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	defer e.Close(ctx)
	m, err := e.Load(ctx, wasm, host.ModuleConfig{
		Name: "rp", AllowedTopics: []string{"out"},
		Redpanda: host.RedpandaConfig{InputTopic: "in"},
		Async: host.AsyncConfig{
			Config: asyncop.Config{SchemaRegistry: asyncop.SchemaRegistry{Enabled: true, RegisterSubjects: []string{"rp-" + run + "-created-*"}}},
			Key:    "pipelines.rp.async",
			Env:    asyncop.Env{Schemas: client},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	in, err := m.NewInstance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close(ctx)

	const created = `{"type":"record","name":"Created","namespace":"shop","fields":[{"name":"a","type":"int"}]}`
	frame := append([]byte{0, byte(ss.ID >> 24), byte(ss.ID >> 16), byte(ss.ID >> 8), byte(ss.ID)}, "payload"...)
	recs := []abi.Record{
		{Topic: "in", Value: frame},
		{Topic: "in", Value: []byte(fmt.Sprintf("subject:%s:%d", subject, ss.Version))},
		{Topic: "in", Value: []byte("create:rp-" + run + "-created-value:" + created)},
		{Topic: "in", Value: []byte("create:rp-" + run + "-other-value:" + created)},
		{Topic: "in", Value: []byte{0, 0x7f, 0xff, 0xff, 0xf0}},
	}
	batch := make([]host.BatchRecord, len(recs))
	for i := range recs {
		batch[i] = host.BatchRecord{Rec: &recs[i]}
	}
	outs := make([]host.Outcome, len(recs))
	start := time.Now()
	if ran := in.ProcessBatch(ctx, batch, outs); ran != len(recs) {
		t.Fatalf("ran %d of %d: %+v", ran, len(recs), outs[min(ran, len(outs)-1)])
	}
	t.Logf("%d records in %s", len(recs), time.Since(start))
	value := func(i int) string {
		t.Helper()
		if o := outs[i]; o.Status != abi.StatusOK || len(o.Outputs) != 1 {
			t.Fatalf("record %d: %v %v, %d outputs", i, o.Status, o.Err, len(o.Outputs))
		}
		return string(outs[i].Outputs[0].Value)
	}
	// Apicurio gives the text back as registered, or canonicalised: the
	// record's name is in both.
	if v := value(0); !strings.Contains(v, `"Order"`) || string(outs[0].Outputs[0].Key) != fmt.Sprintf("id:%d", ss.ID) {
		t.Errorf("by id: key %q value %q", outs[0].Outputs[0].Key, v)
	}
	if v := value(1); !strings.HasPrefix(v, fmt.Sprintf("id=%d version=%d ", ss.ID, ss.Version)) || !strings.Contains(v, `"Order"`) {
		t.Errorf("by subject: %q", v)
	}
	got, err := admin.SchemaByVersion(ctx, "rp-"+run+"-created-value", -1)
	if err != nil {
		t.Fatalf("the registration is not in the registry: %v", err)
	}
	if v := value(2); v != fmt.Sprintf("id=%d", got.ID) {
		t.Errorf("create: %q, the registry holds id %d", v, got.ID)
	}
	if v := value(3); v != refused {
		t.Errorf("create under a subject not allowed: %q", v)
	}
	if v := value(4); !strings.HasPrefix(v, unknown) {
		t.Errorf("unknown id: %q", v)
	}
}
