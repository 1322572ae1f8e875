package host

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
)

// BenchmarkBatchUppercase is the per-record cost of the uppercase examples
// (Go, C, AssemblyScript, Rust) one call per record (Process) against the
// batch entry
// (ProcessBatch) with batches of 1 (which ProcessBatch sends through
// wasmstream_on_record), 16 and 64 records; 100-byte values,
// the instance keeping its slot between calls as a worker's does. One op is
// one record: ns/op is ns per record, cpu-ns/rec the process's CPU time per
// record (steadier than ns/op on a shared machine: time the benchmark's
// goroutine waited for a core is not in it), allocs/op the host's
// allocations per record. BENCHMARKS.md, "Calls that carry several records", has figures.
//
//	go test -run '^$' -bench BenchmarkBatchUppercase -count 3 ./host/
func BenchmarkBatchUppercase(b *testing.B) {
	value := []byte(strings.Repeat("the quick brown fox jumps over the lazy dog ", 3)[:100])
	for _, sdk := range uppercaseSDKs {
		for _, n := range []int{0, 1, 16, 64} {
			name := sdk.name + "/process"
			if n > 0 {
				name = sdk.name + "/batch-" + strconv.Itoa(n)
			}
			b.Run(name, func(b *testing.B) {
				in := newInstance(b, load(b, sdk.build(b), Limits{}))
				defer in.Close(context.Background())
				in.KeepSlot()
				defer in.Yield()
				recs := make([]abi.Record, max(n, 1))
				batch := make([]BatchRecord, len(recs))
				for i := range recs {
					recs[i] = abi.Record{Topic: "in", Key: []byte("key-0001"), Value: value, Attempt: 1, Offset: int64(i)}
					batch[i] = BatchRecord{Rec: &recs[i]}
				}
				out := make([]Outcome, len(recs))
				ctx := context.Background()
				b.SetBytes(int64(len(value)))
				b.ReportAllocs()
				cpu0 := cpuTime()
				b.ResetTimer()
				for i := 0; i < b.N; {
					if n == 0 {
						res := in.Process(ctx, &recs[0], nil)
						if len(res.Outputs) != 1 || len(res.Outputs[0].Value) != len(value) {
							b.Fatal(res.Err)
						}
						i++
						continue
					}
					k := min(n, b.N-i)
					if ran := in.ProcessBatch(ctx, batch[:k], out); ran != k {
						b.Fatalf("ran %d of %d", ran, k)
					}
					for j := range out[:k] {
						if len(out[j].Outputs) != 1 || len(out[j].Outputs[0].Value) != len(value) {
							b.Fatal(out[j].Err)
						}
					}
					i += k
				}
				b.StopTimer()
				b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/rec")
			})
		}
	}
}
