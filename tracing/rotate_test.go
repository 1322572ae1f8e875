package tracing

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// The JSON-lines file is rotated by size: with tracing.max_file_bytes at
// 64 KiB and max_files 2, tracing 5,000 records (3 spans each, about 2 MB)
// leaves the file and two rotated parts, each of whole lines; the rotated
// ones reached the size, none is past it by more than a line; reading
// them oldest first (OpenJSONL) gives the newest records in order, the
// last record's spans in the file itself. A file already past the size
// when the host starts is rotated after its first line.
func TestJSONLFileRotated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "t.jsonl")
	const limit, keep = 64 << 10, 2
	if err := os.WriteFile(file, make([]byte, 0, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := New(context.Background(), Config{Exporter: ExporterJSONL, File: file, SampleRatio: 1, MaxFileBytes: limit, MaxFiles: keep})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	tracedRecords(tr, n)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(Part(file, keep+1)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: %v, want none (max_files %d)", Part(file, keep+1), err, keep)
	}
	for i := 1; i <= keep; i++ {
		st, err := os.Stat(Part(file, i))
		if err != nil {
			t.Fatalf("rotated part %d: %v", i, err)
		}
		if st.Size() < limit || st.Size() > limit+4<<10 {
			t.Errorf("rotated part %d: %d bytes, want at least %d and not a line more", i, st.Size(), limit)
		}
	}
	rc, err := OpenJSONL(file)
	if err != nil {
		t.Fatal(err)
	}
	spans, err := ReadJSONL(rc) // every line of every part whole
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) == 0 || len(spans) >= 3*n {
		t.Fatalf("%d spans in the parts kept, want some and fewer than the %d written", len(spans), 3*n)
	}
	newest := map[string]bool{} // offsets of the process spans read, the newest must be there
	for _, s := range spans {
		if s.Kind == "consumer" {
			newest[s.Attrs["messaging.kafka.offset"]] = true
		}
	}
	if !newest["4999"] || newest["0"] {
		t.Errorf("the parts kept hold offset 4999: %v, offset 0: %v; want the newest records only", newest["4999"], newest["0"])
	}
	last := spans[len(spans)-1]
	cur, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	own, err := ReadJSONL(cur)
	cur.Close()
	if err != nil || len(own) > 0 && own[len(own)-1].SpanID != last.SpanID {
		t.Errorf("the file itself: %d spans (%v), want the newest", len(own), err)
	}

	// Restarted on a file past the size: rotated after the first line.
	big := filepath.Join(dir, "big.jsonl")
	if err := os.WriteFile(big, []byte(`{"trace_id":"00","span_id":"00","name":"old","kind":"internal","start":"2026-01-01T00:00:00Z","end":"2026-01-01T00:00:00Z"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err = New(context.Background(), Config{Exporter: ExporterJSONL, File: big, SampleRatio: 1, MaxFileBytes: 16, MaxFiles: 1})
	if err != nil {
		t.Fatal(err)
	}
	tracedRecords(tr, 1)
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(Part(big, 1)); err != nil || len(b) < 16 {
		t.Errorf("%s after a line on a file past the size: %d bytes, %v", Part(big, 1), len(b), err)
	}
}
