package host

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/asyncop"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// The Rust guests (plugins/examples/rust-*) are built with the Rust SDK
// (abi/sdk/rust/wasmstream) and must behave exactly like their Go
// counterparts: the same outputs, byte for byte, and the same outcomes.
// They are built by the toolchain abi/sdk/rust/wasm-target.sh finds
// (rustup's with wasm32-wasip1, else Debian's rustc with wasm32-wasi; the
// test command installs both); TestRustGuestDebianToolchain builds with
// Debian's too. Without a toolchain the tests fail, saying so.

var rustBuilds struct {
	sync.Mutex
	m map[string][]byte
}

// rustGuest builds the crate in dir once per test binary. A failed build
// fails the test calling it (and is tried again by the next one).
func rustGuest(t testing.TB, dir string) []byte {
	rustBuilds.Lock()
	defer rustBuilds.Unlock()
	if b, ok := rustBuilds.m[dir]; ok {
		return b
	}
	b := wt.BuildRustGuest(t, dir)
	if rustBuilds.m == nil {
		rustBuilds.m = map[string][]byte{}
	}
	rustBuilds.m[dir] = b
	return b
}

// sameRecords are records whose outputs are compared between the Go and
// the Rust guests.
func sameRecords() []abi.Record {
	binary := make([]byte, 512)
	for i := range binary {
		binary[i] = byte(i * 7)
	}
	big := bytes.Repeat([]byte("abcdefghij-É-ß-"), 210*1024/16)
	return []abi.Record{
		{Topic: "in", Key: []byte("k"), Value: []byte("hello, rust guest"), Headers: []abi.Header{{Key: "h", Value: []byte("v")}, {Key: "n"}}},
		{Topic: "in", Key: nil, Value: nil},
		{Topic: "in", Key: []byte{}, Value: []byte{}, Headers: []abi.Header{{Key: "empty", Value: []byte{}}, {Key: "null", Value: nil}}},
		{Topic: "in", Key: []byte{0, 1, 2, 0xff}, Value: binary, Offset: 7, Partition: 2, Attempt: 3},
		{Topic: "another-topic", Key: []byte("ключ"), Value: []byte("Grüße, ǅemal! straße ᾳ ﬀ ÿ — привет, 世界 \xe2\x82 \xc3"), Headers: []abi.Header{{Key: "ünïcode", Value: []byte("värde")}}},
		{Topic: "in", Key: []byte("big"), Value: big, Headers: []abi.Header{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}, {Key: "c", Value: []byte("3")}}},
		{Topic: "in", Value: []byte("please keep me"), Headers: []abi.Header{{Key: "match", Value: nil}}},
		{Topic: "in", Value: []byte("x-red-x"), Headers: []abi.Header{{Key: "match", Value: []byte("red")}}},
		{Topic: "in", Value: []byte("keep but not blue"), Headers: []abi.Header{{Key: "match", Value: []byte("blue!")}}},
		{Topic: "in", Value: []byte("drop me")},
	}
}

func TestRustGuestUppercaseSameAsGo(t *testing.T) {
	rs := newInstance(t, load(t, rustGuest(t, "plugins/examples/rust-uppercase"), Limits{}))
	gs := newInstance(t, load(t, guest(t, "plugins/examples/uppercase"), Limits{}))
	if info := rs.m.Info(); info.ABIVersion != 1 || info.Async {
		t.Fatalf("info %+v", info)
	}
	for round := 0; round < 3; round++ { // buffers are reused across records
		for i, r := range sameRecords() {
			r := r
			got := rs.Process(context.Background(), &r, nil)
			want := gs.Process(context.Background(), &r, nil)
			if got.Status != abi.StatusOK || len(got.Outputs) != 1 {
				t.Fatalf("record %d: %+v", i, got)
			}
			sameAsGo(t, "Rust", "record "+string(rune('0'+i)), got, want)
		}
	}
}

