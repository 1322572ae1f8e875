package host

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// batchOf makes the BatchRecords of recs, tagged with their index.
func batchOf(recs []abi.Record) []BatchRecord {
	b := make([]BatchRecord, len(recs))
	for i := range recs {
		b[i] = BatchRecord{Rec: &recs[i], Tag: i}
	}
	return b
}

// loadShared is load on the engine the async tests share, so that a
// guest several tests load is compiled once (the engine's cache).
func loadShared(t *testing.T, wasm []byte, lim Limits) *Module {
	t.Helper()
	m, err := sharedEngine(t).Load(context.Background(), wasm, ModuleConfig{Name: "test", Limits: lim, AllowedTopics: []string{"side"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

// sameOutputs fails t unless a and b are the same outputs, byte for byte
// and null for null.
func sameOutputs(t *testing.T, what string, a, b []abi.Output) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d outputs, want %d", what, len(a), len(b))
	}
	same := func(x, y []byte) bool { return string(x) == string(y) && (x == nil) == (y == nil) }
	for i := range a {
		x, y := a[i], b[i]
		if x.Topic != y.Topic || x.Partition != y.Partition || !same(x.Key, y.Key) || !same(x.Value, y.Value) || len(x.Headers) != len(y.Headers) {
			t.Fatalf("%s: output %d is %+v, want %+v", what, i, x, y)
		}
		for j := range x.Headers {
			if x.Headers[j].Key != y.Headers[j].Key || !same(x.Headers[j].Value, y.Headers[j].Value) {
				t.Fatalf("%s: output %d header %d is %+v, want %+v", what, i, j, x.Headers[j], y.Headers[j])
			}
		}
	}
}

// checkBatchSameAsProcess runs recs one call per record on one instance of
// m and in batches of each size on another, and compares the outcomes.
func checkBatchSameAsProcess(t *testing.T, m *Module, recs []abi.Record, sizes ...int) {
	t.Helper()
	if !m.Info().Batch {
		t.Fatal("the module has the batch entry, but Info().Batch is false")
	}
	one := newInstance(t, m)
	defer one.Close(context.Background())
	want := make([]Result, len(recs))
	for i := range recs {
		want[i] = one.Process(context.Background(), &recs[i], nil)
		if want[i].Status != abi.StatusOK {
			t.Fatalf("record %d alone: %v %v", i, want[i].Status, want[i].Err)
		}
	}
	for _, size := range sizes {
		in := newInstance(t, m)
		out := make([]Outcome, size)
		for at := 0; at < len(recs); {
			batch := batchOf(recs[at:min(at+size, len(recs))])
			ran := in.ProcessBatch(context.Background(), batch, out)
			if ran != len(batch) {
				t.Fatalf("batch of %d at %d: ran %d", size, at, ran)
			}
			for k := 0; k < ran; k++ {
				o := out[k]
				if o.Status != abi.StatusOK || o.Err != nil || o.Start.IsZero() || o.End.Before(o.Start) {
					t.Fatalf("batch of %d, record %d: %v %v (%v – %v)", size, at+k, o.Status, o.Err, o.Start, o.End)
				}
				sameOutputs(t, "record "+strconv.Itoa(at+k), o.Outputs, want[at+k].Outputs)
			}
			at += ran
		}
		in.Close(context.Background())
	}
}

// The Go, Rust and AssemblyScript SDKs take their records through the batch
// entry with the processor unchanged: each uppercase example gives in
// batches of 1, 3 and 16 what it gives one call per record, big records
// (210 KiB) and null fields included.
func TestBatchUppercaseSameAsProcess(t *testing.T) {
	recs := append(sameRecords(), uppercaseRecords()...)
	eachSDK(t, "uppercase", func(t *testing.T, m *Module) { checkBatchSameAsProcess(t, m, recs, 1, 3, 16) })
}

// eachSDK runs f, in a subtest per language, on the example name built with
// the Go SDK (plugins/examples/<name>), the Rust SDK (rust-<name>) and the
// AssemblyScript SDK (as-<name>).
func eachSDK(t *testing.T, name string, f func(t *testing.T, m *Module)) {
	for _, g := range []struct {
		lang string
		wasm func(t *testing.T) []byte
	}{
		{"go", func(t *testing.T) []byte { return guest(t, "plugins/examples/"+name) }},
		{"rust", func(t *testing.T) []byte { return rustGuest(t, "plugins/examples/rust-"+name) }},
		{"assemblyscript", func(t *testing.T) []byte { return asGuest(t, "plugins/examples/as-"+name) }},
	} {
		t.Run(g.lang, func(t *testing.T) { f(t, loadShared(t, g.wasm(t), Limits{})) })
	}
}

// A fault while record k of a batch runs fails record k only: the records
// before it keep their outcomes (outputs included), the ones after it are
// not run, and a fresh instance runs them.
//
// Only the looping record meets its deadline (3 s, short to keep the test
// quick); the others run under one far above what their fault takes on a
// loaded machine (growing memory to the limit under -race can take
// seconds), so that each fails with its own kind.
func TestBatchFaultFailsItsRecordOnly(t *testing.T) {
	wasm := guest(t, "plugins/examples/enrich")
	for _, tc := range []struct {
		fault string
		kind  FaultKind
		msg   string
	}{
		{"panic", FaultPanic, "guest panic: asked to panic"},
		{"loop", FaultDeadline, "record deadline of 3s exceeded"},
		{"badptr", FaultBadPointer, "is outside guest memory"},
		{"oom", FaultOOM, "out of memory"},
		{"exit", FaultExit, "exited with code 3"},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			timeout := time.Minute
			if tc.kind == FaultDeadline {
				timeout = 3 * time.Second
			}
			m := loadShared(t, wasm, Limits{MemoryPages: 256, RecordTimeout: timeout})
			recs := []abi.Record{
				{Topic: "in", Offset: 0, Value: []byte(`{"n":0}`)},
				{Topic: "in", Offset: 1, Value: []byte(`{"fault":"retry"}`)},
				{Topic: "in", Offset: 2, Value: []byte(`{"n":2}`)},
				{Topic: "in", Offset: 3, Value: []byte(`{"fault":"` + tc.fault + `"}`)},
				{Topic: "in", Offset: 4, Value: []byte(`{"n":4}`)},
				{Topic: "in", Offset: 5, Value: []byte(`{"n":5}`)},
			}
			in := newInstance(t, m)
			defer in.Close(context.Background())
			out := make([]Outcome, len(recs))
			ran := in.ProcessBatch(context.Background(), batchOf(recs), out)
			if ran != 4 || !in.Dead() {
				t.Fatalf("ran %d (want 4: the faulted record's and those before it), dead %v", ran, in.Dead())
			}
			for _, k := range []int{0, 2} {
				if o := out[k]; o.Status != abi.StatusOK || len(o.Outputs) != 1 || !strings.Contains(string(o.Outputs[0].Value), `"offset":`+strconv.Itoa(k)) {
					t.Fatalf("record %d before the fault: %v %v %q", k, o.Status, o.Err, o.Outputs)
				}
			}
			if o := out[1]; o.Status != abi.StatusRetry || o.Fault() != nil || !strings.Contains(o.Err.Error(), "asked to retry") {
				t.Fatalf("record 1: %v %v", o.Status, o.Err)
			}
			f := out[3].Fault()
			if out[3].Status != abi.StatusRetry || f == nil || f.Kind != tc.kind || !strings.Contains(f.Error(), tc.msg) || len(out[3].Outputs) != 0 {
				t.Fatalf("record 3: %v %v, want a %s fault saying %q", out[3].Status, out[3].Err, tc.kind, tc.msg)
			}
			if tc.kind == FaultDeadline {
				// Its own deadline, from its turn: not what the batch had left.
				if d := out[3].End.Sub(out[3].Start); d < 3*time.Second || out[3].Start.Before(out[2].End) {
					t.Fatalf("the record's deadline ran %v from %v (record 2 ended %v)", d, out[3].Start, out[2].End)
				}
			}
			// The records not run go to a fresh instance.
			in2 := newInstance(t, m)
			defer in2.Close(context.Background())
			if ran2 := in2.ProcessBatch(context.Background(), batchOf(recs[ran:]), out); ran2 != 2 || out[0].Status != abi.StatusOK || out[1].Status != abi.StatusOK ||
				!strings.Contains(string(out[1].Outputs[0].Value), `"offset":5`) {
				t.Fatalf("the rest on a fresh instance: ran %d, %v %v", ran2, out[0].Err, out[1].Err)
			}
		})
	}
}

