package host

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// The count example in Rust and AssemblyScript (plugins/examples/rust-count,
// as-count), built with their SDKs' state functions, through the real host
// functions: the same outputs as the Go count for plain records, and the
// results and errnos of TestStateHostFunctions.

func TestRustGuestCountState(t *testing.T) {
	testCountGuestState(t, "Rust", rustGuest(t, "plugins/examples/rust-count"))
}

func TestASCountState(t *testing.T) {
	testCountGuestState(t, "AssemblyScript", asGuest(t, "plugins/examples/as-count"))
}

func testCountGuestState(t *testing.T, lang string, wasm []byte) {
	t.Run("same as Go", func(t *testing.T) {
		in := newInstance(t, load(t, wasm, Limits{}))
		gin := newInstance(t, load(t, guest(t, "plugins/examples/count"), Limits{}))
		st := &mapState{m: map[string][]byte{}, maxValue: 64 << 10}
		gst := &mapState{m: map[string][]byte{}, maxValue: 64 << 10}
		keys := [][]byte{[]byte("a"), []byte("a"), []byte("b"), nil, []byte{}, []byte("a"), {0, 0xff, 1}, []byte("ключ"), nil, []byte("b")}
		for round := 0; round < 3; round++ {
			for i, k := range keys {
				r := abi.Record{Topic: "in", Key: k, Value: []byte("v"), Partition: 1, Offset: int64(i), Attempt: 1}
				got := in.ProcessState(context.Background(), &r, nil, st)
				want := gin.ProcessState(context.Background(), &r, nil, gst)
				if got.Status != abi.StatusOK {
					t.Fatalf("round %d record %d: %v %v", round, i, got.Status, got.Err)
				}
				sameAsGo(t, lang, fmt.Sprintf("round %d record %d", round, i), got, want)
			}
		}
		if fmt.Sprint(st.m) != fmt.Sprint(gst.m) {
			t.Fatalf("state %v, the Go guest's %v", st.m, gst.m)
		}
	})

	checkCountHostFunctions(t, wasm, true)
}

