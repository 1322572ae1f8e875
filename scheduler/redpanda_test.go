package scheduler

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// Unmodified Redpanda Data Transforms (tests/redpanda: built from
// Redpanda's published Go and Rust SDKs) run in a pipeline as any module:
// the engine drives them through the same batch interface
// (host/redpanda_instance.go), so outputs, dead letters, commits and
// exactly_once come from it unchanged.

var rpBuilds sync.Map // which -> func() (string, error)

// redpandaTransform builds the Go ("go") or Rust ("rust") conformance
// transform once and returns its file.
func redpandaTransform(t testing.TB, which string) string {
	t.Helper()
	f, _ := rpBuilds.LoadOrStore(which, sync.OnceValues(func() (string, error) {
		p := filepath.Join(os.TempDir(), fmt.Sprintf("wasmstream-test-redpanda-%s-%d.wasm", which, os.Getpid()))
		var b []byte
		switch which {
		case "rust":
			b = wt.BuildRustGuest(t, "tests/redpanda/redpanda-rust")
		default:
			cmd := exec.Command("go", "build", "-o", p, ".")
			cmd.Dir = filepath.Join(wt.RepoRoot(t), "tests/redpanda/redpanda-go")
			cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
			if out, err := cmd.CombinedOutput(); err != nil {
				return "", fmt.Errorf("go build: %v\n%s", err, out)
			}
			return p, nil
		}
		return p, os.WriteFile(p, b, 0o644)
	}))
	p, err := f.(func() (string, error))()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// rpInput is input i of the pipeline tests: identity unless its value is
// one of the conformance transform's directives.
func rpInput(i int) *kgo.Record {
	r := &kgo.Record{Topic: "in", Key: []byte(fmt.Sprintf("k-%04d", i)), Value: []byte(fmt.Sprintf("v-%04d", i)),
		Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(fmt.Sprint(i))}, {Key: "empty", Value: []byte{}}}}
	switch {
	case i == 3:
		r.Value = nil // null value, kept null
	case i == 4:
		r.Value = []byte{} // empty value, kept empty
	case i%50 == 7:
		r.Value = []byte("route:second")
	case i == 250:
		r.Value = []byte("panic")
	}
	return r
}

