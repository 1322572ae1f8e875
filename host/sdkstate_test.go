package host

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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
	// The empty key is a key: a record with a null or an empty key counts
	// under it.
	for i, k := range [][]byte{nil, {}} {
		res := in.ProcessState(context.Background(), &abi.Record{Topic: "in", Key: k, Attempt: 1}, nil, st)
		if res.Status != abi.StatusOK || string(res.Outputs[0].Value) != fmt.Sprint(i+1) || len(res.Outputs[0].Key) != 0 {
			t.Fatalf("record %d of the empty key: %v %v %+v", i, res.Status, res.Err, res.Outputs)
		}
	}
	// A scan of every key lists it first, even when its entry alone fills
	// the guest's first scan buffer (64 KiB): the host answers "too small"
	// rather than a batch of the empty key alone, whose cursor (the empty
	// key) would start the scan over — the guest looped until the record's
	// deadline.
	st.m[""] = bytes.Repeat([]byte{'v'}, 64<<10-8-4)
	res = run("z", abi.Header{Key: "count.scan", Value: []byte{}})
	if res.Status != abi.StatusOK || len(res.Outputs) != 1+len(st.m) {
		t.Fatalf("scan of every key: %v %v, %d outputs, want %d", res.Status, res.Err, len(res.Outputs), 1+len(st.m))
	}
	if o := res.Outputs[1]; len(o.Key) != 0 || !bytes.Equal(o.Value, st.m[""]) || string(res.Outputs[2].Key) != "a" {
		t.Fatalf("scan of every key: first %q (%d bytes), then %q; want the empty key, then a", o.Key, len(o.Value), res.Outputs[2].Key)
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

// With the header count.async, rust-count and as-count are count-async:
// over the same records and the same shared state, the same outputs and
// final state as the Go count-async, the reads going through the
// asynchronous state operations (kinds 3 and 4): counts, the record's own
// write read back (count.set), a scan chained over batches of 100 bytes,
// an abandoned read, and the refusals at async_start failing the record
// terminally with the errno's message (a key of another partition: -10; a
// key or scan prefix over 1024 bytes: -9; no state: -11).

func TestRustGuestCountAsyncSameAsGo(t *testing.T) {
	testCountAsyncSameAsGo(t, "Rust", rustGuest(t, "plugins/examples/rust-count"))
}

func TestASCountAsyncSameAsGo(t *testing.T) {
	testCountAsyncSameAsGo(t, "AssemblyScript", asGuest(t, "plugins/examples/as-count"))
}

func testCountAsyncSameAsGo(t *testing.T, lang string, wasm []byte) {
	lim := Limits{RecordTimeout: 10 * time.Second}
	in := newInstance(t, load(t, wasm, lim))
	gin := newInstance(t, loadCountAsync(t, lim))
	sh, gsh := newSharedState(), newSharedState()
	for _, s := range []*sharedState{sh, gsh} {
		for i := 0; i < 50; i++ {
			s.m[fmt.Sprintf("s/%03d", i)] = bytes.Repeat([]byte{'v'}, i)
		}
		s.m["t/outside"] = []byte("x")
	}
	// run processes one record to its outcome and commits its writes when
	// it succeeds (a nil key is a null key).
	run := func(in *Instance, sh *sharedState, key []byte, hs ...abi.Header) Result {
		t.Helper()
		st := sh.begin()
		res := in.ProcessState(context.Background(), &abi.Record{Topic: "in", Key: key, Attempt: 1, Headers: hs}, "r", st)
		if res.Status == abi.StatusPending {
			res = drain(t, in, 1, 10*time.Second)["r"]
		}
		if res.Status == abi.StatusOK {
			st.commit()
		}
		return res
	}
	long := strings.Repeat("k", abi.MaxStateKeyBytes+1)
	type rec struct {
		key  []byte
		hs   []abi.Header
		errs abi.Errno // the record fails with this errno
	}
	var recs []rec
	for _, k := range [][]byte{[]byte("a"), []byte("a"), []byte("b"), nil, {}, []byte("a"), {0, 0xff, 1}, []byte("ключ"), nil, []byte("b")} {
		recs = append(recs, rec{key: k})
	}
	recs = append(recs,
		rec{key: []byte("a"), hs: []abi.Header{hdr("count.set", "41")}},
		rec{key: []byte("b"), hs: []abi.Header{hdr("count.key", "c")}},
		rec{key: []byte("s/"), hs: []abi.Header{hdr("count.scan", "s/"), hdr("count.scanbytes", "100")}},
		rec{key: []byte("a"), hs: []abi.Header{hdr("count.scan", "")}},
		rec{key: []byte("a"), hs: []abi.Header{hdr("count.abandon", "")}},
		rec{key: []byte("a"), hs: []abi.Header{hdr("count.key", "other-a")}, errs: abi.ErrnoWrongKey},
		rec{key: []byte(long), errs: abi.ErrnoTooLarge},
		rec{key: []byte("a"), hs: []abi.Header{hdr("count.scan", long)}, errs: abi.ErrnoTooLarge},
		rec{key: []byte("a"), hs: []abi.Header{hdr("count.set", "7"), hdr("count.key", "other-b")}, errs: abi.ErrnoWrongKey},
	)
	for round := 0; round < 2; round++ {
		for i, r := range recs {
			what := fmt.Sprintf("round %d record %d (%.20q %v)", round, i, r.key, r.hs)
			reads := sh.reads.Load()
			got := run(in, sh, r.key, append([]abi.Header{hdr("count.async", "")}, r.hs...)...)
			want := run(gin, gsh, r.key, r.hs...)
			sameAsGo(t, lang, what, got, want)
			if r.errs != 0 {
				if got.Status != abi.StatusFail || got.Err == nil || !strings.Contains(got.Err.Error(), r.errs.Error()) {
					t.Fatalf("%s: %v %v, want a failure naming %q", what, got.Status, got.Err, r.errs.Error())
				}
				continue
			}
			if got.Status != abi.StatusOK {
				t.Fatalf("%s: %v %v", what, got.Status, got.Err)
			}
			if sh.reads.Load() == reads && !slices.ContainsFunc(r.hs, func(h abi.Header) bool { return h.Key == "count.abandon" }) {
				t.Fatalf("%s: no read through the Reader: the count did not go the asynchronous path", what)
			}
		}
	}
	if fmt.Sprint(sh.m) != fmt.Sprint(gsh.m) {
		t.Fatalf("state %v, the Go guest's %v", sh.m, gsh.m)
	}
	if string(sh.m["a"]) != "43" || string(sh.m["c"]) != "2" {
		t.Fatalf("a = %q, c = %q", sh.m["a"], sh.m["c"])
	}
	// The scan record emitted the count and the 51 keys with the prefix, in
	// batches of 100 bytes: many operations.
	before := sh.reads.Load()
	res := run(in, sh, []byte("s/"), hdr("count.async", ""), hdr("count.scan", "s/"), hdr("count.scanbytes", "100"))
	if res.Status != abi.StatusOK || len(res.Outputs) != 52 {
		t.Fatalf("scan: %v %v, %d outputs", res.Status, res.Err, len(res.Outputs))
	}
	if ops := sh.reads.Load() - before - 1; ops < 15 {
		t.Fatalf("%d scan operations, want at least 15 for 100-byte batches", ops)
	}
	// No state: the read is refused at async_start (-11), as in Go.
	r := &abi.Record{Topic: "in", Key: []byte("a"), Attempt: 1, Headers: []abi.Header{hdr("count.async", "")}}
	got, want := in.Process(context.Background(), r, nil), gin.Process(context.Background(), r, nil)
	sameAsGo(t, lang, "no state", got, want)
	if got.Status != abi.StatusFail || got.Err == nil || !strings.Contains(got.Err.Error(), abi.ErrnoNoState.Error()) {
		t.Fatalf("no state: %v %v", got.Status, got.Err)
	}
	if in.Dead() || in.Pending() != 0 {
		t.Fatalf("%s instance: dead %v, pending %d", lang, in.Dead(), in.Pending())
	}
}

// The dedup example in Rust and AssemblyScript (plugins/examples/rust-dedup,
// as-dedup) through the real host functions: the same outputs as the Go
// dedup — the first record of each id with its value and headers, nothing
// for the later ones — and the same state; an id the host refuses fails the
// record naming the errno.

func TestRustGuestDedupState(t *testing.T) {
	testDedupSameAsGo(t, "Rust", rustGuest(t, "plugins/examples/rust-dedup"))
}

func TestASDedupState(t *testing.T) {
	testDedupSameAsGo(t, "AssemblyScript", asGuest(t, "plugins/examples/as-dedup"))
}

func testDedupSameAsGo(t *testing.T, lang string, wasm []byte) {
	in := newInstance(t, load(t, wasm, Limits{}))
	gin := newInstance(t, load(t, guest(t, "plugins/examples/dedup"), Limits{}))
	st := &mapState{m: map[string][]byte{}, maxValue: 64 << 10, foreign: "other-"}
	gst := &mapState{m: map[string][]byte{}, maxValue: 64 << 10, foreign: "other-"}
	ids := [][]byte{[]byte("a"), []byte("b"), []byte("a"), nil, []byte{}, []byte("c"), {0, 0xff, 1}, []byte("b"), nil, []byte("ключ"), {0, 0xff, 1}}
	emitted := 0
	for i, id := range ids {
		r := abi.Record{Topic: "in", Key: id, Value: []byte(fmt.Sprintf("v%d", i)), Partition: 1, Offset: int64(i), Attempt: 1,
			Headers: []abi.Header{{Key: "h", Value: []byte("x")}, {Key: "null"}}}
		got := in.ProcessState(context.Background(), &r, nil, st)
		want := gin.ProcessState(context.Background(), &r, nil, gst)
		if got.Status != abi.StatusOK {
			t.Fatalf("record %d: %v %v", i, got.Status, got.Err)
		}
		sameAsGo(t, lang, fmt.Sprintf("record %d", i), got, want)
		emitted += len(got.Outputs)
	}
	// a, b, the null/empty id (one state key), c, {0 ff 1}, ключ.
	if emitted != 6 {
		t.Fatalf("%d outputs, want the first of each of 6 ids", emitted)
	}
	if fmt.Sprint(st.m) != fmt.Sprint(gst.m) {
		t.Fatalf("state %v, the Go guest's %v", st.m, gst.m)
	}
	res := in.ProcessState(context.Background(), &abi.Record{Topic: "in", Key: []byte("other-a"), Attempt: 1}, nil, st)
	if res.Status != abi.StatusFail || res.Err == nil || !strings.Contains(res.Err.Error(), abi.ErrnoWrongKey.Error()) {
		t.Fatalf("an id of another partition: %v %v, want a failure naming %q", res.Status, res.Err, abi.ErrnoWrongKey.Error())
	}
}
