package host

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/asyncop"
	"github.com/wasmstream/wasmstream/internal/schemareg"
)

// Conformance of redpanda_schema_registry (redpanda_sr.go) with
// transforms built from the Go SDK v1.1.0's sr package
// (tests/redpanda/redpanda-go-sr) and the Rust crate
// redpanda-transform-sdk-sr 1.1.0 (tests/redpanda/redpanda-rust-sr),
// against franz-go's fake registry.

// rpSRRegistry is a fake registry that counts the requests for each path
// and answers 503 to those fail names.
type rpSRRegistry struct {
	*srfake.Registry
	mu    sync.Mutex
	count map[string]int
	fail  map[string]bool
	hang  map[string]bool
}

func newRPSRRegistry(t testing.TB) *rpSRRegistry {
	r := &rpSRRegistry{Registry: srfake.New(), count: map[string]int{}, fail: map[string]bool{}, hang: map[string]bool{}}
	t.Cleanup(r.Close)
	r.Intercept(func(w http.ResponseWriter, req *http.Request) bool {
		r.mu.Lock()
		r.count[req.URL.Path]++
		fail, hang := r.fail[req.URL.Path], r.hang[req.URL.Path]
		r.mu.Unlock()
		switch {
		case hang:
			<-req.Context().Done()
			return true
		case fail:
			http.Error(w, `{"error_code":50301,"message":"unavailable"}`, http.StatusServiceUnavailable)
			return true
		}
		return false
	})
	r.SeedSchema("users-value", 1, 4, sr.Schema{Schema: `"string"`, Type: sr.TypeAvro})
	r.SeedSchema("events-value", 1, 7, sr.Schema{Schema: `{"type":"object"}`, Type: sr.TypeJSON})
	return r
}

func (r *rpSRRegistry) requests(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count[path]
}

func (r *rpSRRegistry) set(m map[string]bool, path string) {
	r.mu.Lock()
	m[path] = true
	r.mu.Unlock()
}

// rpSRConfig grants the registry of client to the test pipeline: lookups,
// and registrations under "created-*".
func rpSRConfig(client *schemareg.Client, lim Limits) ModuleConfig {
	cfg := rpConfig(lim)
	cfg.Async = AsyncConfig{
		Config: asyncop.Config{SchemaRegistry: asyncop.SchemaRegistry{Enabled: true, RegisterSubjects: []string{"created-*"}}},
		Key:    "pipelines.test.async",
		Env:    asyncop.Env{Schemas: client},
	}
	return cfg
}

func rpSRClient(t testing.TB, url string, timeout time.Duration) *schemareg.Client {
	c, err := schemareg.New(schemareg.Config{URL: url, RequestTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// framed is a value in the registry's wire format: magic byte 0, the
// schema id (big-endian), the payload.
func framed(id int, payload string) []byte {
	return append([]byte{0, byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}, payload...)
}

// rpSRTransforms are the SDK-built transforms that read the registry: the
// Go SDK's sr package and the Rust crate redpanda-transform-sdk-sr, both
// 1.1.0, and the error each SDK reports for "not found" and a refused
// registration (the Rust crate's is its errno).
func rpSRTransforms() map[string]struct {
	build                    func(testing.TB) []byte
	noID, noSubject, refused string
} {
	type sdk = struct {
		build                    func(testing.TB) []byte
		noID, noSubject, refused string
	}
	return map[string]sdk{
		"go": {func(t testing.TB) []byte { return rpGoTransform(t, "tests/redpanda/redpanda-go-sr") },
			"error: unable to find a schema definition with id 99", "error: unable to find a schema missing-value with version 1", "error: unable to create new schema"},
		"rust": {func(t testing.TB) []byte { return rustGuest(t, "tests/redpanda/redpanda-rust-sr") },
			"error: writing record failed with errno: -1", "error: writing record failed with errno: -1", "error: writing record failed with errno: -1"},
	}
}

func TestRedpandaSchemaRegistrySDKs(t *testing.T) {
	t.Parallel()
	for name, sdk := range rpSRTransforms() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testRedpandaSchemaRegistry(t, sdk.build(t), sdk.noID, sdk.noSubject, sdk.refused)
		})
	}
}

