package tracing

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkTracedRecord: the tracing work of one healthy record (an
// attempt, its guest call, its output's produce) with every record traced
// and spans written to a JSON-lines file, beside the same with none traced.
func BenchmarkTracedRecord(b *testing.B) {
	for _, c := range []struct {
		name  string
		ratio float64
	}{{"ratio=0", 0}, {"ratio=1", 1}} {
		b.Run(c.name, func(b *testing.B) {
			tr, err := New(context.Background(), Config{Exporter: ExporterJSONL, File: filepath.Join(b.TempDir(), "t.jsonl"), SampleRatio: c.ratio})
			if err != nil {
				b.Fatal(err)
			}
			info := Info{Pipeline: "p", Group: "g", Module: "uppercase", ModuleDigest: "sha256:0123456789abcdef", Topic: "in", Partition: 3,
				Offset: 12345, Key: []byte("key-0001"), OriginTopic: "in", OriginPartition: 3, OriginOffset: 12345, Attempt: 1, Instance: 7}
			hdr := func(string) []byte { return nil }
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				a := tr.Begin(info, hdr)
				now := time.Now()
				a.Call("wasmstream_on_record", now, time.Microsecond, nil)
				if a.Decide(false) {
					_, _, done := a.Produce(ProduceOutput, "out")
					done(1, int64(i), nil)
				}
				a.End("ok", "", "")
			}
			if err := tr.Shutdown(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
}
