package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// Conformance of the Redpanda transform kind (redpanda.go,
// redpanda_instance.go) with transforms built from Redpanda's published
// SDKs — Go (transform-sdk/go/transform v1.1.0, standard Go GOOS=wasip1)
// and Rust (redpanda-transform-sdk 1.1.0, wasm32-wasip1), both under
// tests/redpanda — and hand-written modules for the shapes this machine
// cannot compile (tests/redpanda/wat).

var rpGoBuild sync.Map // dir -> func() ([]byte, error)

// rpGoTransform builds the Go transform in dir (relative to the repository
// root; a module of its own requiring the SDK by exact version) once per
// test binary.
func rpGoTransform(t testing.TB, dir string) []byte {
	t.Helper()
	f, _ := rpGoBuild.LoadOrStore(dir, sync.OnceValues(func() ([]byte, error) {
		out := filepath.Join(os.TempDir(), fmt.Sprintf("wasmstream-rp-%d-%s.wasm", os.Getpid(), filepath.Base(dir)))
		defer os.Remove(out)
		cmd := exec.Command("go", "build", "-o", out, ".")
		cmd.Dir = filepath.Join(wt.RepoRoot(t), dir)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build %s: %v\n%s", dir, err, b)
		}
		return os.ReadFile(out)
	}))
	b, err := f.(func() ([]byte, error))()
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(b)
}

// rpTransforms are the SDK-built transforms every conformance case runs.
func rpTransforms(t *testing.T) map[string]func(testing.TB) []byte {
	return map[string]func(testing.TB) []byte{
		"go":   func(t testing.TB) []byte { return rpGoTransform(t, "tests/redpanda/redpanda-go") },
		"rust": func(t testing.TB) []byte { return rustGuest(t, "tests/redpanda/redpanda-rust") },
	}
}

// rpConfig is the pipeline the tests run transforms in: input "in", output
// "out", a second output "second".
func rpConfig(lim Limits) ModuleConfig {
	return ModuleConfig{Name: "test", Limits: lim, AllowedTopics: []string{"out", "second"},
		Env: map[string]string{"TEST_A": "1"}, Redpanda: RedpandaConfig{InputTopic: "in"}}
}