func TestRedpandaTransformPipeline(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "second", "dlq")
	const n = 500
	cl := kafkatest.Client(t, brokers)
	for i := 0; i < n; i++ {
		if err := cl.ProduceSync(context.Background(), rpInput(i)).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfigWith(t, brokers, "g", redpandaTransform(t, "go"), "in", "out", "dlq", "    allowed_outputs: [second]", "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())

	routed := 0
	for i := 0; i < n; i++ {
		if i%50 == 7 && i != 3 && i != 4 {
			routed++
		}
	}
	out := kafkatest.NewReader(t, brokers, "out")
	out.ReadUntil(t, time.Minute, "every output but the panicking record's", func(rs []*kgo.Record) bool { return len(rs) >= n-1 })
	byKey := map[string]*kgo.Record{}
	for _, rec := range out.Recs {
		if prev := byKey[string(rec.Key)]; prev != nil && string(rec.Value) != "route:second" {
			t.Fatalf("key %s output twice", rec.Key)
		}
		byKey[string(rec.Key)] = rec
	}
	for i := 0; i < n; i++ {
		in := rpInput(i)
		got := byKey[string(in.Key)]
		if i == 250 {
			if got != nil {
				t.Fatalf("the panicking record has an output: %q", got.Value)
			}
			continue
		}
		if got == nil {
			t.Fatalf("input %d has no output", i)
		}
		if !bytes.Equal(got.Value, in.Value) || (got.Value == nil) != (in.Value == nil) {
			t.Fatalf("input %d: value %q (nil %v), want %q (nil %v)", i, got.Value, got.Value == nil, in.Value, in.Value == nil)
		}
		if len(got.Headers) != 2 || got.Headers[0].Key != "i" || string(got.Headers[0].Value) != fmt.Sprint(i) || got.Headers[1].Key != "empty" || len(got.Headers[1].Value) != 0 {
			t.Fatalf("input %d: headers %v", i, got.Headers)
		}
	}
	side := kafkatest.NewReader(t, brokers, "second")
	side.ReadUntil(t, time.Minute, "the routed records", func(rs []*kgo.Record) bool { return len(rs) >= routed })
	dlq := kafkatest.NewReader(t, brokers, "dlq")
	dlq.ReadUntil(t, time.Minute, "the panicking record dead-lettered", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	d := dlq.Recs[0]
	if string(d.Value) != "panic" || kafkatest.Header(d, HeaderErrorKind) != "fault.panic" || kafkatest.Header(d, HeaderPipeline) != "p" {
		t.Fatalf("dead letter %q, kind %q, error %q", d.Value, kafkatest.Header(d, HeaderErrorKind), kafkatest.Header(d, HeaderError))
	}
	kafkatest.Eventually(t, 30*time.Second, "offsets committed up to the end", func() bool {
		sum := int64(0)
		for _, o := range kafkatest.Committed(t, brokers, cfg.GroupID(&cfg.Pipelines[0]), "in") {
			sum += o
		}
		return sum == n
	})
	out.ReadFor(300 * time.Millisecond)
	side.ReadFor(300 * time.Millisecond)
	if len(out.Recs) != n-1 || len(side.Recs) != routed || len(dlq.Recs) != 1 {
		t.Fatalf("%d outputs (want %d), %d routed (want %d), %d dead letters (want 1)", len(out.Recs), n-1, len(side.Recs), routed, len(dlq.Recs))
	}
}

// TestRedpandaTransformExactlyOnce: under exactly_once a Redpanda
// transform's outputs and the input offsets commit in one transaction,
// which Redpanda itself does not offer: every input once in the
// read_committed output.
func TestRedpandaTransformExactlyOnce(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq")
	const n = 2000
	kafkatest.Produce(t, brokers, "in", n, func(i int) string { return fmt.Sprintf("rec-%05d", i) })
	cfg := testConfigWith(t, brokers, "g", redpandaTransform(t, "rust"), "in", "out", "dlq",
		"    guarantee: exactly_once\n    transactions: {max_records: 300, interval: 100ms}", "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	p := r.Pipelines()[0]
	kafkatest.Eventually(t, time.Minute, "a transaction committed", func() bool { return p.Snapshot().TxnCommitted > 0 })
	// An aborted transaction starts every partition over from its
	// committed offset: the transform's outputs of the aborted attempt stay
	// invisible.
	before := p.Snapshot().TxnAborted
	p.injectTxnFailure(fmt.Errorf("injected produce failure"))
	kafkatest.Eventually(t, time.Minute, "the transaction aborted", func() bool { return p.Snapshot().TxnAborted > before })
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n })
	rd.ReadFor(500 * time.Millisecond) // duplicates, if any
	seen := map[string]int{}
	for _, rec := range rd.Recs {
		seen[string(rec.Value)]++
	}
	for v, c := range seen {
		if c != 1 {
			t.Errorf("%s appears %d times", v, c)
		}
	}
	if len(seen) != n || len(rd.Recs) != n {
		t.Fatalf("%d distinct outputs in %d (want %d)", len(seen), len(rd.Recs), n)
	}
	kafkatest.Eventually(t, 30*time.Second, "offsets committed up to the end", func() bool {
		sum := int64(0)
		for _, o := range kafkatest.Committed(t, brokers, cfg.GroupID(&cfg.Pipelines[0]), "in") {
			sum += o
		}
		return sum == n
	})
}

// TestRedpandaStrictReachesTheHost: redpanda.strict gives the transform
// Redpanda's 2 MiB, which a standard-Go transform does not fit: the
// pipeline does not start, and says why.
func TestRedpandaStrictReachesTheHost(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	cfg := testConfigWith(t, brokers, "g", redpandaTransform(t, "go"), "in", "out", "dlq", "    redpanda: {strict: true}", "")
	r, err := NewRunner(context.Background(), cfg, testLogger(t))
	if err == nil {
		r.Stop(context.Background())
		t.Fatal("a standard-Go transform started in 2 MiB")
	}
	if !strings.Contains(err.Error(), "limit of 32 pages (limits.memory_pages)") {
		t.Fatalf("%v: does not name the 32-page limit", err)
	}
}

// TestRedpandaSameAsInputOnTheBroker: redpanda.output_partitioning
// same_as_input puts each output on its input record's partition, as
// Redpanda does.
func TestRedpandaSameAsInputOnTheBroker(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 3, "in", "out", "dlq")
	const n = 300
	// Inputs on partitions of the test's choosing, not their key's: a key's
	// hash would put most outputs elsewhere.
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	inPart := map[string]int32{}
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: "in", Partition: int32(i % 3), Key: []byte(fmt.Sprintf("k-%d", i)), Value: []byte(fmt.Sprintf("v-%d", i))}
		res := cl.ProduceSync(context.Background(), r)
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		inPart[string(r.Value)] = res[0].Record.Partition
	}
	cfg := testConfigWith(t, brokers, "g", redpandaTransform(t, "rust"), "in", "out", "dlq", "    redpanda: {output_partitioning: same_as_input}", "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n })
	moved := 0
	for _, rec := range rd.Recs {
		if rec.Partition != inPart[string(rec.Value)] {
			moved++
		}
	}
	if moved > 0 {
		t.Fatalf("%d of %d outputs not on their input's partition", moved, len(rd.Recs))
	}
}
