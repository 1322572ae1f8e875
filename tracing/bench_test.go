package tracing

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkTracedRecord traces one healthy record per op (three spans: the
// attempt, the guest call, the output produce) through the JSON-lines
// exporter, the batcher's goroutine included: ns/op is wall time up to the
// last span written, cpu_ns/op the process's CPU (both goroutines). lazy:
// the attempt is decided before it is begun (Keep, BeginKept), as the
// scheduler does for a record processed in one call.
func BenchmarkTracedRecord(b *testing.B) {
	for _, c := range []struct {
		name  string
		ratio float64
		lazy  bool
	}{{"ratio=0", 0, false}, {"ratio=1", 1, false}, {"ratio=0/lazy", 0, true}, {"ratio=1/lazy", 1, true}} {
		b.Run(c.name, func(b *testing.B) {
			tr, err := New(context.Background(), Config{Exporter: ExporterJSONL, File: filepath.Join(b.TempDir(), "t.jsonl"), SampleRatio: c.ratio})
			if err != nil {
				b.Fatal(err)
			}
			info := Info{Pipeline: "p", Group: "g", Module: "uppercase", ModuleDigest: "sha256:0123456789abcdef", Topic: "in", Partition: 3,
				Offset: 12345, Key: []byte("key-0001"), OriginTopic: "in", OriginPartition: 3, OriginOffset: 12345, Attempt: 1, Instance: 7}
			hdr := HeaderFunc(func(string) []byte { return nil })
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now := time.Now()
				var a *Attempt
				if !c.lazy {
					a = tr.Begin(info, hdr)
					a.Call("wasmstream_on_record", now, time.Microsecond, nil)
				} else if p, keep := tr.Keep(false, 1, hdr); keep {
					a = tr.BeginKept(info, p, now)
					a.Call("wasmstream_on_record", now, time.Microsecond, nil)
				}
				if a.Decide(false) {
					_, _, done := a.Produce(ProduceOutput, "out")
					done(1, int64(i), nil)
				}
				a.End("ok", "", "")
			}
			if err := tr.Shutdown(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu_ns/op")
		})
	}
}

// processCPU is the process's user and system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
