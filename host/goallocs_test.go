package host

import (
	"context"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// The Go SDK's path for a record costs the guest no heap allocation, one
// record a call (wasmstream_on_record) and in a batch (the batch entry):
// the record's buffer, its decoded form, its headers' array and the output
// list are reused from one record to the next. Counted inside the guest
// (runtime.MemStats.Mallocs, the goallocs test module's extra export) over
// a few thousand records after a warm-up, with headers on every record.
func TestGoSDKRecordPathAllocationFree(t *testing.T) {
	m := load(t, wt.BuildGoGuest(t, "host/testdata/goallocs"), Limits{})
	in := newInstance(t, m)
	defer in.Close(context.Background())
	mallocs := in.mod.ExportedFunction("test_mallocs")
	if mallocs == nil {
		t.Fatal("the goallocs module does not export test_mallocs")
	}
	count := func() uint64 { // a call as the host makes one: metered, on its own record
		st := in.newRec(nil)
		res := in.call(context.Background(), st, nil, func() ([]uint64, api.Function) { return in.stack[:1], mallocs })
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return in.stack[0]
	}
	value := strings.Repeat("the quick brown fox jumps over the lazy dog ", 3)[:100]
	recs := make([]abi.Record, 64)
	batch := make([]BatchRecord, len(recs))
	out := make([]Outcome, len(recs))
	fill := func() {
		for i := range recs {
			recs[i] = abi.Record{Topic: "in", Key: []byte("key-0001"), Value: []byte(value), Attempt: 1, Offset: int64(i),
				Headers: []abi.Header{{Key: "trace", Value: []byte("abc")}, {Key: "source", Value: []byte("test")}}}
			batch[i] = BatchRecord{Rec: &recs[i]}
		}
	}
	ctx := context.Background()
	one := func() {
		fill()
		res := in.Process(ctx, &recs[0], nil)
		if res.Err != nil || len(res.Outputs) != 1 || string(res.Outputs[0].Value) != strings.ToUpper(value) || len(res.Outputs[0].Headers) != 2 {
			t.Fatalf("one record: %+v", res)
		}
	}
	many := func() {
		fill()
		if ran := in.ProcessBatch(ctx, batch, out); ran != len(batch) {
			t.Fatalf("batch: ran %d of %d", ran, len(batch))
		}
		for i := range out {
			if out[i].Err != nil || len(out[i].Outputs) != 1 || string(out[i].Outputs[0].Value) != strings.ToUpper(value) {
				t.Fatalf("batch record %d: %+v", i, out[i].Result)
			}
		}
	}
	for _, c := range []struct {
		name    string
		run     func()
		records int
	}{{"one record a call", one, 1}, {"a batch of 64", many, 64}} {
		for range 20 { // warm-up: buffers grown to the records' size
			c.run()
		}
		before := count()
		const calls = 50
		for range calls {
			c.run()
		}
		if n := count() - before; n != 0 {
			t.Errorf("%s: %d allocations in the guest for %d records, want 0", c.name, n, calls*c.records)
		}
	}
}
