package shop

import "testing"

// payload is the benchmark's order, encoded.
func payload(t testing.TB) []byte {
	coupon := "SPRING"
	o := Order{ID: 1, Customer: "ada", Amount: 20, PlacedAt: 1700000000123, Items: []string{"tea", "cake"}, Coupon: &coupon, Priority: 2}
	b, err := o.AppendAvro(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// record is the example's processor's codec work: the order decoded into
// a value reused from record to record, its total encoded into a reused
// buffer.
func record(t testing.TB, in []byte, o *Order, tot *OrderTotal, out []byte) []byte {
	if _, err := o.DecodeAvro(in); err != nil { // sets every field
		t.Fatal(err)
	}
	tot.ID, tot.Customer, tot.PlacedAt, tot.Coupon = o.ID, o.Customer, o.PlacedAt, o.Coupon
	tot.Items, tot.Total = int32(len(o.Items)), o.Amount
	out, err := tot.AppendAvro(out[:0])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The example's codec (strings as views, timestamps as int64) allocates
// nothing a record: an allocation costs a Go guest about 0.4 µs, so one
// more is a regression of the guest's serde (BENCHMARKS.md, "The Go
// guest's typed serde towards 1 µs").
func TestCodecAllocatesNothing(t *testing.T) {
	in := payload(t)
	var (
		o   Order
		tot OrderTotal
		out []byte
	)
	if n := testing.AllocsPerRun(1000, func() { out = record(t, in, &o, &tot, out) }); n != 0 {
		t.Fatalf("%v allocations a record, want none", n)
	}
}

// BenchmarkCodec is record's work alone (record), and its decode and
// its encode apart. Natively:
//
//	go test -run '^$' -bench Codec ./plugins/examples/avro-serde/shop/
//
// and compiled to WebAssembly under wazero (the Go distribution's
// go_wasip1_wasm_exec with GOWASIRUNTIME=wazero and a wazero binary on
// PATH), which separates the codec's cost in a guest from the host's and
// the SDK's around it:
//
//	GOOS=wasip1 GOARCH=wasm GOWASIRUNTIME=wazero go test -exec "$(go env GOROOT)/lib/wasm/go_wasip1_wasm_exec" -run '^$' -bench Codec ./plugins/examples/avro-serde/shop/
func BenchmarkCodec(b *testing.B) {
	in := payload(b)
	var (
		o   Order
		tot OrderTotal
		out []byte
	)
	b.Run("record", func(b *testing.B) {
		for b.Loop() {
			out = record(b, in, &o, &tot, out)
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			if _, err := o.DecodeAvro(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode", func(b *testing.B) {
		var err error
		for b.Loop() {
			if out, err = tot.AppendAvro(out[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
