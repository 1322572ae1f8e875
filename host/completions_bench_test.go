package host

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// BenchmarkCompletionsDelivery: what delivering a lookup's completion
// costs, apart from starting it: 256 records of the lookup example wait on
// one instance until all their responses are queued, then one Poll
// delivers them, through the completions entry (ABI.md §10.1) or, with the
// entry hidden from the host, one wasmstream_on_complete call each.
// call-µs/rec is the Poll's guest-call time per completion.
func BenchmarkCompletionsDelivery(b *testing.B) {
	srv := newLookupServer(b, func() time.Duration { return 0 })
	for _, g := range []struct {
		name string
		wasm func() []byte
	}{
		{"go", func() []byte { return guest(b, "plugins/examples/lookup") }},
		{"rust", func() []byte { return wt.BuildRustGuest(b, "plugins/examples/rust-lookup") }},
		{"assemblyscript", func() []byte { return asGuest(b, "plugins/examples/as-lookup") }},
		// testdata/completions.wat: a guest that does next to nothing with
		// a completion, so that what remains is the delivery's own cost.
		{"wat", func() []byte { return completionsWat(b, nil) }},
	} {
		for _, entry := range []bool{false, true} {
			name := g.name + "/one-per-call"
			if entry {
				name = g.name + "/entry"
			}
			b.Run(name, func(b *testing.B) { benchDelivery(b, srv, g.wasm(), entry) })
		}
	}
}

func benchDelivery(b *testing.B, srv *lookupServer, wasm []byte, entry bool) {
	const n = 256
	m, e := loadLookupWasm(b, wasm, srv, Limits{RecordTimeout: 10 * time.Second})
	in := newInstance(b, m)
	defer in.Close(context.Background())
	if !entry {
		in.entry.completions = nil
	}
	recs := make([]*abi.Record, n)
	for i := range recs {
		recs[i] = rec(fmt.Sprint("k", i), "")
		recs[i].Offset = 1 // the hand-written guest's kind: ok with one output
	}
	ctx := context.Background()
	var calls time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		b.StopTimer()
		k := min(n, b.N-done)
		for i := range k {
			if res := in.Process(ctx, recs[i], i); res.Status != abi.StatusPending {
				b.Fatalf("record %d: %v %v", i, res.Status, res.Err)
			}
		}
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Microsecond) {
			in.q.mu.Lock()
			q := len(in.q.ops)
			in.q.mu.Unlock()
			if q == k {
				break
			}
			if time.Now().After(end) {
				b.Fatalf("%d of %d completions queued", q, k)
			}
		}
		_, run0 := in.CallTimes()
		b.StartTimer()
		ds := in.Poll(ctx, time.Now())
		b.StopTimer()
		_, run1 := in.CallTimes()
		calls += run1 - run0
		for _, d := range ds {
			if d.Result.Err != nil || len(d.Result.Outputs) != 1 {
				b.Fatalf("record %v: %+v", d.Tag, d.Result)
			}
			e.ReleaseOutputs(d.Result.HeldBytes)
		}
		if len(ds) != k {
			b.Fatalf("%d of %d records decided", len(ds), k)
		}
		done += k
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(calls.Nanoseconds())/1000/float64(b.N), "call-µs/rec")
}