// The offline fallback abi/sdk/rust/wasm-target.sh names: Debian's rustc
// 1.63 (wasm32-wasi, libstd-rust-dev-wasm32, which the test command
// installs) still builds the SDK and a crate-free example, and the module
// behaves as the Go guest does. The other tests build with rustup's
// wasm32-wasip1 when the machine has it.
func TestRustGuestDebianToolchain(t *testing.T) {
	for _, f := range []string{"/usr/bin/rustc", "/usr/bin/cargo"} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("Debian's Rust toolchain (rustc cargo libstd-rust-dev-wasm32; the test command installs it): %v", err)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("/usr/bin/cargo", "build", "--offline", "--release", "--target", "wasm32-wasi", "--quiet")
	cmd.Dir = filepath.Join(wt.RepoRoot(t), "plugins/examples/rust-uppercase")
	cmd.Env = append(os.Environ(), "PATH=/usr/bin:"+os.Getenv("PATH"), "CARGO_TARGET_DIR="+out, "RUSTC=/usr/bin/rustc")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("Debian's cargo building rust-uppercase for wasm32-wasi: %v\n%s", err, b)
	}
	wasm, err := os.ReadFile(filepath.Join(out, "wasm32-wasi", "release", "rust_uppercase.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	rs := newInstance(t, load(t, wasm, Limits{}))
	gs := newInstance(t, load(t, guest(t, "plugins/examples/uppercase"), Limits{}))
	for i, r := range sameRecords() {
		r := r
		sameAsGo(t, "Rust (Debian's rustc)", "record "+string(rune('0'+i)), rs.Process(context.Background(), &r, nil), gs.Process(context.Background(), &r, nil))
	}
}

// Built with a version, both set the header processor.version last.
func TestRustGuestUppercaseVersionSameAsGo(t *testing.T) {
	rs := newInstance(t, load(t, wt.BuildRustGuest(t, "plugins/examples/rust-uppercase", "PROCESSOR_VERSION=2"), Limits{}))
	gs := newInstance(t, load(t, wt.BuildGoGuest(t, "plugins/examples/uppercase", "-ldflags=-X main.version=2"), Limits{}))
	for i, r := range sameRecords()[:5] {
		r := r
		got := rs.Process(context.Background(), &r, nil)
		sameAsGo(t, "Rust", "record "+string(rune('0'+i)), got, gs.Process(context.Background(), &r, nil))
		if hs := got.Outputs[0].Headers; len(hs) == 0 || hs[len(hs)-1].Key != "processor.version" || string(hs[len(hs)-1].Value) != "2" {
			t.Fatalf("record %d: headers %+v", i, hs)
		}
	}
}

func TestRustGuestFilterSameAsGo(t *testing.T) {
	rs := newInstance(t, load(t, rustGuest(t, "plugins/examples/rust-filter"), Limits{}))
	gs := newInstance(t, load(t, guest(t, "plugins/examples/filter"), Limits{}))
	kept := 0
	for i, r := range sameRecords() {
		r := r
		got := rs.Process(context.Background(), &r, nil)
		want := gs.Process(context.Background(), &r, nil)
		sameAsGo(t, "Rust", "record "+string(rune('0'+i)), got, want)
		kept += len(got.Outputs)
	}
	if kept == 0 || kept == len(sameRecords()) {
		t.Fatalf("kept %d of %d records: the cases do not exercise the filter", kept, len(sameRecords()))
	}
}

func loadAsyncGuest(t testing.TB, wasm []byte, srv *lookupServer, lim Limits, allow ...string) *Instance {
	t.Helper()
	if allow == nil {
		allow = []string{srv.Host()}
	}
	m, err := newEngine(t).Load(context.Background(), wasm, ModuleConfig{
		Name: "lookup", Limits: lim,
		Env:   map[string]string{"LOOKUP_URL": srv.URL + "/users/"},
		Async: AsyncConfig{Config: asyncop.Config{HTTP: asyncop.HTTP{AllowHosts: allow, Timeout: 2 * time.Second}}, Key: "pipelines.lookup.async"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return newInstance(t, m)
}

// processAll runs recs on in, waiting for those that go pending.
func processAll(t *testing.T, in *Instance, recs []abi.Record) []Result {
	t.Helper()
	out := make([]Result, len(recs))
	waiting := 0
	for i := range recs {
		res := in.Process(context.Background(), &recs[i], i)
		if res.Status == abi.StatusPending {
			waiting++
			continue
		}
		out[i] = res
	}
	for tag, res := range drain(t, in, waiting, 15*time.Second) {
		out[tag.(int)] = res
	}
	return out
}

func lookupRecords() []abi.Record {
	rs := []abi.Record{
		*rec("7", ""),
		{Topic: "in", Key: []byte("json"), Value: []byte(` {"order": [1, 2.5e3, true, null, "x\u00e9"]} `), Attempt: 2, Partition: 1, Offset: 99},
		{Topic: "in", Key: []byte("text"), Value: []byte("plain <text> & \"quotes\"\n\x01 é \xff"), Attempt: 1},
		{Topic: "in", Key: []byte("nullvalue"), Attempt: 1},
		{Topic: "in", Key: []byte("a b/ç?&x"), Value: []byte("{bad json"), Attempt: 4},
		{Topic: "in", Key: []byte{}, Value: []byte("12"), Attempt: 1},
		*rec("gone-1", ""),
		*rec("fail-1", ""),
		*rec("7", "chain"),
		*rec("7", "pending"),
		{Topic: "in", Key: nil, Value: []byte("no key"), Attempt: 1},
	}
	return rs
}

func TestRustGuestLookupSameAsGo(t *testing.T) {
	lim := Limits{RecordTimeout: 10 * time.Second}
	rsrv := newLookupServer(t, func() time.Duration { return time.Millisecond })
	gsrv := newLookupServer(t, func() time.Duration { return time.Millisecond })
	rs := loadAsyncGuest(t, rustGuest(t, "plugins/examples/rust-lookup"), rsrv, lim)
	gs := loadAsyncGuest(t, guest(t, "plugins/examples/lookup"), gsrv, lim)
	if info := rs.m.Info(); !info.Async {
		t.Fatalf("the Rust lookup guest does not import async_start: %+v", info)
	}
	recs := lookupRecords()
	for round := 0; round < 2; round++ { // the second round: fail-1 answers now
		got, want := processAll(t, rs, recs), processAll(t, gs, recs)
		for i := range recs {
			sameAsGo(t, "Rust", "lookup of "+string(recs[i].Key), got[i], want[i])
			if want[i].Err != nil && !strings.Contains(strings.ToLower(got[i].Err.Error()), strings.ToLower(firstWords(want[i].Err.Error()))) {
				t.Fatalf("lookup of %q: error %q, Go's %q", recs[i].Key, got[i].Err, want[i].Err)
			}
		}
		if round == 0 && (got[7].Status != abi.StatusRetry || got[9].Status != abi.StatusFail || got[10].Status != abi.StatusFail || got[0].Status != abi.StatusOK) {
			t.Fatalf("statuses: %v %v %v %v", got[0].Status, got[7].Status, got[9].Status, got[10].Status)
		}
	}
	if rsrv.Total.Load() != gsrv.Total.Load() {
		t.Fatalf("the Rust guest made %d requests, the Go guest %d", rsrv.Total.Load(), gsrv.Total.Load())
	}
}

// firstWords is the start of a Go guest's error message, which the Rust
// guest's must contain, ignoring case (the Go SDK's own prefixes aside).
func firstWords(s string) string {
	s = strings.TrimPrefix(s, "guest: ")
	if i := strings.Index(s, "guest: "); i >= 0 {
		s = s[i+len("guest: "):]
	}
	if len(s) > 24 {
		s = s[:24]
	}
	return s
}

// A refused host fails terminally; a panic in a continuation is a panic
// fault that discards the instance; a completion leak is caught at the
// deadline.
func TestRustGuestLookupFaults(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 0 })
	wasm := rustGuest(t, "plugins/examples/rust-lookup")

	in := loadAsyncGuest(t, wasm, srv, Limits{}, "lookup.internal:8080")
	res := processAll(t, in, []abi.Record{*rec("7", "")})[0]
	if res.Status != abi.StatusFail || res.Err == nil || !strings.Contains(res.Err.Error(), "is not allowed") {
		t.Fatalf("refused: %v %v", res.Status, res.Err)
	}

	in = loadAsyncGuest(t, wasm, srv, Limits{RecordTimeout: 5 * time.Second})
	res = processAll(t, in, []abi.Record{*rec("boom", "panic")})[0]
	if f := res.Fault(); f == nil || f.Kind != FaultPanic || !strings.Contains(f.Msg, "asked to panic in the continuation") {
		t.Fatalf("panic: %+v", res)
	}
	if !in.Dead() {
		t.Fatal("instance alive after a panic")
	}

	in = loadAsyncGuest(t, wasm, srv, Limits{RecordTimeout: 300 * time.Millisecond})
	got := processAll(t, in, []abi.Record{*rec("leak", "leak"), *rec("8", "")})
	if f := got[0].Fault(); f == nil || f.Kind != FaultDeadline || !strings.Contains(f.Msg, "timer") {
		t.Fatalf("leak: %+v", got[0])
	}
	if got[1].Err != nil || in.Dead() {
		t.Fatalf("record beside the leak: %+v (dead %v)", got[1], in.Dead())
	}
}
