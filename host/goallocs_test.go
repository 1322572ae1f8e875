package host

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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

// A record that waits on an operation costs the Go SDK's path a few heap
// allocations in the guest, whatever the operation: the result's buffer
// (the continuation may keep what it decodes), and for an HTTP response
// its decoded form (one allocation, headers included: their names are the
// abi package's strings), and a 64th of one for the record's emitter (kept
// for good, so that a continuation kept past its record's decision cannot
// emit for another record; they come 64 to an allocation). The
// continuation the processor makes is one more, its own. The record's
// buffer, decoded form and pending-call entry are those of a record decided
// before: each output is checked against its own record (key and value),
// while the others wait and are decided in any order. Counted inside the
// guest over 400 records, 8 waiting at a time, after a warm-up.
func TestGoSDKAsyncPathAllocations(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 0 })
	m, _ := loadLookupWasm(t, wt.BuildGoGuest(t, "host/testdata/goallocs"), srv, Limits{RecordTimeout: 10 * time.Second})
	in := newInstance(t, m)
	defer in.Close(context.Background())
	mallocs := in.mod.ExportedFunction("test_mallocs")
	count := func() uint64 {
		st := in.newRec(nil)
		res := in.call(context.Background(), st, nil, func() ([]uint64, api.Function) { return in.stack[:1], mallocs })
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		return in.stack[0]
	}
	ctx := context.Background()
	value := strings.Repeat("x", 100)
	for _, c := range []struct {
		mode string
		want uint64 // per record: the SDK's, and the processor's continuation
	}{{"timer", 1 + 1}, {"http", 2 + 1}} {
		recs := make([]abi.Record, 8)
		rounds := 0
		round := func() {
			rounds++
			for i := range recs {
				recs[i] = abi.Record{Topic: "in", Key: fmt.Appendf(nil, "key-%d-%d", rounds, i), Value: fmt.Appendf(nil, "%s-%d-%d", value, rounds, i), Attempt: 1, Offset: int64(i),
					Headers: []abi.Header{{Key: "await", Value: []byte(c.mode)}}}
				if res := in.Process(ctx, &recs[i], i); res.Status != abi.StatusPending {
					t.Fatalf("%s: record %d: %v %v", c.mode, i, res.Status, res.Err)
				}
			}
			for done := 0; done < len(recs); {
				select {
				case <-in.Ready():
				case <-time.After(10 * time.Second):
					t.Fatalf("%s: %d of %d records decided after 10 s", c.mode, done, len(recs))
				}
				for _, d := range in.Poll(ctx, time.Now()) {
					r := &recs[d.Tag.(int)]
					if d.Result.Err != nil || len(d.Result.Outputs) != 1 || string(d.Result.Outputs[0].Key) != string(r.Key) ||
						string(d.Result.Outputs[0].Value) != strings.ToUpper(string(r.Value)) {
						t.Fatalf("%s: record %v (key %s): %+v", c.mode, d.Tag, r.Key, d.Result)
					}
					done++
				}
			}
		}
		for range 10 {
			round()
		}
		before := count()
		const measured = 50
		for range measured {
			round()
		}
		n := count() - before
		per := float64(n) / float64(measured*len(recs))
		t.Logf("%s: %.2f allocations in the guest a record", c.mode, per)
		// The emitters' slabs, and slack of a few allocations in all: the
		// one-off growth of a map or a list of spares.
		records := uint64(measured * len(recs))
		if n > c.want*records+records/64+1+8 {
			t.Errorf("%s: %.2f allocations in the guest a record (%d over %d records), want at most %d and a 64th", c.mode, per, n, records, c.want)
		}
	}
}