// The Go SDK hands a batch record's outputs over in one list, up to 64 of
// them; past that it emits them one by one, so that a processor that emits
// until the host refuses meets the limit as in a call of its own.
func TestBatchGoManyOutputs(t *testing.T) {
	m := loadShared(t, guest(t, "plugins/examples/enrich"), Limits{MemoryPages: 256, MaxOutputs: 300})
	recs := []abi.Record{}
	for _, n := range []int{3, 0, 64, 65, 299, 300, 301, 1000, 1} {
		recs = append(recs, abi.Record{Topic: "in", Offset: int64(n), Value: []byte(`{"emit":` + strconv.Itoa(n) + `}`)})
	}
	one := newInstance(t, m)
	defer one.Close(context.Background())
	in := newInstance(t, m)
	defer in.Close(context.Background())
	out := make([]Outcome, len(recs))
	if ran := in.ProcessBatch(context.Background(), batchOf(recs), out); ran != len(recs) {
		t.Fatalf("ran %d", ran)
	}
	for k := range recs {
		want := one.Process(context.Background(), &recs[k], nil)
		o := out[k]
		if o.Status != want.Status || (o.Err == nil) != (want.Err == nil) || (o.Err != nil && o.Err.Error() != want.Err.Error()) {
			t.Fatalf("record %d in a batch: %v %v; alone: %v %v", k, o.Status, o.Err, want.Status, want.Err)
		}
		sameOutputs(t, "record "+strconv.Itoa(k), o.Outputs, want.Outputs)
	}
	if out[6].Status != abi.StatusRetry || !strings.Contains(out[6].Err.Error(), "output limit reached") || len(out[5].Outputs) != 300 {
		t.Fatalf("301 outputs: %v %v; 300: %d", out[6].Status, out[6].Err, len(out[5].Outputs))
	}
}

