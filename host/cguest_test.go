//go:build integration

package host

import (
	"context"
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
