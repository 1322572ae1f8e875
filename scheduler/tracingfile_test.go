package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/logbuf"
)

// A host tracing to a file says at its start what the file holds and how
// it is bounded: every failed record and 1% of the healthy ones by
// default, rotated at 64 MiB with three older parts kept.
func TestTracingFileSaysWhatItKeeps(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	file := filepath.Join(t.TempDir(), "t.jsonl")
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq", "", fmt.Sprintf("tracing: {exporter: jsonl, file: %q}", file))
	var logs logbuf.Buffer
	r, err := NewRunner(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop(context.Background())
	want := fmt.Sprintf("tracing to %s: every failed record, and 1%% of the healthy ones (tracing.sample_ratio); rotated at 64 MiB, 3 older parts kept (tracing.max_file_bytes, tracing.max_files)", file)
	if !strings.Contains(logs.String(), want) {
		t.Errorf("the start's log lacks %q:\n%s", want, logs.String())
	}
}