// Each record of a batch reads and writes state through its own State
// (BatchRecord.State): the count example (Go, Rust, AssemblyScript) counts
// in one batch as one call per record does, a State refusing a key failing
// that record alone.
func TestBatchState(t *testing.T) {
	eachSDK(t, "count", checkBatchState)
}

func checkBatchState(t *testing.T, m *Module) {
	one, in := newInstance(t, m), newInstance(t, m)
	defer one.Close(context.Background())
	defer in.Close(context.Background())
	alone := &mapState{m: map[string][]byte{}, maxValue: 64 << 10, foreign: "x"}
	batched := &mapState{m: map[string][]byte{}, maxValue: 64 << 10, foreign: "x"}
	keys := []string{"a", "a", "b", "x-other-partition", "a", "", "b"}
	recs, out := runKeyedBatch(t, in, keys, func(int) State { return batched })
	for i := range recs {
		want := one.ProcessState(context.Background(), &recs[i], nil, alone)
		o := out[i]
		if o.Status != want.Status || (o.Err == nil) != (want.Err == nil) || (o.Err != nil && o.Err.Error() != want.Err.Error()) {
			t.Fatalf("record %d in a batch: %v %v; alone: %v %v", i, o.Status, o.Err, want.Status, want.Err)
		}
		sameOutputs(t, "record "+strconv.Itoa(i), o.Outputs, want.Outputs)
	}
	if out[3].Status == abi.StatusOK || out[3].Status == abi.StatusPending || len(out[4].Outputs) == 0 || string(out[4].Outputs[0].Value) != "3" {
		t.Fatalf("the other partition's key: %v %v; the third a: %+v", out[3].Status, out[3].Err, out[4].Outputs)
	}
	if fmt.Sprint(batched.m) != fmt.Sprint(alone.m) {
		t.Fatalf("state %v, one call per record %v", batched.m, alone.m)
	}
}