func testRedpandaSchemaRegistry(t *testing.T, wasm []byte, noID, noSubject, refused string) {
	reg := newRPSRRegistry(t)
	client := rpSRClient(t, reg.URL(), 5*time.Second)
	in := rpInstanceOf(t, rpLoad(t, wasm, rpSRConfig(client, Limits{})))

	const avro = `{"type":"record","name":"created","fields":[{"name":"a","type":"int"}]}`
	recs := []abi.Record{
		{Topic: "in", Value: framed(4, "payload")},
		{Topic: "in", Value: framed(7, "{}")},
		{Topic: "in", Value: []byte("subject:users-value:1")},
		{Topic: "in", Value: []byte("subject:events-value:-1")},
		{Topic: "in", Value: framed(99, "")},
		{Topic: "in", Value: []byte("subject:missing-value:1")},
		{Topic: "in", Value: []byte("create:created-one:" + avro)},
		{Topic: "in", Value: []byte("create:other:" + avro)},
	}
	want := []struct{ key, value, typ string }{
		{"id:4", `"string"`, "0"},
		{"id:7", `{"type":"object"}`, "2"},
		{"", `id=4 version=1 "string"`, ""},
		{"", `id=7 version=1 {"type":"object"}`, ""},
		{"", noID, ""},
		{"", noSubject, ""},
		{"", "id=", ""},
		{"", refused, ""},
	}
	out := make([]Outcome, len(recs))
	if ran := in.ProcessBatch(context.Background(), rpBatchOf(recs), out); ran != len(recs) {
		t.Fatalf("ran %d of %d: %+v", ran, len(recs), out[min(ran, len(out)-1)])
	}
	for i, o := range out {
		if o.Status != abi.StatusOK || len(o.Outputs) != 1 {
			t.Fatalf("record %d: %v %v, %d outputs", i, o.Status, o.Err, len(o.Outputs))
		}
		got := o.Outputs[0]
		typ := ""
		if len(got.Headers) == 1 && got.Headers[0].Key == "type" {
			typ = string(got.Headers[0].Value)
		}
		if w := want[i]; (w.key != "" && string(got.Key) != w.key) || !strings.HasPrefix(string(got.Value), w.value) || typ != w.typ {
			t.Errorf("record %d: key %q value %q type %q, want %q %q %q", i, got.Key, got.Value, typ, w.key, w.value, w.typ)
		}
	}
	s, ok := reg.GetSchema("created-one", 1)
	if !ok {
		t.Fatal("created-one holds no schema")
	}
	if v := string(out[6].Outputs[0].Value); v != fmt.Sprintf("id=%d", s.ID) {
		t.Errorf("create answered %q, the registry holds id %d", v, s.ID)
	}
	if reg.SubjectExists("other") {
		t.Error("registered under a subject register_subjects does not allow")
	}

	// One registry request per new id per host: another module's instance
	// (no guest cache shared) reads id 4 from the client's cache.
	in2 := rpInstanceOf(t, rpLoad(t, wasm, rpSRConfig(client, Limits{})))
	one := []abi.Record{{Topic: "in", Value: framed(4, "")}}
	o := make([]Outcome, 1)
	if in2.ProcessBatch(context.Background(), rpBatchOf(one), o) != 1 || o[0].Status != abi.StatusOK || string(o[0].Outputs[0].Value) != `"string"` {
		t.Fatalf("second module: %+v", o[0])
	}
	if n := reg.requests("/schemas/ids/4"); n != 1 {
		t.Errorf("%d registry requests for id 4, want 1", n)
	}
}

