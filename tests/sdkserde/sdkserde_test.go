// Package sdkserde runs the SDKs' typed serde examples (Go
// plugins/examples/avro-serde, Rust plugins/examples/rust-avro-serde)
// inside the host, on framed Avro records, with the schema operations
// answered by the process's registry client against an in-process
// registry (franz-go's srfake, a real HTTP server).
package sdkserde

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/host/asyncop"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/internal/schemareg"
	"github.com/wasmstream/wasmstream/plugins/examples/avro-serde/shop"
)

const (
	orderID = 7
	totalID = 9
)

// Order and OrderTotal are the example's, generated from its schemas
// (package shop): the inputs are written and the outputs read with
// twmb/avro through their tags, not with the guests' code.
type (
	Order      = shop.Order
	OrderTotal = shop.OrderTotal
)

func schemaFile(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(wt.RepoRoot(t), "plugins/examples/avro-serde/schemas", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// registry serves the example's two schemas: orders-value (id 7) and
// order-totals-value (id 9).
func registry(t testing.TB) *schemareg.Client {
	t.Helper()
	reg := srfake.New()
	t.Cleanup(reg.Close)
	reg.SeedSchema("orders-value", 1, orderID, sr.Schema{Schema: schemaFile(t, "order.avsc"), Type: sr.TypeAvro})
	reg.SeedSchema("order-totals-value", 1, totalID, sr.Schema{Schema: schemaFile(t, "order-total.avsc"), Type: sr.TypeAvro})
	client, err := schemareg.New(schemareg.Config{URL: reg.URL(), RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// instance loads wasm with the schema operations granted (enabled) and
// returns an instance of it.
func instance(t testing.TB, wasm []byte, client *schemareg.Client, enabled bool) *host.Instance {
	t.Helper()
	e, err := host.NewEngine("", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	async := host.AsyncConfig{Config: asyncop.Config{SchemaRegistry: asyncop.SchemaRegistry{Enabled: enabled}}, Key: "pipelines.totals.async", Env: asyncop.Env{Schemas: client}}
	m, err := e.Load(context.Background(), wasm, host.ModuleConfig{Name: "totals", Limits: host.Limits{RecordTimeout: 10 * time.Second}, Async: async})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	in, err := m.NewInstance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// framed encodes o as a producer's serializer would: the frame, then the
// payload written by twmb/avro (not by the guests' SDK code).
func framed(t testing.TB, o *Order) []byte {
	t.Helper()
	b, err := avro.MustParse(schemaFile(t, "order.avsc")).AppendEncode(binary.BigEndian.AppendUint32([]byte{0}, orderID), o)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// process runs rec on in to its decision: at once, or through its
// operations' completions.
func process(t testing.TB, in *host.Instance, rec *abi.Record) host.Result {
	t.Helper()
	res := in.Process(context.Background(), rec, rec.Offset)
	if res.Status != abi.StatusPending {
		return res
	}
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		select {
		case <-in.Ready():
		case <-time.After(20 * time.Millisecond):
		}
		for _, d := range in.Poll(context.Background(), time.Now()) {
			if d.Tag == rec.Offset {
				return d.Result
			}
		}
	}
	t.Fatalf("record %d not decided within 10s", rec.Offset)
	return host.Result{}
}

func orders() ([]Order, []OrderTotal) {
	coupon := "SPRING"
	placed := int64(1700000000123) // timestamp-millis (--timestamps int64)
	in := []Order{
		{ID: 1, Customer: "ada", Amount: 20, PlacedAt: placed, Items: []string{"tea", "cake"}, Coupon: &coupon, Priority: 2},
		{ID: 2, Customer: "bob", Amount: 7.5, PlacedAt: placed + time.Hour.Milliseconds(), Items: []string{}},
		{ID: 3, Customer: "Grüße 世界", Amount: 0.1, PlacedAt: placed, Items: []string{"a", "b", "c"}, Coupon: &coupon, Priority: -1},
	}
	// The totals as float64 arithmetic makes them (a constant expression
	// would be exact: 0.1 * 0.9 is 0.09 there, 0.09000000000000001 here).
	want := []OrderTotal{
		{ID: 1, Customer: "ada", Items: 2, Total: in[0].Amount * 0.9, PlacedAt: placed, Coupon: &coupon},
		{ID: 2, Customer: "bob", Items: 0, Total: 7.5, PlacedAt: placed + time.Hour.Milliseconds()},
		{ID: 3, Customer: "Grüße 世界", Items: 3, Total: in[2].Amount * 0.9, PlacedAt: placed, Coupon: &coupon},
	}
	return in, want
}

// The Go and the Rust example read framed orders into their structs and
// write each order's total framed with the output subject's schema: the
// first record looks both schemas up through the host's registry client,
// the others run in the guest alone. Their outputs decode to the expected
// totals and are the same bytes from both guests; a value without a frame
// fails terminally, and so does a lookup the pipeline does not grant,
// naming its key.
func TestSDKSerdeExamplesThroughHost(t *testing.T) {
	t.Parallel()
	client := registry(t)
	guests := map[string][]byte{
		"go":   wt.BuildGoGuest(t, "plugins/examples/avro-serde"),
		"rust": wt.BuildRustGuest(t, "plugins/examples/rust-avro-serde"),
	}
	totals := avro.MustParse(schemaFile(t, "order-total.avsc"))
	in, want := orders()
	outputs := map[string][][]byte{}
	for _, lang := range []string{"go", "rust"} {
		inst := instance(t, guests[lang], client, true)
		for round := range 2 { // the second round with the schemas in hand
			for i := range in {
				rec := &abi.Record{Topic: "orders", Offset: int64(round*len(in) + i), Key: []byte{'k', byte('0' + i)}, Value: framed(t, &in[i]), Attempt: 1}
				res := process(t, inst, rec)
				if res.Status != abi.StatusOK || len(res.Outputs) != 1 {
					t.Fatalf("%s: order %d: %v %v, %d outputs", lang, in[i].ID, res.Status, res.Err, len(res.Outputs))
				}
				o := res.Outputs[0]
				if !bytes.Equal(o.Key, rec.Key) || len(o.Value) < 5 || o.Value[0] != 0 || binary.BigEndian.Uint32(o.Value[1:5]) != totalID {
					t.Fatalf("%s: order %d: output key %q, frame %x (want schema %d)", lang, in[i].ID, o.Key, o.Value[:min(5, len(o.Value))], totalID)
				}
				var got OrderTotal
				if rest, err := totals.Decode(o.Value[5:], &got); err != nil || len(rest) > 0 {
					t.Fatalf("%s: order %d: output %x: %v, %d bytes left", lang, in[i].ID, o.Value, err, len(rest))
				}
				if !reflect.DeepEqual(got, want[i]) {
					t.Fatalf("%s: order %d: %+v, want %+v", lang, in[i].ID, got, want[i])
				}
				outputs[lang] = append(outputs[lang], o.Value)
			}
		}
		res := process(t, inst, &abi.Record{Topic: "orders", Offset: 100, Value: []byte(`{"id":1}`), Attempt: 1})
		if res.Status != abi.StatusFail || res.Err == nil || !strings.Contains(res.Err.Error(), "not framed") {
			t.Fatalf("%s: plain JSON: %v %v, want a terminal failure saying it is not framed", lang, res.Status, res.Err)
		}

		denied := instance(t, guests[lang], client, false)
		res = process(t, denied, &abi.Record{Topic: "orders", Value: framed(t, &in[0]), Attempt: 1})
		if res.Status != abi.StatusFail || res.Err == nil || !strings.Contains(res.Err.Error(), "pipelines.totals.async.schema_registry.enabled is false") {
			t.Fatalf("%s: not granted: %v %v, want a terminal failure naming the key", lang, res.Status, res.Err)
		}
	}
	for i := range outputs["go"] {
		if !bytes.Equal(outputs["go"][i], outputs["rust"][i]) {
			t.Fatalf("record %d: Go wrote %x, Rust %x", i, outputs["go"][i], outputs["rust"][i])
		}
	}
}

// BenchmarkSDKSerde is the guest-side serde path inside the host: one
// record of a 7-field Avro Order (a union, an array, a timestamp) decoded
// into the guest's struct and its total encoded, framed, against the same
// SDK path doing nothing with the record (testdata/gonothing,
// testdata/rust-nothing). serde is the example, whose structs have
// generated codecs; resolving is the same processor with structs of its
// own (testdata/goresolving, testdata/rust-resolving), which sr reads and
// writes through its resolving path. The schemas are in hand: every record
// but an instance's first. ns/record is the whole call, the host's part
// included; the difference of two is what the serde adds. cpu-ns/op is the
// process's CPU time per record (getrusage): unlike ns/op it does not
// count the time other processes take the CPU, so it is the figure to
// compare on a shared machine.
func BenchmarkSDKSerde(b *testing.B) {
	client := registry(b)
	in, _ := orders()
	for _, g := range []struct{ name, dir string }{
		{"go/nothing", "tests/sdkserde/testdata/gonothing"},
		{"go/resolving", "tests/sdkserde/testdata/goresolving"},
		{"go/serde", "plugins/examples/avro-serde"},
		{"rust/nothing", "tests/sdkserde/testdata/rust-nothing"},
		{"rust/resolving", "tests/sdkserde/testdata/rust-resolving"},
		{"rust/serde", "plugins/examples/rust-avro-serde"},
	} {
		b.Run(g.name, func(b *testing.B) {
			var wasm []byte
			if strings.HasPrefix(g.name, "go/") {
				wasm = wt.BuildGoGuest(b, g.dir)
			} else {
				wasm = wt.BuildRustGuest(b, g.dir)
			}
			inst := instance(b, wasm, client, true)
			rec := &abi.Record{Topic: "orders", Key: []byte("k"), Value: framed(b, &in[0]), Attempt: 1}
			if res := process(b, inst, rec); res.Status != abi.StatusOK {
				b.Fatalf("%v %v", res.Status, res.Err)
			}
			// The guest's heap grows to its first collections over its
			// first records, and each growth of its memory copies it on
			// the host: the records after warmup are the steady state a
			// pipeline runs in.
			for range warmup {
				if res := inst.Process(context.Background(), rec, nil); res.Status != abi.StatusOK {
					b.Fatalf("%v %v", res.Status, res.Err)
				}
			}
			b.ReportAllocs()
			cpu := cpuTime(b)
			for b.Loop() {
				if res := inst.Process(context.Background(), rec, nil); res.Status != abi.StatusOK {
					b.Fatalf("%v %v", res.Status, res.Err)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// warmup is how many records BenchmarkSDKSerde runs before it measures.
const warmup = 300_000

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