// runKeyedBatch runs one batch on in of a record per key (value "v",
// partition 1, offset its index), record i with the State stateFor(i).
func runKeyedBatch(t *testing.T, in *Instance, keys []string, stateFor func(i int) State) ([]abi.Record, []Outcome) {
	t.Helper()
	recs := make([]abi.Record, len(keys))
	batch := make([]BatchRecord, len(keys))
	for i, k := range keys {
		recs[i] = abi.Record{Topic: "in", Key: []byte(k), Value: []byte("v"), Partition: 1, Offset: int64(i), Attempt: 1}
		batch[i] = BatchRecord{Rec: &recs[i], Tag: i, State: stateFor(i)}
	}
	out := make([]Outcome, len(recs))
	if ran := in.ProcessBatch(context.Background(), batch, out); ran != len(recs) {
		t.Fatalf("ran %d of a batch of %d", ran, len(recs))
	}
	return recs, out
}

// A record of a batch that waits on an operation stays pending while the
// batch goes on; its completion decides it later (Poll), with its outputs.
func TestBatchPendingInTheMiddle(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 5 * time.Millisecond })
	m, _ := loadLookup(t, srv, Limits{RecordTimeout: 10 * time.Second})
	in := newInstance(t, m)
	defer in.Close(context.Background())
	recs := []abi.Record{
		{Topic: "in", Value: []byte("no key")}, // fails at once: nothing to look up
		*rec("7", ""),
		{Topic: "in", Value: []byte("no key either")},
		*rec("8", ""),
		*rec("9", "pending"), // Pending with nothing outstanding: the SDK fails it
		*rec("10", ""),
	}
	out := make([]Outcome, len(recs))
	if ran := in.ProcessBatch(context.Background(), batchOf(recs), out); ran != len(recs) {
		t.Fatalf("ran %d, want %d", ran, len(recs))
	}
	for _, k := range []int{0, 2, 4} {
		if out[k].Status != abi.StatusFail || out[k].Fault() != nil {
			t.Fatalf("record %d: %v %v", k, out[k].Status, out[k].Err)
		}
	}
	for _, k := range []int{1, 3, 5} {
		if out[k].Status != abi.StatusPending || out[k].Err != nil {
			t.Fatalf("record %d: %v %v, want pending", k, out[k].Status, out[k].Err)
		}
	}
	got := drain(t, in, 3, 10*time.Second)
	for _, k := range []int{1, 3, 5} {
		res := got[k]
		if res.Status != abi.StatusOK || len(res.Outputs) != 1 || !strings.Contains(string(res.Outputs[0].Value), `"key":"`+string(recs[k].Key)+`"`) {
			t.Fatalf("record %d: %v %v %+v", k, res.Status, res.Err, res.Outputs)
		}
	}
	// The next batch on the same instance: the records after a pending one
	// get buffers of their own (the SDK re-reads them with record_read).
	if ran := in.ProcessBatch(context.Background(), batchOf(recs[1:3]), out); ran != 2 || out[0].Status != abi.StatusPending || out[1].Status != abi.StatusFail {
		t.Fatalf("again: ran %d, %v %v, %v %v", ran, out[0].Status, out[0].Err, out[1].Status, out[1].Err)
	}
	if got := drain(t, in, 1, 10*time.Second); got[0].Status != abi.StatusOK {
		t.Fatalf("again: %v %v", got[0].Status, got[0].Err)
	}
}

// batchGuest loads testdata/batch.wat, the batch entry written by hand.
func batchGuest(t *testing.T, lim Limits) *Module {
	return load(t, wt.BuildWat(t, "host/testdata/batch.wat"), lim)
}

// kind makes a record of testdata/batch.wat: what to do and its argument.
func kind(k, arg int64) abi.Record { return abi.Record{Topic: "in", Offset: k, Timestamp: arg} }

