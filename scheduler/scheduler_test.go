package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

var builds sync.Map

// guestPath builds an example processor once and returns its file.
func guestPath(t testing.TB, name string) string {
	f, _ := builds.LoadOrStore(name, sync.OnceValue(func() string {
		b := wt.BuildGoGuest(t, "plugins/examples/"+name)
		p := filepath.Join(os.TempDir(), fmt.Sprintf("wasmstream-test-%s-%d.wasm", name, os.Getpid()))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}))
	return f.(func() string)()
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: testLogLevel()}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func testConfig(t testing.TB, brokers []string, group, module, in, out, dlq string) *config.Config {
	return testConfigWith(t, brokers, group, module, in, out, dlq, "", "")
}

// testConfigWith adds pipeline keys (YAML lines indented for the pipeline)
// and top-level sections.
func testConfigWith(t testing.TB, brokers []string, group, module, in, out, dlq, pipelineKeys, top string) *config.Config {
	if !strings.Contains(pipelineKeys, "retry:") {
		pipelineKeys += "\n    retry: {max_attempts: 1}" // no retries unless the test asks
	}
	y := fmt.Sprintf(`
kafka:
  brokers: [%q]
  group: %s
  commit_interval: 100ms
pipelines:
  - name: p
    module: %s
    inputs: [%s]
    output: %s
    dead_letter_topic: %s
    limits:
      record_timeout: 2s
      memory_pages: 256
%s
shutdown:
  drain_timeout: 5s
%s
`, strings.Join(brokers, ","), group, module, in, out, dlq, pipelineKeys, top)
	return configFromYAML(t, y)
}

func startRunner(t testing.TB, cfg *config.Config) *Runner {
	t.Helper()
	r := newRunner(t, cfg)
	r.Start()
	return r
}

