//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/logbuf"
)

// registryURL is the real registry the test command started
// (SCHEMA_REGISTRY_URL); the test fails without it.
func registryURL(t *testing.T) string {
	t.Helper()
	url := os.Getenv("SCHEMA_REGISTRY_URL")
	if url == "" {
		t.Fatal("SCHEMA_REGISTRY_URL is not set: the test command starts the registry (tests/schemareg/apicurio.sh start)")
	}
	return url
}

// interopPython is the Python with Confluent's client and serializers
// that tests/interop/setup.sh installed (INTEROP_PYTHON). The test
// fails without it: no silent skip.
func interopPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("INTEROP_PYTHON")
	if py == "" {
		t.Fatal("INTEROP_PYTHON is not set: the test command installs Confluent's Python client (eval \"$(bash tests/interop/setup.sh)\"; export INTEROP_PYTHON)")
	}
	return py
}

// runInterop runs tests/interop/confluent_interop.py with args and returns
// its stdout, failing the test with its stderr when it fails.
func runInterop(t *testing.T, ctx context.Context, args ...string) []byte {
	t.Helper()
	script := filepath.Join(wt.RepoRoot(t), "tests", "interop", "confluent_interop.py")
	cmd := exec.CommandContext(ctx, interopPython(t), append([]string{script}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("confluent_interop.py %s: %v\n%s", args[0], err, stderr.String())
	}
	return stdout.Bytes()
}

// startSchemaHost starts a host of yaml, its log in logs (printed when
// the test fails), stopped when the test ends.
func startSchemaHost(t *testing.T, yaml string) (*scheduler.Runner, *logbuf.Buffer) {
	t.Helper()
	r, logs, err := newSchemaHost(t, t.TempDir(), yaml)
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	t.Cleanup(func() { r.Stop(context.Background()) })
	return r, logs
}

// newSchemaHost makes, but does not start, a host of yaml written to
// dir/config.yaml; its log is printed when the test fails.
func newSchemaHost(t *testing.T, dir, yaml string) (*scheduler.Runner, *logbuf.Buffer, error) {
	t.Helper()
	p := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logbuf.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the host's log:\n%s", logs.String())
		}
	})
	r, err := scheduler.NewRunner(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	return r, logs, err
}

// TestConfluentSerializersInterop: records written by Confluent's own
// serializers (the Python client's AvroSerializer, ProtobufSerializer and
// JSONSerializer, registering their schemas through Apicurio's
// Confluent-compatible API) onto the real broker are decoded by the host
// for the uppercase processor, its outputs encoded with the output
// subjects' schemas (the Protobuf one registered as Confluent's
// serializers register a schema: a base64 FileDescriptorProto), and read
// back by Confluent's deserializers equal to what the processor makes of
// each record; none is dead-lettered and offsets are committed to the end.
func TestConfluentSerializersInterop(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	url := registryURL(t)
	interopPython(t)
	n := names(t)
	const records = 200
	formats := []string{"avro", "proto", "json"}
	var topics []string
	for _, f := range formats {
		topics = append(topics, n+"-"+f, n+"-"+f+"-out")
	}
	kafkatest.CreateTopic(t, brokers, 2, append(topics, n+"-dlq")...)
	ctx, cancel := ctxTimeout(3 * time.Minute)
	defer cancel()
	bs := strings.Join(brokers, ",")
	idsJSON := runInterop(t, ctx, "produce", bs, url, n, fmt.Sprint(records))
	var ids map[string]int
	if err := json.Unmarshal(idsJSON, &ids); err != nil {
		t.Fatalf("produce printed %q: %v", idsJSON, err)
	}

	var pipes []schemaPipe
	for _, f := range formats {
		pipes = append(pipes, schemaPipe{name: f, inputs: []string{n + "-" + f}, out: n + "-" + f + "-out", dlq: n + "-dlq", outputValue: "{format: confluent}"})
	}
	r, _ := startSchemaHost(t, schemaPipelineYAML(brokers, n, fmt.Sprintf("  url: %s\n", url), pipes...))

	summary := runInterop(t, ctx, "consume", bs, url, n, fmt.Sprint(records), string(idsJSON))
	t.Logf("schema ids %s; read back by Confluent's deserializers: %s", bytes.TrimSpace(idsJSON), bytes.TrimSpace(summary))
	for _, f := range formats {
		kafkatest.Eventually(t, time.Minute, f+": committed to the end", func() bool {
			var sum int64
			for _, o := range kafkatest.Committed(t, brokers, n+"."+f, n+"-"+f) {
				sum += o
			}
			return sum == records
		})
	}
	for _, s := range r.Snapshots() {
		if s.DeadLetter != 0 {
			t.Fatalf("pipeline %s: %d dead letters", s.Name, s.DeadLetter)
		}
	}
}
