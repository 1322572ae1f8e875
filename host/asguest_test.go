package host

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/asyncop"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// The AssemblyScript guests (plugins/examples/as-*) are built with the SDK in
// abi/sdk/assemblyscript and must behave exactly as the Go examples: the
// same records give byte-identical outputs and the same statuses. Building
// them needs node and npm (the test command installs them); without them
// the tests fail, they do not skip.

var asBuilds sync.Map

func asGuest(t testing.TB, dir string) []byte {
	f, _ := asBuilds.LoadOrStore(dir, sync.OnceValue(func() []byte { return wt.BuildASGuest(t, dir+"/assembly/index.ts") }))
	b := f.(func() []byte)()
	if b == nil {
		t.Fatalf("%s: the build failed (see the first test that built it)", dir)
	}
	return b
}

func uppercaseRecords() []abi.Record {
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	big := bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog — ÿ é ß ǆ ﬁ "), 210*1024/60)
	// Every ASCII byte at each place of an eight-byte word, and a tail
	// shorter than a word: the all-ASCII path goes eight bytes at a time.
	ascii := make([]byte, 0, 3*128+5)
	for i := 0; i < 3*128+5; i++ {
		ascii = append(ascii, byte(i*3%128))
	}
	return []abi.Record{
		{Topic: "in", Key: []byte("k"), Value: []byte("hello, assemblyscript"), Attempt: 1},
		{Topic: "in", Key: nil, Value: nil, Attempt: 1},
		{Topic: "in", Key: []byte{}, Value: []byte{}, Attempt: 2},
		{Topic: "in", Key: nil, Value: []byte("no key")},
		{Topic: "in", Key: []byte("null value"), Value: nil},
		{Topic: "in", Key: bin, Value: bin, Partition: 7, Offset: 1 << 40, Timestamp: 1700000000123},
		{Topic: "in", Key: []byte("h"), Value: []byte("headers"), Headers: []abi.Header{
			{Key: "h", Value: []byte("v")}, {Key: "null", Value: nil}, {Key: "empty", Value: []byte{}}, {Key: "ключ", Value: []byte("значение")}, {Key: "h", Value: []byte{0, 0xff}}}},
		{Topic: "другой-topic", Key: []byte("ü"), Value: []byte("grüße, ἀλφα, ǅ ǈ, ﬀ, 𐐨 and İı, \xff\xfe broken \xe2\x82 utf-8 \xed\xa0\x80 surrogate")},
		{Topic: "a-longer-topic", Key: []byte("big"), Value: big[:210*1024]},
		{Topic: "in", Key: []byte("ascii"), Value: []byte(strings.Repeat("azAZ09{}`~", 1000))},
		{Topic: "in", Key: []byte("every ascii byte"), Value: ascii},
		{Topic: "in", Key: []byte("short"), Value: []byte("a`z{")},
	}
}

func TestASUppercaseSameAsGo(t *testing.T) {
	goIn := newInstance(t, load(t, guest(t, "plugins/examples/uppercase"), Limits{}))
	asIn := newInstance(t, load(t, asGuest(t, "plugins/examples/as-uppercase"), Limits{}))
	for round := 0; round < 2; round++ { // the second round reuses the guests' buffers
		for i, r := range uppercaseRecords() {
			goRes := goIn.Process(context.Background(), &r, nil)
			asRes := asIn.Process(context.Background(), &r, nil)
			if goRes.Status != abi.StatusOK || len(goRes.Outputs) != 1 {
				t.Fatalf("record %d: Go guest %v %v", i, goRes.Status, goRes.Err)
			}
			sameAsGo(t, "AssemblyScript", fmt.Sprintf("round %d record %d", round, i), asRes, goRes)
		}
	}
}