// A subject's latest version is asked again at each lookup (within the
// registry client's refresh_period), not kept by the instance from an
// earlier record: a version registered meanwhile reaches the same
// instance.
func TestRedpandaSchemaRegistryLatestMoves(t *testing.T) {
	t.Parallel()
	reg := newRPSRRegistry(t)
	client, err := schemareg.New(schemareg.Config{URL: reg.URL(), RequestTimeout: 5 * time.Second, RefreshPeriod: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	in := rpInstanceOf(t, rpLoad(t, rpGoTransform(t, "tests/redpanda/redpanda-go-sr"), rpSRConfig(client, Limits{})))
	latest := func() string {
		t.Helper()
		recs := []abi.Record{{Topic: "in", Value: []byte("subject:users-value:-1")}}
		out := make([]Outcome, 1)
		if in.ProcessBatch(context.Background(), rpBatchOf(recs), out) != 1 || out[0].Status != abi.StatusOK || len(out[0].Outputs) != 1 {
			t.Fatalf("lookup: %+v", out[0])
		}
		return string(out[0].Outputs[0].Value)
	}
	if v := latest(); v != `id=4 version=1 "string"` {
		t.Fatalf("latest: %q", v)
	}
	id, version, err := reg.RegisterSchema("users-value", sr.Schema{Schema: `["null","string"]`})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`id=%d version=%d ["null","string"]`, id, version)
	for end := time.Now().Add(10 * time.Second); ; {
		v := latest()
		if v == want {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("latest still %q 10s after version %d was registered", v, version)
		}
		time.Sleep(20 * time.Millisecond) // the refresh period is the client's
	}
}

// A record's registry operations are bounded as a wasmstream module's
// asynchronous ones (async.max_per_record): past the bound a lookup fails
// to the transform, the next record has its own; answers the instance
// kept do not count.
func TestRedpandaSchemaRegistryPerRecordBound(t *testing.T) {
	t.Parallel()
	reg := newRPSRRegistry(t)
	reg.SeedSchema("c-value", 1, 8, sr.Schema{Schema: `"int"`})
	reg.SeedSchema("d-value", 1, 9, sr.Schema{Schema: `"long"`})
	cfg := rpSRConfig(rpSRClient(t, reg.URL(), 5*time.Second), Limits{})
	cfg.Async.MaxPerRecord = 2
	in := rpInstanceOf(t, rpLoad(t, rpGoTransform(t, "tests/redpanda/redpanda-go-sr"), cfg))
	recs := []abi.Record{
		{Topic: "in", Value: []byte("ids:4,7,8")},   // the third is one too many
		{Topic: "in", Value: []byte("ids:9,4")},     // a record of its own: two (not 8, which the SDK now holds as nil)
		{Topic: "in", Value: []byte("ids:4,4,4,4")}, // the same id: kept by the instance
	}
	want := []string{
		`"string"|{"type":"object"}|error: unable to find a schema definition with id 8`,
		`"long"|"string"`,
		`"string"|"string"|"string"|"string"`,
	}
	out := make([]Outcome, len(recs))
	if ran := in.ProcessBatch(context.Background(), rpBatchOf(recs), out); ran != len(recs) {
		t.Fatalf("ran %d of %d: %+v", ran, len(recs), out[min(ran, len(out)-1)])
	}
	for i, o := range out {
		if o.Status != abi.StatusOK || len(o.Outputs) != 1 || string(o.Outputs[0].Value) != want[i] {
			t.Errorf("record %d: %v %v %v, want %q", i, o.Status, o.Err, o.Outputs, want[i])
		}
	}
}

// A transform importing redpanda_schema_registry is refused at load
// unless its pipeline grants the registry, naming the key.
func TestRedpandaSchemaRegistryNotGranted(t *testing.T) {
	t.Parallel()
	reg := newRPSRRegistry(t)
	cfg := rpSRConfig(rpSRClient(t, reg.URL(), 5*time.Second), Limits{})
	cfg.Async.Config.SchemaRegistry = asyncop.SchemaRegistry{}
	ctx := context.Background()
	m, err := newEngine(t).Load(ctx, rpGoTransform(t, "tests/redpanda/redpanda-go-sr"), cfg)
	if err == nil {
		m.Close(ctx)
		t.Fatal("loaded without the registry granted")
	}
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "pipelines.test.async.schema_registry.enabled") ||
		!strings.Contains(err.Error(), "redpanda_schema_registry.get_schema_definition_len") {
		t.Fatalf("%v: want ErrIncompatible naming the import and pipelines.test.async.schema_registry.enabled", err)
	}
}