// checkCountHostFunctions runs a count example (wasm) through the real state
// host functions: running counts, a value over the guest's first read
// buffer read back whole, a scan over several host calls, every errno;
// deletes: the example deletes on count.delete (the Rust and AssemblyScript
// ones; the Go one never deletes).
func checkCountHostFunctions(t *testing.T, wasm []byte, deletes bool) {
	t.Helper()
	in := newInstance(t, load(t, wasm, Limits{}))
	st := &mapState{m: map[string][]byte{}, maxValue: 64 << 10, foreign: "other-"}
	run := func(key string, hs ...abi.Header) Result {
		return in.ProcessState(context.Background(), &abi.Record{Topic: "in", Key: []byte(key), Attempt: 1, Headers: hs}, nil, st)
	}
	for i, want := range []string{"1", "2", "3"} {
		res := run("a")
		if res.Status != abi.StatusOK || len(res.Outputs) != 1 || string(res.Outputs[0].Value) != want {
			t.Fatalf("record %d: %v %v %+v", i, res.Status, res.Err, res.Outputs)
		}
	}
	// Values larger than the guest's first buffer come back whole.
	if res := run("b", abi.Header{Key: "count.pad", Value: []byte("5000")}); res.Status != abi.StatusOK {
		t.Fatalf("padded: %v", res.Err)
	}
	if got := st.m["b"]; len(got) != 5002 || !bytes.HasPrefix(got, []byte("1 ...")) {
		t.Fatalf("padded value: %d bytes, %.10q", len(got), got)
	}
	if res := run("b"); res.Status != abi.StatusOK || string(res.Outputs[0].Value) != "2" {
		t.Fatalf("read back a padded value: %v %+v", res.Err, res.Outputs)
	}
	if deletes { // a delete: the count starts again
		if res := run("b", abi.Header{Key: "count.delete"}); res.Status != abi.StatusOK || string(res.Outputs[0].Value) != "0" {
			t.Fatalf("delete: %v %v %+v", res.Status, res.Err, res.Outputs)
		}
		if _, ok := st.m["b"]; ok {
			t.Fatal("b still stored after the delete")
		}
		if res := run("b"); res.Status != abi.StatusOK || string(res.Outputs[0].Value) != "1" {
			t.Fatalf("count after the delete: %v %+v", res.Err, res.Outputs)
		}
	}
	// A scan in several batches (300 entries of over 300 bytes: more than
	// one 64 KiB buffer).
	for i := 0; i < 300; i++ {
		st.m["s/"+strings.Repeat("k", 3)+string(rune('a'+i%26))+string(rune('a'+i/26))] = bytes.Repeat([]byte{'v'}, 300)
	}
	st.m["t/outside"] = []byte("x")
	res := run("s/", abi.Header{Key: "count.scan", Value: []byte("s/")})
	if res.Status != abi.StatusOK || len(res.Outputs) != 302 {
		t.Fatalf("scan: %v %v, %d outputs, want 302", res.Status, res.Err, len(res.Outputs))
	}
	if string(res.Outputs[1].Key) != "s/" || string(res.Outputs[1].Value) != "1" {
		t.Fatalf("scan: first entry %q=%q, want the record's own write s/=1", res.Outputs[1].Key, res.Outputs[1].Value)
	}
	for i := 2; i < len(res.Outputs); i++ {
		o := res.Outputs[i]
		if string(res.Outputs[i-1].Key) >= string(o.Key) || !strings.HasPrefix(string(o.Key), "s/") {
			t.Fatalf("scan out of order at %d: %s, %s", i, res.Outputs[i-1].Key, o.Key)
		}
		if !bytes.Equal(o.Value, st.m[string(o.Key)]) {
			t.Fatalf("scan: %s = %q", o.Key, o.Value)
		}
	}
	type errCase struct {
		name string
		res  Result
		want abi.Errno
	}
	cases := []errCase{
		{"too large", run("c", abi.Header{Key: "count.pad", Value: []byte("70000")}), abi.ErrnoTooLarge},
		{"key too large", run(strings.Repeat("k", abi.MaxStateKeyBytes+1)), abi.ErrnoTooLarge},
		{"scan prefix too large", run("d", abi.Header{Key: "count.scan", Value: bytes.Repeat([]byte("p"), abi.MaxStateKeyBytes+1)}), abi.ErrnoTooLarge},
		{"wrong partition", run("a", abi.Header{Key: "count.key", Value: []byte("other-a")}), abi.ErrnoWrongKey},
		{"no state", in.Process(context.Background(), &abi.Record{Topic: "in", Key: []byte("a"), Attempt: 1}, nil), abi.ErrnoNoState},
	}
	if deletes {
		cases = append(cases, errCase{"key too large to delete", run(strings.Repeat("k", abi.MaxStateKeyBytes+1), abi.Header{Key: "count.delete"}), abi.ErrnoTooLarge})
	}
	for _, tc := range cases {
		if tc.res.Status != abi.StatusFail || tc.res.Err == nil || !strings.Contains(tc.res.Err.Error(), tc.want.Error()) {
			t.Errorf("%s: %v %v, want a failure naming %q", tc.name, tc.res.Status, tc.res.Err, tc.want.Error())
		}
	}
	if string(st.m["a"]) != "3" {
		t.Fatalf("a = %q", st.m["a"])
	}
	if _, ok := st.m["c"]; ok {
		t.Fatal("c stored by a failed record")
	}
}

// Built with a version, rust-count sets processor.version as count does.
func TestRustGuestCountVersionSameAsGo(t *testing.T) {
	in := newInstance(t, load(t, wt.BuildRustGuest(t, "plugins/examples/rust-count", "PROCESSOR_VERSION=2"), Limits{}))
	gin := newInstance(t, load(t, wt.BuildGoGuest(t, "plugins/examples/count", "-ldflags=-X main.version=2"), Limits{}))
	st, gst := &mapState{m: map[string][]byte{}, maxValue: 64 << 10}, &mapState{m: map[string][]byte{}, maxValue: 64 << 10}
	for i, k := range []string{"a", "a", "b"} {
		r := abi.Record{Topic: "in", Key: []byte(k), Attempt: 1}
		got := in.ProcessState(context.Background(), &r, nil, st)
		sameAsGo(t, "Rust", fmt.Sprintf("record %d", i), got, gin.ProcessState(context.Background(), &r, nil, gst))
		if hs := got.Outputs[0].Headers; len(hs) != 1 || hs[0].Key != "processor.version" || string(hs[0].Value) != "2" {
			t.Fatalf("record %d: headers %+v", i, hs)
		}
	}
}