func TestASFilterSameAsGo(t *testing.T) {
	goIn := newInstance(t, load(t, guest(t, "plugins/examples/filter"), Limits{}))
	asIn := newInstance(t, load(t, asGuest(t, "plugins/examples/as-filter"), Limits{}))
	hm := func(v []byte) []abi.Header {
		return []abi.Header{{Key: "x", Value: []byte("y")}, {Key: "match", Value: v}}
	}
	kept := 0
	for i, r := range []abi.Record{
		{Topic: "in", Key: []byte("k"), Value: []byte("please keep me")},
		{Topic: "in", Key: []byte("k"), Value: []byte("drop me")},
		{Topic: "in", Key: nil, Value: nil},
		{Topic: "in", Key: []byte("k"), Value: []byte("keep")},
		{Topic: "in", Key: []byte("k"), Value: []byte("kee")},
		{Topic: "in", Key: []byte("k"), Value: []byte("needle in a haystack"), Headers: hm([]byte("needle"))},
		{Topic: "in", Key: []byte("k"), Value: []byte("keep, but no needle"), Headers: hm([]byte("needle"))},
		{Topic: "in", Key: []byte("k"), Value: []byte("anything"), Headers: hm(nil)},
		{Topic: "in", Key: []byte("k"), Value: nil, Headers: hm([]byte{})},
		{Topic: "in", Key: []byte("k"), Value: nil, Headers: hm([]byte("x"))},
		{Topic: "in", Key: []byte{}, Value: []byte("ünïcode keep"), Headers: []abi.Header{{Key: "match", Value: []byte("ünï")}, {Key: "match", Value: []byte("zzz")}}},
		{Topic: "in", Key: []byte("big"), Value: append(bytes.Repeat([]byte("x"), 210*1024), "keep"...)},
	} {
		goRes := goIn.Process(context.Background(), &r, nil)
		asRes := asIn.Process(context.Background(), &r, nil)
		sameAsGo(t, "AssemblyScript", fmt.Sprintf("record %d", i), asRes, goRes)
		kept += len(goRes.Outputs)
	}
	if kept < 5 {
		t.Fatalf("only %d records kept: the cases do not cover keeping", kept)
	}
}

// lookupResults runs records through a lookup guest (Go or
// AssemblyScript) against a fresh lookup service, and returns each
// record's result by index.
func lookupResults(t *testing.T, wasm []byte, recs []*abi.Record) []Result {
	srv := newLookupServer(t, func() time.Duration { return 0 })
	rs := make([]abi.Record, len(recs))
	for i, r := range recs {
		rs[i] = *r
	}
	return processAll(t, loadAsyncGuest(t, wasm, srv, Limits{RecordTimeout: 5 * time.Second}), rs)
}

func TestASLookupSameAsGo(t *testing.T) {
	r := func(key, value string, attempt uint32, mode string) *abi.Record {
		rec := &abi.Record{Topic: "in", Partition: 2, Offset: 99, Key: []byte(key), Value: []byte(value), Attempt: attempt}
		if mode != "" {
			rec.Headers = []abi.Header{{Key: "lookup.mode", Value: []byte(mode)}}
		}
		return rec
	}
	recs := []*abi.Record{
		r("k1", `"v-k1"`, 1, ""),
		r("k2", `{"a": [1, 2.5e3, true, null, "x"]}`, 3, ""),
		r("k3", "not json <&> \"quoted\"\n\ttab", 1, ""),
		r("k4", "\xff\xfe invalid utf-8 \u2028 \x01", 1, ""),
		r("gone5", `"v"`, 1, ""), // 404: "lookup": null
		r("fail6", `"v"`, 1, ""), // 503 on the first request: retry
		r("k7 / ü?;,$&+:=@", `"v"`, 1, ""),
		r("k8", `"v"`, 1, "chain"),
		r("k9", `"v"`, 1, "pending"),
		r("k10", "", 1, ""),
		r("k11", `[[[[]]]] `, 2, ""),
		r("k12", `01`, 1, ""),
		{Topic: "in", Key: []byte("k13"), Value: nil, Attempt: 1},
		{Topic: "in", Key: nil, Value: []byte("no key"), Attempt: 1},
	}
	goRes := lookupResults(t, guest(t, "plugins/examples/lookup"), recs)
	asRes := lookupResults(t, asGuest(t, "plugins/examples/as-lookup"), recs)
	okN := 0
	for i := range recs {
		sameAsGo(t, "AssemblyScript", fmt.Sprintf("record %d (key %q)", i, recs[i].Key), asRes[i], goRes[i])
		if len(goRes[i].Outputs) == 1 {
			okN++
			t.Logf("%s", goRes[i].Outputs[0].Value)
		}
	}
	if okN < 8 {
		t.Fatalf("only %d records succeeded", okN)
	}
	for _, want := range []struct {
		i  int
		st abi.Status
	}{{5, abi.StatusRetry}, {8, abi.StatusFail}, {13, abi.StatusFail}} {
		if asRes[want.i].Status != want.st {
			t.Fatalf("record %d: status %v, want %v", want.i, asRes[want.i].Status, want.st)
		}
	}
}