// An answer that may differ next time is not the transform's: a registry
// answering 503 fails the record (retryable, the instance ended) and the
// transform writes nothing for it; one that does not answer fails it at
// the record's deadline, well before the client's request timeout.
func TestRedpandaSchemaRegistryUnavailable(t *testing.T) {
	t.Parallel()
	reg := newRPSRRegistry(t)
	// Ids no subject lookup has brought into the client's cache.
	reg.SeedSchema("a-value", 1, 5, sr.Schema{Schema: `"int"`})
	reg.SeedSchema("b-value", 1, 6, sr.Schema{Schema: `"long"`})
	reg.set(reg.fail, "/schemas/ids/5")
	reg.set(reg.hang, "/schemas/ids/6")
	wasm := rpGoTransform(t, "tests/redpanda/redpanda-go-sr")
	for _, c := range []struct {
		id   int
		kind FaultKind
		says string
	}{
		{5, FaultTrap, "503"},
		{6, FaultDeadline, "deadline"},
	} {
		timeout := 2 * time.Second
		m := rpLoad(t, wasm, rpSRConfig(rpSRClient(t, reg.URL(), time.Minute), Limits{RecordTimeout: timeout}))
		in := rpInstanceOf(t, m)
		recs := []abi.Record{{Topic: "in", Value: []byte("subject:users-value:1")}, {Topic: "in", Value: framed(c.id, "")}}
		out := make([]Outcome, len(recs))
		start := time.Now()
		ran := in.ProcessBatch(context.Background(), rpBatchOf(recs), out)
		took := time.Since(start)
		if ran != 2 || out[0].Status != abi.StatusOK {
			t.Fatalf("id %d: ran %d, record 0 %+v", c.id, ran, out[0])
		}
		f := out[1].Fault()
		if out[1].Status != abi.StatusRetry || f == nil || f.Kind != c.kind || len(out[1].Outputs) != 0 ||
			!strings.Contains(f.Msg, "redpanda_schema_registry") || !strings.Contains(f.Msg, c.says) {
			t.Fatalf("id %d: %v %v, outputs %v; want a %s fault saying %q", c.id, out[1].Status, out[1].Err, out[1].Outputs, c.kind, c.says)
		}
		t.Logf("id %d: %s after %s", c.id, f, took)
		if took > timeout+5*time.Second {
			t.Errorf("id %d: the batch took %s with a record timeout of %s", c.id, took, timeout)
		}
		if !in.Dead() {
			t.Errorf("id %d: instance alive after the fault", c.id)
		}
	}
}

// BenchmarkRedpandaSchemaLookup: a record whose framed value the
// transform looks up by id (an id the host's client has cached), beside
// the identity transform of the same SDK. The Go SDK 1.1.0's default
// client does not cache a schema it found, so each record makes the two
// host calls (the length, then the copy; one operation, the second call
// answered from the instance's last answer); the Rust crate's client
// caches it, so its records reach the host once per id.
func BenchmarkRedpandaSchemaLookup(b *testing.B) {
	reg := newRPSRRegistry(b)
	client := rpSRClient(b, reg.URL(), 5*time.Second)
	framedRecs := make([]abi.Record, 100)
	plain := make([]abi.Record, 100)
	for i := range framedRecs {
		framedRecs[i] = abi.Record{Topic: "in", Offset: int64(i), Key: []byte("key"), Value: framed(4, "payload")}
		plain[i] = abi.Record{Topic: "in", Offset: int64(i), Key: []byte("key"), Value: framed(4, "payload")}
	}
	for _, c := range []struct {
		name string
		wasm func(testing.TB) []byte
		recs []abi.Record
	}{
		{"go-identity", func(t testing.TB) []byte { return rpGoTransform(t, "tests/redpanda/redpanda-go-identity") }, plain},
		{"go-sr-by-id", func(t testing.TB) []byte { return rpGoTransform(t, "tests/redpanda/redpanda-go-sr") }, framedRecs},
		{"rust-identity", func(t testing.TB) []byte { return rustGuest(t, "tests/redpanda/redpanda-rust") }, plain},
		{"rust-sr-by-id", func(t testing.TB) []byte { return rustGuest(t, "tests/redpanda/redpanda-rust-sr") }, framedRecs},
	} {
		b.Run(c.name, func(b *testing.B) {
			in := rpInstanceOf(b, rpLoad(b, c.wasm(b), rpSRConfig(client, Limits{})))
			batch := rpBatchOf(c.recs)
			out := make([]Outcome, len(batch))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if ran := in.ProcessBatch(context.Background(), batch, out); ran != len(batch) || out[0].Status != abi.StatusOK {
					b.Fatalf("ran %d: %v", ran, out[max(ran-1, 0)].Err)
				}
				for j := range out {
					in.m.held.release(out[j].HeldBytes)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/rec")
		})
	}
	if n := reg.requests("/schemas/ids/4"); n != 1 {
		b.Errorf("%d registry requests for id 4, want 1", n)
	}
}
