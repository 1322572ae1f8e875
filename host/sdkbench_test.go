package host

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// cUppercase builds the C example once per test binary.
func cUppercase(t testing.TB) []byte {
	const src = "plugins/examples/c-uppercase/uppercase.c"
	f, _ := buildOnce.LoadOrStore("c:"+src, sync.OnceValue(func() []byte { return wt.BuildCGuest(t, src) }))
	b := f.(func() []byte)()
	if b == nil {
		t.Fatal("the C guest did not build (see the first benchmark that built it)")
	}
	return b
}

// uppercaseSDKs are the uppercase example of each SDK (and C, on the ABI
// directly): the same processor, outputs byte for byte the same
// (internal/conformance checks it).
var uppercaseSDKs = []struct {
	name  string
	build func(testing.TB) []byte
}{
	{"go", func(t testing.TB) []byte { return guest(t, "plugins/examples/uppercase") }},
	{"c", cUppercase},
	{"assemblyscript", func(t testing.TB) []byte { return asGuest(t, "plugins/examples/as-uppercase") }},
	{"rust", func(t testing.TB) []byte { return rustGuest(t, "plugins/examples/rust-uppercase") }},
}

// BenchmarkUppercaseSDK is the per-record cost of each SDK's uppercase
// inside the host (Process: encode the record, call the guest, decode and
// hold its output), at three record shapes. One op is one record, so
// ns/op is ns per record; B/s counts the value's bytes. BENCHMARKS.md,
// "Per-record cost of each SDK", has figures.
//
//	go test -run '^$' -bench BenchmarkUppercaseSDK -count 3 ./host/
func BenchmarkUppercaseSDK(b *testing.B) {
	headers := []abi.Header{
		{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
		{Key: "content-type", Value: []byte("text/plain")},
		{Key: "source", Value: []byte("orders-service")},
	}
	text := func(n int) []byte {
		return []byte(strings.Repeat("the quick brown fox jumps over the lazy dog ", n/44+1)[:n])
	}
	for _, size := range []struct {
		name string
		rec  abi.Record
	}{
		{"100B", abi.Record{Topic: "in", Key: []byte("key-0001"), Value: text(100), Attempt: 1}},
		{"1KiB+3h", abi.Record{Topic: "in", Key: []byte("key-0001"), Value: text(1024), Headers: headers, Attempt: 1}},
		{"64KiB", abi.Record{Topic: "in", Key: []byte("key-0001"), Value: text(64 << 10), Attempt: 1}},
	} {
		for _, sdk := range uppercaseSDKs {
			b.Run(size.name+"/"+sdk.name, func(b *testing.B) {
				in := newInstance(b, load(b, sdk.build(b), Limits{}))
				rec := size.rec
				ctx := context.Background()
				b.SetBytes(int64(len(rec.Value)))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					res := in.Process(ctx, &rec, nil)
					if len(res.Outputs) != 1 || len(res.Outputs[0].Value) != len(rec.Value) {
						b.Fatal(res.Err)
					}
				}
			})
		}
	}
}