// A refused host fails the record terminally, as in the Go guest.
func TestASLookupRefusedHost(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 0 })
	m, err := sharedEngine(t).Load(context.Background(), asGuest(t, "plugins/examples/as-lookup"), ModuleConfig{
		Name: "lookup", Env: map[string]string{"LOOKUP_URL": srv.URL + "/users/"},
		Async: AsyncConfig{Config: asyncop.Config{HTTP: asyncop.HTTP{AllowHosts: []string{"lookup.internal:8080"}}}, Key: "pipelines.lookup.async"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	in := newInstance(t, m)
	res := in.Process(context.Background(), rec("7", ""), 1)
	if res.Status == abi.StatusPending {
		res = drain(t, in, 1, 5*time.Second)[1]
	}
	if res.Status != abi.StatusFail || res.Err == nil || !strings.Contains(res.Err.Error(), "is not allowed") {
		t.Fatalf("%v %v", res.Status, res.Err)
	}
}

// A record that never decides (lookup.mode "leak" re-arms a timer forever)
// fails at its deadline, and the instance lives on, as with the Go guest.
func TestASLookupCompletionLeak(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 0 })
	m, err := sharedEngine(t).Load(context.Background(), asGuest(t, "plugins/examples/as-lookup"), ModuleConfig{
		Name: "lookup", Limits: Limits{RecordTimeout: 300 * time.Millisecond},
		Env:   map[string]string{"LOOKUP_URL": srv.URL + "/users/"},
		Async: AsyncConfig{Config: asyncop.Config{HTTP: asyncop.HTTP{AllowHosts: []string{srv.Host()}}}, Key: "pipelines.lookup.async"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	in := newInstance(t, m)
	if res := in.Process(context.Background(), rec("1", "leak"), 1); res.Status != abi.StatusPending {
		t.Fatalf("%v %v", res.Status, res.Err)
	}
	got := drain(t, in, 1, 5*time.Second)[1]
	if f := got.Fault(); f == nil || f.Kind != FaultDeadline {
		t.Fatalf("%+v", got)
	}
	if res := in.Process(context.Background(), rec("2", ""), 2); res.Status != abi.StatusPending {
		t.Fatalf("the instance did not live on: %v %v", res.Status, res.Err)
	}
	if got := drain(t, in, 1, 5*time.Second)[2]; got.Status != abi.StatusOK || len(got.Outputs) != 1 {
		t.Fatalf("%+v", got)
	}
}

// An abort in a continuation traps: the record fails with the abort's
// message, and the other record waiting on the instance is restarted
// (instance_lost), as with the Go guest's panic.
func TestASLookupAbortLosesInstance(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 0 })
	m, err := sharedEngine(t).Load(context.Background(), asGuest(t, "plugins/examples/as-lookup"), ModuleConfig{
		Name: "lookup", Limits: Limits{RecordTimeout: 5 * time.Second},
		Env:   map[string]string{"LOOKUP_URL": srv.URL + "/users/"},
		Async: AsyncConfig{Config: asyncop.Config{HTTP: asyncop.HTTP{AllowHosts: []string{srv.Host()}}}, Key: "pipelines.lookup.async"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	in := newInstance(t, m)
	in.Process(context.Background(), rec("slow", ""), "slow")
	in.Process(context.Background(), rec("boom", "panic"), "boom")
	got := drain(t, in, 2, 5*time.Second)
	if f := got["boom"].Fault(); f == nil || f.Kind != FaultTrap || !strings.Contains(got["boom"].Err.Error(), "asked to panic in the continuation") {
		t.Fatalf("boom: %+v", got["boom"])
	}
	if f := got["slow"].Fault(); f == nil || f.Kind != FaultInstanceLost {
		t.Fatalf("slow: %+v", got["slow"])
	}
	if !in.Dead() {
		t.Fatal("instance alive after an abort")
	}
}