// newRunner is cfg's runner, not started: for a test that registers its
// metrics or labels first.
func newRunner(t testing.TB, cfg *config.Config) *Runner {
	t.Helper()
	r, err := NewRunner(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPassthroughInOrderAndCommitted(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 3, "in", "out", "dlq")
	const n = 3000
	kafkatest.Produce(t, brokers, "in", n, func(i int) string { return fmt.Sprintf("rec-%05d", i) })
	cfg := testConfig(t, brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq")
	r := startRunner(t, cfg)
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, 60*time.Second, "all outputs", func(rs []*kgo.Record) bool { return len(rs) >= n })
	// Per key, outputs keep input order (one key maps to one input partition
	// and one output partition).
	last := map[string]string{}
	for _, rec := range rd.Recs {
		v := string(rec.Value)
		if !strings.HasPrefix(v, "REC-") {
			t.Fatalf("output %q not uppercased", v)
		}
		if prev, ok := last[string(rec.Key)]; ok && prev >= v {
			t.Fatalf("key %s: %s after %s", rec.Key, v, prev)
		}
		last[string(rec.Key)] = v
	}
	kafkatest.Eventually(t, 10*time.Second, "offsets committed up to the end", func() bool {
		sum := int64(0)
		for _, o := range kafkatest.Committed(t, brokers, cfg.GroupID(&cfg.Pipelines[0]), "in") {
			sum += o
		}
		return sum == n
	})
	r.Stop(context.Background())
	s := r.Snapshots()[0]
	if s.Done != n || s.Outputs != n || s.DeadLetter != 0 {
		t.Fatalf("snapshot %+v", s)
	}

	// A second run in the same group processes nothing again.
	r2 := startRunner(t, cfg)
	time.Sleep(1500 * time.Millisecond) // give it the chance to (wrongly) reprocess
	kafkatest.Eventually(t, 10*time.Second, "second run assigned", func() bool { return r2.Snapshots()[0].Tasks == 3 })
	if s := r2.Snapshots()[0]; s.Fetched != 0 {
		t.Fatalf("second run fetched %d records", s.Fetched)
	}
	// New records on one partition: the fetch that brings them carries the
	// other partitions, empty, with their high watermarks. Those partitions
	// were committed at their end and never fetched a record in this run;
	// their lag is 0, not their length.
	cl := kafkatest.Client(t, brokers)
	for i := 0; i < 10; i++ {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "in", Key: []byte("one-key"), Value: []byte(fmt.Sprintf("late-%d", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	kafkatest.Eventually(t, 10*time.Second, "the late records done and no lag", func() bool {
		s := r2.Snapshots()[0]
		return s.Done == 10 && s.Lag == 0
	})
	r2.Stop(context.Background())
}

func TestFaultsGoToDeadLetter(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	faults := []string{"fail", "retry", "panic", "loop", "oom", "badptr", "exit", "", "not json"}
	kafkatest.Produce(t, brokers, "in", 3*len(faults), func(i int) string {
		f := faults[i%len(faults)]
		switch f {
		case "":
			return fmt.Sprintf(`{"i":%d}`, i)
		case "not json":
			return "not json"
		}
		return fmt.Sprintf(`{"i":%d,"fault":%q}`, i, f)
	})
	cfg := testConfig(t, brokers, "g", guestPath(t, "enrich"), "in", "out", "dlq")
	// The looping records must meet the deadline, and no other fault may:
	// growing a Go guest's memory to its limit takes well over a second
	// when the machine is loaded. Three loops, one after the other, take
	// 18 s of the 90 s the dead letters are waited for.
	cfg.Pipelines[0].Limits.RecordTimeout = 6 * time.Second
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	dl := kafkatest.NewReader(t, brokers, "dlq")
	dl.ReadUntil(t, 90*time.Second, "dead letters", func(rs []*kgo.Record) bool { return len(rs) >= 3*(len(faults)-1) })
	out := kafkatest.NewReader(t, brokers, "out")
	out.ReadUntil(t, 30*time.Second, "healthy outputs", func(rs []*kgo.Record) bool { return len(rs) >= 3 })
	wantKind := map[string]string{"fail": "guest.fail", "retry": "guest.retry", "panic": "fault.panic", "loop": "fault.deadline",
		"oom": "fault.oom", "badptr": "fault.bad_pointer", "exit": "fault.exit", "not json": "guest.fail"}
	for _, rec := range dl.Recs {
		off := kafkatest.Header(rec, HeaderOriginalOffset)
		var i int
		fmt.Sscan(off, &i)
		f := faults[i%len(faults)]
		if got := kafkatest.Header(rec, HeaderErrorKind); got != wantKind[f] {
			t.Errorf("offset %s (%s): kind %q, want %q; error %q", off, f, got, wantKind[f], kafkatest.Header(rec, HeaderError))
		}
		if kafkatest.Header(rec, HeaderError) == "" || kafkatest.Header(rec, HeaderOriginalTopic) != "in" || kafkatest.Header(rec, HeaderPipeline) != "p" {
			t.Errorf("headers incomplete: %v", rec.Headers)
		}
	}
	if len(out.Recs) != 3 {
		t.Fatalf("%d healthy outputs, want 3", len(out.Recs))
	}
	kafkatest.Eventually(t, 10*time.Second, "committed past every record", func() bool {
		return kafkatest.Committed(t, brokers, cfg.GroupID(&cfg.Pipelines[0]), "in")[0] == int64(3*len(faults))
	})
	if s := r.Snapshots()[0]; s.Faults != 3*5 {
		t.Fatalf("faults = %d, want 15 (panic, loop, oom, badptr, exit ×3)", s.Faults)
	}
}

// TestDuplicateHostIDFails: pipelines join their groups as static members
// named by host.id, so a second host started with the same host.id fences
// the first. The fenced host fails with an error that names the cause
// instead of fighting for the group slot every session.
func TestDuplicateHostIDFails(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq")
	kafkatest.Produce(t, brokers, "in", 100, func(i int) string { return fmt.Sprint(i) })
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq", "", "host: {id: same}")
	r1 := startRunner(t, cfg)
	defer r1.Stop(context.Background())
	kafkatest.Eventually(t, 30*time.Second, "the first host assigned", func() bool { return r1.Snapshots()[0].Tasks == 2 })
	r2 := startRunner(t, cfg)
	defer r2.Stop(context.Background())
	select {
	case err := <-r1.Failed():
		if !strings.Contains(err.Error(), "each host needs its own host.id") || !strings.Contains(err.Error(), "g.p.same") {
			t.Fatalf("error %q does not name the cause", err)
		}
		t.Logf("fenced: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the first host was not told it was fenced by a second host with its host.id")
	}
}

// A compile cache directory set explicitly must be safe to read compiled
// code from: one others may write to stops the host with an error naming
// the key. The default one (auto) only costs the cache: the host compiles
// in memory and runs.
func TestUnsafeCompileCacheDir(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	open := t.TempDir()
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq", "", fmt.Sprintf("host: {compile_cache_dir: %q}", open))
	_, err := NewRunner(context.Background(), cfg, testLogger(t))
	if err == nil || !strings.Contains(err.Error(), "host.compile_cache_dir") || !strings.Contains(err.Error(), "may be written by other users") {
		t.Fatalf("explicit world-writable cache dir: %v", err)
	}

	t.Setenv("XDG_CACHE_HOME", open) // auto: <open>/wasmstream/compiled, created 0700 under it...
	if err := os.MkdirAll(filepath.Join(open, "wasmstream", "compiled"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(open, "wasmstream", "compiled"), 0o777); err != nil { // ...unless it exists open
		t.Fatal(err)
	}
	cfg = testConfig(t, brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	if s := r.engine.CacheStats(); s.Dir != "" {
		t.Fatalf("the host used the unsafe default cache dir %s", s.Dir)
	}
}

// testLogLevel is Info, or Debug with WASMSTREAM_TEST_DEBUG=1 (and -v).
func testLogLevel() slog.Level {
	if os.Getenv("WASMSTREAM_TEST_DEBUG") == "1" {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}
