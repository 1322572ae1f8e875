package scheduler

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// A Redpanda transform that reads the schema registry through the Go SDK's
// sr package (tests/redpanda/redpanda-go-sr) runs in a pipeline whose
// async.schema_registry grants it: the pipeline's section and the
// process's registry (schema_registry.url) reach redpanda_schema_registry
// (host/redpanda_sr.go).

// rpSRBuild is the transform, built once per test binary.
var rpSRBuild struct {
	sync.Mutex
	wasm []byte
}

// redpandaSRTransform builds the transform (once) and writes it to the
// test's directory.
func redpandaSRTransform(t *testing.T) string {
	t.Helper()
	rpSRBuild.Lock()
	defer rpSRBuild.Unlock()
	if rpSRBuild.wasm == nil {
		p := filepath.Join(t.TempDir(), "build.wasm")
		cmd := exec.Command("go", "build", "-o", p, ".")
		cmd.Dir = filepath.Join(wt.RepoRoot(t), "tests/redpanda/redpanda-go-sr")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build tests/redpanda/redpanda-go-sr: %v\n%s", err, out)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rpSRBuild.wasm = b
	}
	p := filepath.Join(t.TempDir(), "redpanda_go_sr.wasm")
	if err := os.WriteFile(p, rpSRBuild.wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func rpFramed(id int, payload string) []byte {
	return append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, payload...)
}

// Every record framed with schema id 4 comes out as the schema's text, the
// registry asked once for it; the record of id 5, which the registry
// answers 503, is not answered to the transform: it fails as a trap and is
// dead-lettered, and the offsets are committed up to the end.
func TestRedpandaSchemaRegistryPipeline(t *testing.T) {
	t.Parallel() // owns its in-process broker and registry; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq")
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("users-value", 1, 4, sr.Schema{Schema: `"string"`})
	reg.SeedSchema("orders-value", 1, 5, sr.Schema{Schema: `"long"`})
	var byID4 atomic.Int64
	reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		switch r.URL.Path {
		case "/schemas/ids/4":
			byID4.Add(1)
		case "/schemas/ids/5":
			http.Error(w, `{"error_code":50301,"message":"unavailable"}`, http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	const n = 200
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprintf("k%d", i)), Value: rpFramed(4, fmt.Sprint(i))})
	}
	recs = append(recs, &kgo.Record{Topic: "in", Key: []byte("unavailable"), Value: rpFramed(5, "")})
	if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfigWith(t, brokers, "g", redpandaSRTransform(t), "in", "out", "dlq",
		"    async:\n      schema_registry: {enabled: true}", schemaTop(reg, ""))
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())

	out := kafkatest.NewReader(t, brokers, "out")
	out.ReadUntil(t, time.Minute, "an output for every record of id 4", func(rs []*kgo.Record) bool { return len(rs) >= n })
	for _, rec := range out.Recs {
		if string(rec.Key) != "id:4" || string(rec.Value) != `"string"` {
			t.Fatalf("output key %q value %q, want id:4 and the schema's text", rec.Key, rec.Value)
		}
	}
	dlq := kafkatest.NewReader(t, brokers, "dlq")
	dlq.ReadUntil(t, time.Minute, "the record of id 5 dead-lettered", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	d := dlq.Recs[0]
	if string(d.Key) != "unavailable" || kafkatest.Header(d, HeaderErrorKind) != "fault.trap" ||
		!strings.Contains(kafkatest.Header(d, HeaderError), "redpanda_schema_registry") {
		t.Fatalf("dead letter %q, kind %q, error %q", d.Key, kafkatest.Header(d, HeaderErrorKind), kafkatest.Header(d, HeaderError))
	}
	kafkatest.Eventually(t, 30*time.Second, "offsets committed up to the end", func() bool {
		sum := int64(0)
		for _, o := range kafkatest.Committed(t, brokers, cfg.GroupID(&cfg.Pipelines[0]), "in") {
			sum += o
		}
		return sum == n+1
	})
	if got := byID4.Load(); got != 1 {
		t.Errorf("%d registry requests for id 4, want 1 for the host", got)
	}
}

// A pipeline that does not grant the registry does not start: the error
// names the import and the key.
func TestRedpandaSchemaRegistryPipelineNotGranted(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	reg := srfake.New()
	defer reg.Close()
	cfg := testConfigWith(t, brokers, "g", redpandaSRTransform(t), "in", "out", "dlq", "", schemaTop(reg, ""))
	r, err := NewRunner(context.Background(), cfg, testLogger(t))
	if err == nil {
		r.Stop(context.Background())
		t.Fatal("started without async.schema_registry.enabled")
	}
	if !strings.Contains(err.Error(), "pipelines.p.async.schema_registry.enabled") || !strings.Contains(err.Error(), "redpanda_schema_registry.") {
		t.Fatalf("%v: want the import and pipelines.p.async.schema_registry.enabled named", err)
	}
}