// The deadline and the meter are per record: records that each take 40%
// of limits.record_timeout succeed in a batch that takes longer than it,
// and the record that runs away fails alone when its own deadline passes.
func TestBatchDeadlinePerRecord(t *testing.T) {
	m := batchGuest(t, Limits{RecordTimeout: time.Second})
	in := newInstance(t, m)
	defer in.Close(context.Background())
	recs := []abi.Record{kind(3, 400), kind(3, 400), kind(3, 400), kind(4, 0), kind(0, 0)}
	out := make([]Outcome, len(recs))
	ran := in.ProcessBatch(context.Background(), batchOf(recs), out)
	if ran != 4 {
		t.Fatalf("ran %d, want 4", ran)
	}
	for k := 0; k < 3; k++ {
		if out[k].Status != abi.StatusOK {
			t.Fatalf("record %d: %v %v", k, out[k].Status, out[k].Err)
		}
	}
	if f := out[3].Fault(); f == nil || f.Kind != FaultDeadline || out[3].End.Sub(out[3].Start) < time.Second {
		t.Fatalf("record 3: %v %v after %v", out[3].Status, out[3].Err, out[3].End.Sub(out[3].Start))
	}
	// The three together ran past one record's deadline.
	if d := out[2].End.Sub(out[0].Start); d < 1150*time.Millisecond {
		t.Fatalf("the three spinning records took %v together: they did not spin", d)
	}
}

// Outputs are handed over in one list per record; the records' outcomes
// keep them apart. A list over the record's limits fails the record
// (retryably), and the guest's mistakes fault the record they belong to.
func TestBatchOutputListsAndProtocol(t *testing.T) {
	m := batchGuest(t, Limits{MaxOutputs: 200, RecordTimeout: 5 * time.Second})
	run := func(recs ...abi.Record) (*Instance, []Outcome, int) {
		in := newInstance(t, m)
		t.Cleanup(func() { in.Close(context.Background()) })
		out := make([]Outcome, len(recs))
		return in, out, in.ProcessBatch(context.Background(), batchOf(recs), out)
	}
	checkOutputs := func(k int, o Outcome, n int) {
		t.Helper()
		if o.Status != abi.StatusOK || len(o.Outputs) != n {
			t.Fatalf("record %d: %v %v, %d outputs (want %d)", k, o.Status, o.Err, len(o.Outputs), n)
		}
		for i, out := range o.Outputs {
			if out.Topic != "" || out.Partition != -1 || out.Key != nil || string(out.Value) != string(rune('A'+i%26)) || out.Headers != nil {
				t.Fatalf("record %d output %d: %+v", k, i, out)
			}
		}
	}

	in, out, ran := run(kind(1, 150), kind(1, 0), kind(6, 0), kind(1, 3), kind(1, 201), kind(5, 20), kind(1, 7), kind(2, 0), kind(0, 0))
	if ran != 8 || !in.Dead() {
		t.Fatalf("ran %d, dead %v; want 8, dead", ran, in.Dead())
	}
	checkOutputs(0, out[0], 150)
	checkOutputs(1, out[1], 0)
	if out[2].Status != abi.StatusRetry || out[2].Fault() != nil {
		t.Fatalf("record 2: %v %v", out[2].Status, out[2].Err)
	}
	checkOutputs(3, out[3], 3)
	if out[4].Status != abi.StatusRetry || out[4].Fault() != nil || !strings.Contains(out[4].Err.Error(), "output 200 handed to record_next refused: output limit reached") || out[4].Outputs != nil {
		t.Fatalf("record 4: %v %v", out[4].Status, out[4].Err)
	}
	if out[5].Status != abi.StatusPending {
		t.Fatalf("record 5: %v %v", out[5].Status, out[5].Err)
	}
	checkOutputs(6, out[6], 7)
	if f := out[7].Fault(); f == nil || f.Kind != FaultTrap {
		t.Fatalf("record 7: %v %v", out[7].Status, out[7].Err)
	}
	if d := drain(t, in, 1, 5*time.Second); d[5].Fault() == nil || d[5].Fault().Kind != FaultInstanceLost {
		t.Fatalf("the pending record after the fault: %+v", d)
	}

	// A pending record completes after the batch.
	in, out, ran = run(kind(0, 0), kind(5, 20), kind(1, 2))
	if ran != 3 || out[1].Status != abi.StatusPending || in.Dead() {
		t.Fatalf("ran %d, record 1 %v %v", ran, out[1].Status, out[1].Err)
	}
	checkOutputs(2, out[2], 2)
	if d := drain(t, in, 1, 5*time.Second); d[1].Status != abi.StatusOK {
		t.Fatalf("the pending record: %v %v", d[1].Status, d[1].Err)
	}

	// A batch stops taking records once its records wait on the
	// operations the instance may have in flight; the rest were not run.
	in = newInstance(t, m)
	t.Cleanup(func() { in.Close(context.Background()) })
	in.LimitBatchInFlight(2)
	out = make([]Outcome, 4)
	ran = in.ProcessBatch(context.Background(), batchOf([]abi.Record{kind(5, 20), kind(5, 20), kind(5, 20), kind(0, 0)}), out)
	if ran != 2 || in.Dead() || in.AsyncInFlight() != 2 || out[1].Status != abi.StatusPending {
		t.Fatalf("with 2 operations in flight at most: ran %d, dead %v, %d in flight", ran, in.Dead(), in.AsyncInFlight())
	}
	drain(t, in, 2, 5*time.Second)

	for _, tc := range []struct {
		kind int64
		want FaultKind
		msg  string
	}{
		{7, FaultBadPointer, "wasmstream_batch_v1.record_next(ptr=0xffff0000, len=16) is outside guest memory"},
		{8, FaultProtocol, "invalid status 9"},
	} {
		in, out, ran := run(kind(0, 0), kind(tc.kind, 0), kind(0, 0))
		if f := out[1].Fault(); ran != 2 || !in.Dead() || out[0].Status != abi.StatusOK || f == nil || f.Kind != tc.want || !strings.Contains(f.Msg, tc.msg) {
			t.Fatalf("kind %d: ran %d, %v; record 1 %v %v", tc.kind, ran, out[0].Err, out[1].Status, out[1].Err)
		}
	}

	// The output list handed with fail (or retry) is neither read nor
	// checked (ABI.md §10): a stale pointer with it leaves the record's
	// terminal failure as it is, and the batch goes on.
	in, out, ran = run(kind(0, 0), kind(10, 0), kind(1, 1))
	if ran != 3 || in.Dead() || out[1].Status != abi.StatusFail || out[1].Fault() != nil || out[2].Status != abi.StatusOK {
		t.Fatalf("fail with an output list outside memory: ran %d, dead %v, record 1 %v %v", ran, in.Dead(), out[1].Status, out[1].Err)
	}

	// A guest that returns during a record decides it with what it
	// returned; the records after it were not run, and the instance lives.
	in, out, ran = run(kind(1, 1), kind(9, 0), kind(1, 1))
	if ran != 2 || in.Dead() || out[1].Status != abi.StatusOK {
		t.Fatalf("early return: ran %d, dead %v, record 1 %v %v", ran, in.Dead(), out[1].Status, out[1].Err)
	}
	checkOutputs(0, out[0], 1)
}

