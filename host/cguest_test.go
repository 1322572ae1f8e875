//go:build integration

package host

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// The C guest is written from abi/ABI.md alone: it proves the spec is enough
// to implement the ABI in another language. It needs clang (installed by the
// test command), hence the integration build tag.

func cGuest(t testing.TB) *Instance {
	m := load(t, wt.BuildCGuest(t, "plugins/examples/c-uppercase/uppercase.c"), Limits{})
	return newInstance(t, m)
}

func TestCGuestUppercase(t *testing.T) {
	in := cGuest(t)
	recs := []abi.Record{
		{Topic: "in", Key: []byte("k"), Value: []byte("hello, c guest"), Headers: []abi.Header{{Key: "h", Value: []byte("v")}, {Key: "n"}}},
		{Topic: "in", Key: nil, Value: nil},
		{Topic: "a-longer-topic", Key: []byte{}, Value: []byte(strings.Repeat("xyz", 10000))},
	}
	for _, tc := range recs {
		res := in.Process(context.Background(), &tc, nil)
		if res.Err != nil || len(res.Outputs) != 1 {
			t.Fatalf("%+v", res)
		}
		o := res.Outputs[0]
		want := tc.Value
		if want != nil {
			want = []byte(strings.ToUpper(string(want)))
		}
		if string(o.Value) != string(want) || (o.Value == nil) != (tc.Value == nil) || string(o.Key) != string(tc.Key) || (o.Key == nil) != (tc.Key == nil) ||
			o.Topic != "" || o.Partition != -1 || len(o.Headers) != len(tc.Headers) {
			t.Fatalf("output %+v for %+v", o, tc)
		}
		for i, h := range tc.Headers {
			if o.Headers[i].Key != h.Key || string(o.Headers[i].Value) != string(h.Value) || (o.Headers[i].Value == nil) != (h.Value == nil) {
				t.Fatalf("header %d: %+v", i, o.Headers[i])
			}
		}
	}
	// Its batch entry (ABI.md §10) gives what one call per record gives.
	checkBatchSameAsProcess(t, load(t, wt.BuildCGuest(t, "plugins/examples/c-uppercase/uppercase.c"), Limits{}), append(recs, sameRecords()...), 1, 4, 16)
}

// The outputs of a batch's records that end ok share the run's memory
// (runOutputs): each record's outputs and their bytes are its own (capped:
// appending to one record's outputs, as the engine does with changelog
// records, moves them elsewhere instead of into the next record's), and a
// run of records costs a few allocations for its outputs, not two a record.
func TestBatchRunOutputsShared(t *testing.T) {
	in := cGuest(t)
	defer in.Close(context.Background())
	const n = 64
	recs := make([]abi.Record, n)
	for i := range recs {
		recs[i] = abi.Record{Topic: "in", Offset: int64(i), Value: []byte(fmt.Sprintf("record %03d", i))}
	}
	batch, out := batchOf(recs), make([]Outcome, n)
	if ran := in.ProcessBatch(context.Background(), batch, out); ran != n {
		t.Fatalf("ran %d", ran)
	}
	for i := range out {
		o := out[i].Outputs
		if out[i].Status != abi.StatusOK || len(o) != 1 || cap(o) != 1 || string(o[0].Value) != fmt.Sprintf("RECORD %03d", i) {
			t.Fatalf("record %d: %v %v, %d outputs (cap %d)", i, out[i].Status, out[i].Err, len(o), cap(o))
		}
		if v := o[0].Value; cap(v) != len(v) {
			t.Fatalf("record %d: its value has room past its end (%d > %d)", i, cap(v), len(v))
		}
	}
	grown := append(out[0].Outputs, abi.Output{Value: []byte("changelog")})
	out[0].Outputs[0].Value[0] = 'x'
	if string(out[1].Outputs[0].Value) != "RECORD 001" || string(grown[1].Value) != "changelog" {
		t.Fatalf("record 0's outputs reach into record 1's: %q", out[1].Outputs[0].Value)
	}
	allocs := testing.AllocsPerRun(20, func() {
		if ran := in.ProcessBatch(context.Background(), batch, out); ran != n {
			t.Fatalf("ran %d", ran)
		}
	})
	if per := allocs / n; per >= 0.5 {
		t.Fatalf("%.2f allocations a record for a run of %d with one output each, want < 0.5", per, n)
	}
	t.Logf("%.0f allocations for a run of %d records", allocs, n)
}