func rpLoad(t testing.TB, wasm []byte, cfg ModuleConfig) *Module {
	t.Helper()
	m, err := newEngine(t).Load(context.Background(), wasm, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func rpInstanceOf(t testing.TB, m *Module) *Instance {
	t.Helper()
	in := newInstance(t, m)
	t.Cleanup(func() { in.Close(context.Background()) })
	return in
}

// rpRecords are records whose identity must come back byte for byte: null
// and empty keys and values kept apart, headers with null and empty
// values, and a record larger than the SDKs' first buffer (128 bytes in
// Go's).
func rpRecords() []abi.Record {
	big := bytes.Repeat([]byte("0123456789abcdef"), 4096) // 64 KiB
	return []abi.Record{
		{Topic: "in", Offset: 10, Timestamp: 1700000000001, Key: []byte("k"), Value: []byte("v"), Headers: []abi.Header{{Key: "h", Value: []byte("x")}, {Key: "null", Value: nil}, {Key: "empty", Value: []byte{}}}},
		{Topic: "in", Offset: 11, Timestamp: 1700000000002, Key: nil, Value: nil},
		{Topic: "in", Offset: 12, Timestamp: 1700000000003, Key: []byte{}, Value: []byte{}},
		{Topic: "in", Offset: 13, Timestamp: 1700000000004, Key: nil, Value: []byte{}},
		{Topic: "in", Offset: 14, Timestamp: 1700000000005, Key: []byte{}, Value: nil},
		{Topic: "in", Offset: 15, Timestamp: 1700000000006, Key: []byte("big"), Value: big, Headers: []abi.Header{{Key: "a", Value: big[:300]}}},
		{Topic: "in", Offset: 16, Timestamp: 1700000000007, Key: []byte{0, 0xff}, Value: []byte("Grüße, 世界")},
	}
}

func rpBatchOf(recs []abi.Record) []BatchRecord {
	b := make([]BatchRecord, len(recs))
	for i := range recs {
		b[i] = BatchRecord{Rec: &recs[i], Tag: i}
	}
	return b
}

// sameOutput reports how o differs from an identity copy of r to topic.
func sameOutput(o abi.Output, r *abi.Record, topic string) string {
	switch {
	case o.Topic != topic:
		return fmt.Sprintf("topic %q, want %q", o.Topic, topic)
	case o.Partition != -1:
		return fmt.Sprintf("partition %d, want -1 (the partitioner's)", o.Partition)
	case !bytes.Equal(o.Key, r.Key) || (o.Key == nil) != (r.Key == nil):
		return fmt.Sprintf("key %q (nil %v), want %q (nil %v)", o.Key, o.Key == nil, r.Key, r.Key == nil)
	case !bytes.Equal(o.Value, r.Value) || (o.Value == nil) != (r.Value == nil):
		return fmt.Sprintf("value of %d bytes (nil %v), want %d (nil %v)", len(o.Value), o.Value == nil, len(r.Value), r.Value == nil)
	case len(o.Headers) != len(r.Headers):
		return fmt.Sprintf("%d headers, want %d", len(o.Headers), len(r.Headers))
	}
	for i, h := range o.Headers {
		w := r.Headers[i]
		if h.Key != w.Key || !bytes.Equal(h.Value, w.Value) || (h.Value == nil) != (w.Value == nil) {
			return fmt.Sprintf("header %d %q=%q (nil %v), want %q=%q (nil %v)", i, h.Key, h.Value, h.Value == nil, w.Key, w.Value, w.Value == nil)
		}
	}
	return ""
}

func TestRedpandaKindRecognised(t *testing.T) {
	for name, build := range rpTransforms(t) {
		m := rpLoad(t, build(t), rpConfig(Limits{}))
		if info := m.Info(); info.Kind != KindRedpanda || !info.Batch || info.ABIVersion != 0 {
			t.Errorf("%s: info %+v, want kind %s, batch", name, info, KindRedpanda)
		}
	}
	if info := load(t, guest(t, "plugins/examples/uppercase"), Limits{}).Info(); info.Kind != KindWasmstream {
		t.Errorf("uppercase: kind %q, want %s", info.Kind, KindWasmstream)
	}
}

func TestRedpandaIdentity(t *testing.T) {
	for name, build := range rpTransforms(t) {
		t.Run(name, func(t *testing.T) {
			in := rpInstanceOf(t, rpLoad(t, build(t), rpConfig(Limits{})))
			recs := rpRecords()
			for round := 0; round < 3; round++ { // the guest reuses its buffers across batches
				out := make([]Outcome, len(recs))
				if ran := in.ProcessBatch(context.Background(), rpBatchOf(recs), out); ran != len(recs) {
					t.Fatalf("round %d: ran %d of %d: %+v", round, ran, len(recs), out[min(ran, len(out)-1)])
				}
				for i, o := range out {
					if o.Status != abi.StatusOK || len(o.Outputs) != 1 {
						t.Fatalf("round %d record %d: %v %v, %d outputs", round, i, o.Status, o.Err, len(o.Outputs))
					}
					if d := sameOutput(o.Outputs[0], &recs[i], ""); d != "" {
						t.Errorf("round %d record %d: %s", round, i, d)
					}
				}
			}
			// A single record goes through Process the same way.
			r := recs[0]
			if res := in.Process(context.Background(), &r, nil); res.Status != abi.StatusOK || len(res.Outputs) != 1 || sameOutput(res.Outputs[0], &r, "") != "" {
				t.Fatalf("Process: %+v", res)
			}
		})
	}
}

func TestRedpandaRouting(t *testing.T) {
	for name, build := range rpTransforms(t) {
		t.Run(name, func(t *testing.T) {
			m := rpLoad(t, build(t), rpConfig(Limits{}))
			in := rpInstanceOf(t, m)
			recs := []abi.Record{
				{Topic: "in", Offset: 1, Value: []byte("route:second")},
				{Topic: "in", Offset: 2, Value: []byte("route:out")}, // output 0 by name: the pipeline's output
				{Topic: "in", Offset: 3, Value: []byte("twice")},
				{Topic: "in", Offset: 4, Value: []byte("route:unlisted")},
				{Topic: "in", Offset: 5, Value: []byte("never run")},
			}
			out := make([]Outcome, len(recs))
			ran := in.ProcessBatch(context.Background(), rpBatchOf(recs), out)
			if ran != 4 {
				t.Fatalf("ran %d, want 4 (the write to an unlisted topic fails the transform)", ran)
			}
			want := [][]string{{"second", ""}, {"", ""}, {"", ""}}
			for i, topics := range want {
				o := out[i]
				if o.Status != abi.StatusOK || len(o.Outputs) != len(topics) {
					t.Fatalf("record %d: %v %v, %d outputs", i, o.Status, o.Err, len(o.Outputs))
				}
				for j, tp := range topics {
					if d := sameOutput(o.Outputs[j], &recs[i], tp); d != "" {
						t.Errorf("record %d output %d: %s", i, j, d)
					}
				}
			}
			// The SDKs turn the write's -3 into an error from the callback,
			// and that into a panic: the record fails, the instance with it.
			f := out[3].Fault()
			if out[3].Status != abi.StatusRetry || f == nil || (f.Kind != FaultPanic && f.Kind != FaultTrap) {
				t.Fatalf("record 3: %v %v, want a panic or trap", out[3].Status, out[3].Err)
			}
			if !strings.Contains(f.Error(), "-3") {
				t.Errorf("record 3's fault does not show the write's -3: %v", f)
			}
			if !in.Dead() {
				t.Fatal("the instance lives on after its transform failed")
			}
		})
	}
}

func TestRedpandaEnvAndTime(t *testing.T) {
	for name, build := range rpTransforms(t) {
		t.Run(name, func(t *testing.T) {
			in := rpInstanceOf(t, rpLoad(t, build(t), rpConfig(Limits{})))
			recs := []abi.Record{
				{Topic: "in", Timestamp: 1700000000123, Value: []byte("time")},
				{Topic: "in", Timestamp: 1600000000456, Value: []byte("time")}, // the clock follows the record, back in time too
				{Topic: "in", Timestamp: 1700000000789, Value: []byte("env")},
			}
			out := make([]Outcome, len(recs))
			if ran := in.ProcessBatch(context.Background(), rpBatchOf(recs), out); ran != len(recs) {
				t.Fatalf("ran %d: %v", ran, out[min(ran, len(out)-1)].Err)
			}
			wantVals := []string{"1700000000123", "1600000000456",
				"REDPANDA_INPUT_TOPIC=in\nREDPANDA_OUTPUT_TOPIC_0=out\nREDPANDA_OUTPUT_TOPIC_1=second\nTEST_A=1"}
			for i, w := range wantVals {
				if o := out[i]; o.Status != abi.StatusOK || len(o.Outputs) != 1 || string(o.Outputs[0].Value) != w {
					t.Errorf("record %d: %v %v %q, want %q", i, o.Status, o.Err, outputValues(o.Outputs), w)
				}
			}
		})
	}
}

func outputValues(outs []abi.Output) []string {
	var s []string
	for _, o := range outs {
		s = append(s, string(o.Value))
	}
	return s
}

// TestRedpandaRandomIsConstant: Redpanda's random_get fills with 9, so a
// transform is deterministic; the Go transform reads crypto/rand.
func TestRedpandaRandomIsConstant(t *testing.T) {
	in := rpInstanceOf(t, rpLoad(t, rpGoTransform(t, "tests/redpanda/redpanda-go"), rpConfig(Limits{})))
	r := abi.Record{Topic: "in", Value: []byte("random")}
	res := in.Process(context.Background(), &r, nil)
	if res.Status != abi.StatusOK || len(res.Outputs) != 1 || !bytes.Equal(res.Outputs[0].Value, bytes.Repeat([]byte{9}, 8)) {
		t.Fatalf("%v %v %v", res.Status, res.Err, outputValues(res.Outputs))
	}
}

// TestRedpandaPanicFailsItsRecord: a transform that panics on one record
// fails that record (its writes dropped) and the instance; the records
// before it keep their outcomes, the ones after it were not run and run on
// a fresh instance.
func TestRedpandaPanicFailsItsRecord(t *testing.T) {
	for name, build := range rpTransforms(t) {
		t.Run(name, func(t *testing.T) {
			m := rpLoad(t, build(t), rpConfig(Limits{}))
			in := rpInstanceOf(t, m)
			recs := []abi.Record{
				{Topic: "in", Offset: 1, Value: []byte("a")},
				{Topic: "in", Offset: 2, Value: []byte("b")},
				{Topic: "in", Offset: 3, Value: []byte("panic")},
				{Topic: "in", Offset: 4, Value: []byte("d")},
			}
			out := make([]Outcome, len(recs))
			if ran := in.ProcessBatch(context.Background(), rpBatchOf(recs), out); ran != 3 {
				t.Fatalf("ran %d, want 3", ran)
			}
			for i := range 2 {
				if out[i].Status != abi.StatusOK || len(out[i].Outputs) != 1 {
					t.Fatalf("record %d: %v %v", i, out[i].Status, out[i].Err)
				}
			}
			f := out[2].Fault()
			if out[2].Status != abi.StatusRetry || f == nil || out[2].Outputs != nil {
				t.Fatalf("record 2: %+v", out[2])
			}
			if !strings.Contains(f.Error(), "asked to panic") {
				t.Errorf("the fault does not carry the transform's message: %v", f)
			}
			if !in.Dead() {
				t.Fatal("instance alive after a panic")
			}
			fresh := rpInstanceOf(t, m)
			rest := recs[3:]
			out = out[:1]
			if ran := fresh.ProcessBatch(context.Background(), rpBatchOf(rest), out); ran != 1 || out[0].Status != abi.StatusOK {
				t.Fatalf("the record after the panic, on a fresh instance: ran %d, %+v", ran, out[0])
			}
		})
	}
}

// TestRedpandaHandWrittenShapes runs the import sets of the SDKs this
// machine cannot build (C++, and JS on QuickJS built with it) and of the
// development ABI 3.
func TestRedpandaHandWrittenShapes(t *testing.T) {
	for _, wat := range []string{"cpp_shape.wat", "abi3.wat"} {
		t.Run(wat, func(t *testing.T) {
			m := rpLoad(t, wt.BuildWat(t, "tests/redpanda/wat/"+wat), rpConfig(Limits{}))
			if m.Info().Kind != KindRedpanda {
				t.Fatalf("kind %q", m.Info().Kind)
			}
			in := rpInstanceOf(t, m)
			recs := rpRecords()
			for round := 0; round < 2; round++ {
				out := make([]Outcome, len(recs))
				if ran := in.ProcessBatch(context.Background(), rpBatchOf(recs), out); ran != len(recs) {
					t.Fatalf("ran %d: %+v", ran, out[min(ran, len(out)-1)])
				}
				for i, o := range out {
					if o.Status != abi.StatusOK || len(o.Outputs) != 1 || sameOutput(o.Outputs[0], &recs[i], "") != "" {
						t.Fatalf("record %d: %v %v", i, o.Status, o.Err)
					}
				}
			}
		})
	}
}

func TestRedpandaGuestExits(t *testing.T) {
	m := rpLoad(t, wt.BuildWat(t, "tests/redpanda/wat/exits.wat"), rpConfig(Limits{}))
	in := rpInstanceOf(t, m)
	recs := []abi.Record{{Topic: "in", Value: []byte("a")}, {Topic: "in", Value: []byte("exit")}, {Topic: "in", Value: []byte("c")}}
	out := make([]Outcome, len(recs))
	if ran := in.ProcessBatch(context.Background(), rpBatchOf(recs), out); ran != 2 {
		t.Fatalf("ran %d, want 2", ran)
	}
	if out[0].Status != abi.StatusOK {
		t.Fatalf("record 0: %+v", out[0])
	}
	if f := out[1].Fault(); f == nil || f.Kind != FaultExit || !strings.Contains(f.Msg, "code 3") {
		t.Fatalf("record 1: %v, want an exit with code 3", out[1].Err)
	}
	if !in.Dead() {
		t.Fatal("instance alive after its transform exited")
	}
}

// TestRedpandaNeverAsksForNextBatch: a transform that never returns to
// read_batch_header is interrupted at its last record's deadline, which
// fails; the call returns soon after.
func TestRedpandaNeverAsksForNextBatch(t *testing.T) {
	const timeout = 300 * time.Millisecond
	m := rpLoad(t, wt.BuildWat(t, "tests/redpanda/wat/never_next.wat"), rpConfig(Limits{RecordTimeout: timeout}))
	in := rpInstanceOf(t, m)
	recs := []abi.Record{{Topic: "in", Value: []byte("a")}, {Topic: "in", Value: []byte("b")}}
	out := make([]Outcome, len(recs))
	start := time.Now()
	ran := in.ProcessBatch(context.Background(), rpBatchOf(recs), out)
	took := time.Since(start)
	if ran != 2 || out[0].Status != abi.StatusOK {
		t.Fatalf("ran %d, record 0 %+v", ran, out[0])
	}
	if f := out[1].Fault(); f == nil || f.Kind != FaultDeadline {
		t.Fatalf("record 1: %v, want a deadline fault", out[1].Err)
	}
	if took < timeout || took > timeout+5*time.Second {
		t.Errorf("the call took %s with a record timeout of %s", took, timeout)
	}
	if !in.Dead() {
		t.Fatal("instance alive after its deadline")
	}
}

func TestRedpandaRefused(t *testing.T) {
	e := newEngine(t)
	ctx := context.Background()
	cases := []struct {
		name string
		wasm []byte
		cfg  ModuleConfig
		want []string
	}{
		{"_start returns", wt.BuildWat(t, "tests/redpanda/wat/returns.wat"), rpConfig(Limits{}),
			[]string{"_start ended before asking for a batch", "must loop on redpanda_transform.read_batch_header"}},
		{"schema registry", wt.BuildWat(t, "tests/redpanda/wat/schema_registry.wat"), rpConfig(Limits{}),
			[]string{"redpanda_schema_registry.check_abi_version_0", "async.schema_registry.enabled"}},
		{"reserved env", wt.BuildWat(t, "tests/redpanda/wat/cpp_shape.wat"),
			func() ModuleConfig {
				c := rpConfig(Limits{})
				c.Env = map[string]string{"REDPANDA_INPUT_TOPIC": "x"}
				return c
			}(),
			[]string{"env REDPANDA_INPUT_TOPIC", "pipelines.test.env"}},
		{"strict: 9 outputs", wt.BuildWat(t, "tests/redpanda/wat/cpp_shape.wat"),
			func() ModuleConfig {
				c := rpConfig(Limits{})
				c.Redpanda.Strict = true
				c.AllowedTopics = []string{"o0", "o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8"}
				return c
			}(),
			[]string{"9 output topics", "allows 8"}},
		{"strict: standard Go over 2 MiB", rpGoTransform(t, "tests/redpanda/redpanda-go"),
			func() ModuleConfig { c := rpConfig(Limits{}); c.Redpanda.Strict = true; return c }(),
			[]string{"limits.memory_pages", "32 pages"}},
	}
	for _, c := range cases {
		m, err := e.Load(ctx, c.wasm, c.cfg)
		if err == nil {
			m.Close(ctx)
			t.Errorf("%s: loaded", c.name)
			continue
		}
		if !errors.Is(err, ErrIncompatible) {
			t.Errorf("%s: %v is not ErrIncompatible", c.name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\ndoes not say %q", c.name, err, w)
			}
		}
	}
}

// TestRedpandaMemory: the default limit runs a standard-Go transform (over
// Redpanda's 2 MiB), and strict mode's 2 MiB runs the Rust one.
func TestRedpandaMemory(t *testing.T) {
	goIn := rpInstanceOf(t, rpLoad(t, rpGoTransform(t, "tests/redpanda/redpanda-go"), rpConfig(Limits{})))
	if l := goIn.m.Limits().MemoryPages; l != RedpandaMemoryPages {
		t.Fatalf("default limit %d pages, want %d", l, RedpandaMemoryPages)
	}
	strict := rpConfig(Limits{})
	strict.Redpanda.Strict = true
	rustM := rpLoad(t, rustGuest(t, "tests/redpanda/redpanda-rust"), strict)
	if l := rustM.Limits().MemoryPages; l != 32 {
		t.Fatalf("strict limit %d pages, want 32", l)
	}
	rustIn := rpInstanceOf(t, rustM)
	for name, in := range map[string]*Instance{"go": goIn, "rust": rustIn} {
		for round := 0; round < 300; round++ {
			recs := rpRecords()
			out := make([]Outcome, len(recs))
			if ran := in.ProcessBatch(context.Background(), rpBatchOf(recs), out); ran != len(recs) {
				t.Fatalf("%s round %d: ran %d: %v", name, round, ran, out[max(ran-1, 0)].Err)
			}
		}
		t.Logf("%s: %d pages after 300 batches of up to 64 KiB records (limit %d)", name, in.MemoryPages(), in.m.Limits().MemoryPages)
	}
}

// BenchmarkRedpandaBatch: a batch of 100 records of 100 bytes through the
// Redpanda SDKs' identity transforms and through the native uppercase
// guests of the same language, per record, without Kafka.
func BenchmarkRedpandaBatch(b *testing.B) {
	val := bytes.Repeat([]byte("abcdefghij"), 10)
	recs := make([]abi.Record, 100)
	for i := range recs {
		recs[i] = abi.Record{Topic: "in", Offset: int64(i), Key: []byte("key"), Value: val}
	}
	batch := rpBatchOf(recs)
	for _, c := range []struct {
		name string
		wasm func(testing.TB) []byte
		cfg  ModuleConfig
	}{
		{"native-go-uppercase", func(t testing.TB) []byte { return guest(t, "plugins/examples/uppercase") }, ModuleConfig{Name: "test"}},
		{"redpanda-go-identity", func(t testing.TB) []byte { return rpGoTransform(t, "tests/redpanda/redpanda-go-identity") }, rpConfig(Limits{})},
		{"native-rust-uppercase", func(t testing.TB) []byte { return rustGuest(t, "plugins/examples/rust-uppercase") }, ModuleConfig{Name: "test"}},
		{"redpanda-rust-identity", func(t testing.TB) []byte { return rustGuest(t, "tests/redpanda/redpanda-rust") }, rpConfig(Limits{})},
	} {
		b.Run(c.name, func(b *testing.B) {
			in := rpInstanceOf(b, rpLoad(b, c.wasm(b), c.cfg))
			out := make([]Outcome, len(batch))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if ran := in.ProcessBatch(context.Background(), batch, out); ran != len(batch) {
					b.Fatalf("ran %d: %v", ran, out[max(ran-1, 0)].Err)
				}
				for j := range out {
					in.m.held.release(out[j].HeldBytes)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/rec")
		})
	}
}

// TestRedpandaSameAsInputPartition: with PartitionSameAsInput each output,
// routed ones too, is pinned to its input record's partition (the output
// partitioner takes it modulo the topic's partitions); by default none is.
func TestRedpandaSameAsInputPartition(t *testing.T) {
	cfg := rpConfig(Limits{})
	cfg.Redpanda.PartitionSameAsInput = true
	in := rpInstanceOf(t, rpLoad(t, rustGuest(t, "tests/redpanda/redpanda-rust"), cfg))
	recs := []abi.Record{
		{Topic: "in", Partition: 3, Value: []byte("a")},
		{Topic: "in", Partition: 0, Value: []byte("route:second")},
		{Topic: "in", Partition: 7, Value: []byte("twice")},
	}
	out := make([]Outcome, len(recs))
	if ran := in.ProcessBatch(context.Background(), rpBatchOf(recs), out); ran != len(recs) {
		t.Fatalf("ran %d", ran)
	}
	for i, o := range out {
		if o.Status != abi.StatusOK || len(o.Outputs) == 0 {
			t.Fatalf("record %d: %v %v", i, o.Status, o.Err)
		}
		for j, op := range o.Outputs {
			if op.Partition != recs[i].Partition {
				t.Errorf("record %d output %d (topic %q): partition %d, want the input's %d", i, j, op.Topic, op.Partition, recs[i].Partition)
			}
		}
	}
}

// TestRedpandaWriteLimits: a write past limits.max_outputs or
// limits.max_output_bytes answers -3, which the SDKs turn into a failed
// record; the writes before it on other records stand.
func TestRedpandaWriteLimits(t *testing.T) {
	for name, build := range rpTransforms(t) {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct {
				lim  Limits
				recs []abi.Record
			}{
				{Limits{MaxOutputs: 1}, []abi.Record{{Topic: "in", Value: []byte("once")}, {Topic: "in", Value: []byte("twice")}}},
				{Limits{MaxOutputBytes: 64}, []abi.Record{{Topic: "in", Value: []byte("small")}, {Topic: "in", Value: bytes.Repeat([]byte("x"), 100)}}},
			} {
				in := rpInstanceOf(t, rpLoad(t, build(t), rpConfig(c.lim)))
				out := make([]Outcome, len(c.recs))
				if ran := in.ProcessBatch(context.Background(), rpBatchOf(c.recs), out); ran != 2 {
					t.Fatalf("%+v: ran %d", c.lim, ran)
				}
				if out[0].Status != abi.StatusOK || len(out[0].Outputs) != 1 {
					t.Fatalf("%+v: record 0: %v %v", c.lim, out[0].Status, out[0].Err)
				}
				if f := out[1].Fault(); f == nil || !strings.Contains(f.Error(), "-3") {
					t.Fatalf("%+v: record 1: %v, want the write's -3 in a fault", c.lim, out[1].Err)
				}
			}
		})
	}
}