// A module without the batch entry runs ProcessBatch one call per record;
// one that exports the entry without record_next is refused at load.
func TestBatchWithoutTheEntry(t *testing.T) {
	m := load(t, wt.Minimal(wt.I32Const(0)).Bytes(), Limits{})
	if m.Info().Batch {
		t.Fatal("Info().Batch without the export")
	}
	in := newInstance(t, m)
	recs := []abi.Record{kind(0, 0), kind(0, 0), kind(0, 0)}
	out := make([]Outcome, 8)
	if ran := in.ProcessBatch(context.Background(), batchOf(recs), out); ran != 3 || out[0].Status != abi.StatusOK || out[2].Status != abi.StatusOK || out[2].Start.IsZero() {
		t.Fatalf("ran %d: %+v", ran, out[:3])
	}
	in.Close(context.Background())
	if ran := in.ProcessBatch(context.Background(), batchOf(recs), out); ran != 0 {
		t.Fatalf("a closed instance ran %d", ran)
	}

	noNext := wt.Minimal(wt.I32Const(0))
	noNext.Funcs = append(noNext.Funcs, wt.Func{Export: abi.ExportOnBatch, Params: []byte{wt.I32, wt.I32, wt.I32}, Results: []byte{wt.I32}, Body: wt.I32Const(0)})
	_, err := newEngine(t).Load(context.Background(), noNext.Bytes(), ModuleConfig{Name: "test"})
	if err == nil || !strings.Contains(err.Error(), "does not import wasmstream_batch_v1.record_next") {
		t.Fatalf("load: %v", err)
	}
}

