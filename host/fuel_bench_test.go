package host

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// BenchmarkGuestLoop: the cost of one iteration of a tight guest loop (a
// counter and a compare), the price of interruptibility per iteration.
func BenchmarkGuestLoop(b *testing.B) {
	const n = 1_000_000
	mod := wt.Minimal(append(wt.Repeat(n, 2, nil), wt.I32Const(0)...))
	mod.Funcs[1].Locals = []wt.Locals{{N: 1, Type: wt.I32}}
	m := load(b, mod.Bytes(), Limits{})
	in := newInstance(b, m)
	rec := &abi.Record{Topic: "in"}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if res := in.Process(ctx, rec, nil); res.Err != nil {
			b.Fatal(res.Err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/iter")
}

// BenchmarkProcessHash: the hash example (100 rounds of SHA-256 over a
// 100-byte value), a guest whose time is all in loops.
func BenchmarkProcessHash(b *testing.B) {
	m := load(b, guest(b, "plugins/examples/hash"), Limits{})
	in := newInstance(b, m)
	rec := &abi.Record{Topic: "in", Key: []byte("key-0001"), Value: []byte(strings.Repeat("x", 100)), Attempt: 1}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if res := in.Process(ctx, rec, nil); len(res.Outputs) != 1 {
			b.Fatal(res.Err)
		}
	}
}
