package partition

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/tracing"
)

// A healthy record that is not sampled allocates nothing for tracing: its
// first call is noted in the job, and the decision begins no attempt.
func TestUnsampledRecordAllocatesNothing(t *testing.T) {
	tr, err := tracing.New(context.Background(), tracing.Config{Exporter: tracing.ExporterJSONL, File: filepath.Join(t.TempDir(), "t.jsonl"), SampleRatio: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	w := &worker{t: &Task{d: &Deps{Role: Primary{}, Hooks: hooks.Hooks{Tracer: tr}}}}
	r := &kgo.Record{Topic: "in", Partition: 3, Offset: 42, Key: []byte("k"), Value: []byte("v"),
		Headers: []kgo.RecordHeader{{Key: "content-type", Value: []byte("text/plain")}}}
	j, _ := w.newJob(r, nil)
	j.attempt = 1
	now := time.Now()
	n := testing.AllocsPerRun(100, func() {
		j.tr, j.owed, j.started = nil, 0, now
		JobObserver{}.GuestCall(j, abi.ExportOnRecord, now, time.Microsecond, nil)
		w.decideTrace(j, false, now.Add(time.Microsecond))
	})
	if n != 0 || j.tr != nil || j.owed != 0 {
		t.Fatalf("an unsampled record: %.1f allocations, trace %v, owed %d; want none", n, j.tr, j.owed)
	}
}