// Under StopBatchAfterFailure a batch stops after a record that ends retry
// or fail: the records after it are not run, and the instance lives on.
// Without it the batch goes on past such records.
func TestBatchStopAfterFailure(t *testing.T) {
	m := loadShared(t, guest(t, "plugins/examples/enrich"), Limits{})
	recs := []abi.Record{
		{Topic: "in", Offset: 0, Value: []byte(`{"n":0}`)},
		{Topic: "in", Offset: 1, Value: []byte(`{"fault":"retry"}`)},
		{Topic: "in", Offset: 2, Value: []byte(`{"n":2}`)},
		{Topic: "in", Offset: 3, Value: []byte(`{"n":3}`)},
	}
	for _, entry := range []bool{true, false} { // the batch entry, one call per record
		in := newInstance(t, m)
		if !entry {
			in.entry.batch = nil
		}
		out := make([]Outcome, len(recs))
		if ran := in.ProcessBatch(context.Background(), batchOf(recs), out); ran != len(recs) {
			t.Fatalf("entry %v, not stopping: ran %d, want %d", entry, ran, len(recs))
		}
		in.StopBatchAfterFailure(true)
		out = make([]Outcome, len(recs))
		ran := in.ProcessBatch(context.Background(), batchOf(recs), out)
		if ran != 2 || in.Dead() || out[0].Status != abi.StatusOK || out[1].Status != abi.StatusRetry {
			t.Fatalf("entry %v, stopping: ran %d (want 2), dead %v, %v %v", entry, ran, in.Dead(), out[0].Status, out[1].Status)
		}
		// The rest, in a batch of their own on the same instance.
		out = make([]Outcome, 2)
		if ran := in.ProcessBatch(context.Background(), batchOf(recs[2:]), out); ran != 2 || out[1].Status != abi.StatusOK {
			t.Fatalf("entry %v, the rest: ran %d, %v %v", entry, ran, out[1].Status, out[1].Err)
		}
		in.Close(context.Background())
	}
}

// TestBatchGate: a batch asks its gate before each record after the first
// and ends before the first record the gate refuses; the records before it
// ran and have outcomes, the instance lives on, and the gate was asked for
// no record past the refusal.
func TestBatchGate(t *testing.T) {
	m := loadShared(t, guest(t, "plugins/examples/enrich"), Limits{})
	recs := make([]abi.Record, 6)
	for i := range recs {
		recs[i] = abi.Record{Topic: "in", Offset: int64(i), Value: []byte(fmt.Sprintf(`{"n":%d}`, i))}
	}
	for _, entry := range []bool{true, false} { // the batch entry, one call per record
		in := newInstance(t, m)
		if !entry {
			in.entry.batch = nil
		}
		var asked []int
		in.GateBatch(func(i int) bool { asked = append(asked, i); return i < 3 })
		out := make([]Outcome, len(recs))
		ran := in.ProcessBatch(context.Background(), batchOf(recs), out)
		if ran != 3 || in.Dead() || !slices.Equal(asked, []int{1, 2, 3}) {
			t.Fatalf("entry %v: ran %d (want 3), dead %v, gate asked for %v (want [1 2 3])", entry, ran, in.Dead(), asked)
		}
		for i := range ran {
			if out[i].Status != abi.StatusOK || len(out[i].Outputs) != 1 {
				t.Fatalf("entry %v: record %d: %v %v", entry, i, out[i].Status, out[i].Err)
			}
		}
		in.GateBatch(nil)
		out = make([]Outcome, 3)
		if ran := in.ProcessBatch(context.Background(), batchOf(recs[3:]), out); ran != 3 {
			t.Fatalf("entry %v, the rest without a gate: ran %d", entry, ran)
		}
		in.Close(context.Background())
	}
}
