package host

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/asyncop"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// completionsWat is testdata/completions.wat, the completions entry written
// by hand; edit changes its text before it is assembled.
func completionsWat(t testing.TB, edit func(string) string) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(wt.RepoRoot(t), "host/testdata/completions.wat"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	if edit != nil {
		s = edit(s)
	}
	return assemble(t, s)
}

// assemble assembles WebAssembly text with wat2wasm.
func assemble(t testing.TB, src string) []byte {
	t.Helper()
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Fatal("wat2wasm not found: hand-written test modules need wabt (the test command installs it)")
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "m.wat"), filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command("wat2wasm", "--debug-names", "-o", out, in).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// entryCalls returns how many times the guest's completions entry and its
// wasmstream_on_complete were called.
func entryCalls(t *testing.T, in *Instance) (many, one int) {
	t.Helper()
	get := func(name string) int {
		r, err := in.mod.ExportedFunction(name).Call(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return int(int32(r[0]))
	}
	return get("test_calls_many"), get("test_calls_one")
}

// startWaiting processes recs (tag i for recs[i]), each of which waits on
// a timer, waits until all their completions are queued and puts the queue
// in the order of the records, so that a test knows which completion the
// guest takes k-th.
func startWaiting(t *testing.T, in *Instance, recs []abi.Record, tags ...int) {
	t.Helper()
	if tags == nil {
		for i := range recs {
			tags = append(tags, i)
		}
	}
	for i := range recs {
		if res := in.Process(context.Background(), &recs[i], tags[i]); res.Status != abi.StatusPending {
			t.Fatalf("record %d: %v %v", tags[i], res.Status, res.Err)
		}
	}
	waitQueued(t, in, len(recs))
}

// waitQueued waits until n completions are queued on in, then sorts the
// queue by record tag.
func waitQueued(t *testing.T, in *Instance, n int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		in.q.mu.Lock()
		q := len(in.q.ops)
		if q == n {
			slices.SortFunc(in.q.ops, func(a, b *opState) int { return a.rec.tag.(int) - b.rec.tag.(int) })
		}
		in.q.mu.Unlock()
		if q == n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d of %d completions queued", q, n)
		}
	}
}

func byTag(done []Done) map[int]Result {
	got := map[int]Result{}
	for _, d := range done {
		got[d.Tag.(int)] = d.Result
	}
	return got
}

// Several completions go into the guest in one call, each to its record
// with its outputs.
func TestCompletionsSeveralPerCall(t *testing.T) {
	m := load(t, completionsWat(t, nil), Limits{RecordTimeout: 10 * time.Second})
	if !m.Info().Completions {
		t.Fatal("Info().Completions is false")
	}
	in := newInstance(t, m)
	defer in.Close(context.Background())
	startWaiting(t, in, []abi.Record{kind(1, 0), kind(1, 0), kind(1, 0), kind(1, 0)})
	got := byTag(in.Poll(context.Background(), time.Now()))
	if len(got) != 4 {
		t.Fatalf("%d records decided, want 4", len(got))
	}
	for i := range 4 {
		if r := got[i]; r.Status != abi.StatusOK || len(r.Outputs) != 1 || string(r.Outputs[0].Value) != "A" {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	if many, one := entryCalls(t, in); many != 1 || one != 0 {
		t.Fatalf("%d completions calls and %d on_complete calls, want 1 and 0", many, one)
	}
	if in.AsyncInFlight() != 0 || in.Pending() != 0 {
		t.Fatalf("in flight %d, pending %d", in.AsyncInFlight(), in.Pending())
	}
	// A single completion goes through wasmstream_on_complete.
	startWaiting(t, in, []abi.Record{kind(1, 0)}, 10)
	if got := byTag(in.Poll(context.Background(), time.Now())); got[10].Status != abi.StatusOK || len(got[10].Outputs) != 1 {
		t.Fatalf("single: %+v", got)
	}
	if many, one := entryCalls(t, in); many != 1 || one != 1 {
		t.Fatalf("%d completions calls and %d on_complete calls, want 1 and 1", many, one)
	}
}

// Each completion of a call has its own outcome: ok with outputs, pending
// on a further operation (delivered later), fail; a completion canceled
// because its record ended goes through wasmstream_on_complete.
func TestCompletionsMixedOutcomes(t *testing.T) {
	m := load(t, completionsWat(t, nil), Limits{RecordTimeout: 10 * time.Second})
	in := newInstance(t, m)
	defer in.Close(context.Background())
	startWaiting(t, in, []abi.Record{kind(1, 0), kind(5, 0), kind(6, 0), kind(0, 0)})
	got := byTag(in.Poll(context.Background(), time.Now()))
	if len(got) != 3 {
		t.Fatalf("decided %v, want records 0, 2, 3", got)
	}
	if r := got[0]; r.Status != abi.StatusOK || len(r.Outputs) != 1 {
		t.Fatalf("record 0: %+v", r)
	}
	if r := got[2]; r.Status != abi.StatusFail || r.Err == nil || !strings.Contains(r.Err.Error(), "without an error message") {
		t.Fatalf("record 2: %+v", r)
	}
	if r := got[3]; r.Status != abi.StatusOK || len(r.Outputs) != 0 {
		t.Fatalf("record 3: %+v", r)
	}
	if in.Pending() != 1 || in.AsyncInFlight() != 1 {
		t.Fatalf("pending %d, in flight %d: record 1 should wait on its second timer", in.Pending(), in.AsyncInFlight())
	}
	waitQueued(t, in, 1)
	if got := byTag(in.Poll(context.Background(), time.Now())); got[1].Status != abi.StatusOK || len(got[1].Outputs) != 1 {
		t.Fatalf("record 1: %+v", got)
	}
	if many, one := entryCalls(t, in); many != 1 || one != 1 {
		t.Fatalf("%d completions calls and %d on_complete calls, want 1 and 1", many, one)
	}
}

// A trap while completion k runs fails k's record with the trap; the
// completions before it keep their outcomes, and the records still
// waiting are lost with the instance.
func TestCompletionsTrapFailsOne(t *testing.T) {
	m := load(t, completionsWat(t, nil), Limits{RecordTimeout: 10 * time.Second})
	in := newInstance(t, m)
	defer in.Close(context.Background())
	startWaiting(t, in, []abi.Record{kind(1, 0), kind(0, 0), kind(2, 0), kind(1, 0), kind(0, 0)})
	got := byTag(in.Poll(context.Background(), time.Now()))
	if len(got) != 5 || !in.Dead() {
		t.Fatalf("decided %v, dead %v", got, in.Dead())
	}
	if got[0].Status != abi.StatusOK || len(got[0].Outputs) != 1 || got[1].Status != abi.StatusOK {
		t.Fatalf("records before the trap: %+v %+v", got[0], got[1])
	}
	if f := got[2].Fault(); f == nil || f.Kind != FaultTrap {
		t.Fatalf("record 2: %v %v", got[2].Status, got[2].Err)
	}
	for _, k := range []int{3, 4} {
		if f := got[k].Fault(); f == nil || f.Kind != FaultInstanceLost {
			t.Fatalf("record %d: %v %v", k, got[k].Status, got[k].Err)
		}
	}
}

// A completion that runs away fails its record when the record's own
// deadline passes, with the deadline; the ones before keep their outcomes.
func TestCompletionsRunawayFailsByDeadline(t *testing.T) {
	m := load(t, completionsWat(t, nil), Limits{RecordTimeout: 300 * time.Millisecond})
	in := newInstance(t, m)
	defer in.Close(context.Background())
	startWaiting(t, in, []abi.Record{kind(1, 0), kind(4, 0), kind(1, 0)})
	got := byTag(in.Poll(context.Background(), time.Now()))
	if got[0].Status != abi.StatusOK {
		t.Fatalf("record 0: %+v", got[0])
	}
	if f := got[1].Fault(); f == nil || f.Kind != FaultDeadline {
		t.Fatalf("record 1: %v %v", got[1].Status, got[1].Err)
	}
	if f := got[2].Fault(); f == nil || f.Kind != FaultInstanceLost {
		t.Fatalf("record 2: %v %v", got[2].Status, got[2].Err)
	}
}

// A completion whose record's deadline passes while an earlier completion
// of the same call runs is skipped (its record fails by the deadline at the
// next Poll, the instance living on), and the completions after it are
// still delivered in the call.
func TestCompletionsDeadlinePerCompletion(t *testing.T) {
	m := load(t, completionsWat(t, nil), Limits{RecordTimeout: 400 * time.Millisecond})
	in := newInstance(t, m)
	defer in.Close(context.Background())
	// Record 1 starts first: its deadline passes while record 0's
	// completion spins.
	r1 := kind(0, 0)
	if res := in.Process(context.Background(), &r1, 1); res.Status != abi.StatusPending {
		t.Fatalf("record 1: %v %v", res.Status, res.Err)
	}
	time.Sleep(200 * time.Millisecond)
	for _, r := range []struct {
		tag int
		rec abi.Record
	}{{0, kind(3, 250)}, {2, kind(1, 0)}} {
		if res := in.Process(context.Background(), &r.rec, r.tag); res.Status != abi.StatusPending {
			t.Fatalf("record %d: %v %v", r.tag, res.Status, res.Err)
		}
	}
	waitQueued(t, in, 3)
	got := byTag(in.Poll(context.Background(), time.Now()))
	if len(got) != 2 || got[0].Status != abi.StatusOK || got[2].Status != abi.StatusOK || len(got[2].Outputs) != 1 {
		t.Fatalf("decided %+v, want records 0 and 2 ok", got)
	}
	if in.Dead() {
		t.Fatal("the instance died")
	}
	got = byTag(in.Poll(context.Background(), time.Now()))
	if f := got[1].Fault(); f == nil || f.Kind != FaultDeadline || !f.Keep {
		t.Fatalf("record 1: %+v", got)
	}
	if many, one := entryCalls(t, in); many != 1 || one != 0 {
		t.Fatalf("%d completions calls and %d on_complete calls, want 1 and 0", many, one)
	}
}

// A status outside 0-3 handed to completion_next is a protocol fault of
// the completion in progress; a guest that returns during a completion
// gives its record's status.
func TestCompletionsProtocolFaults(t *testing.T) {
	m := load(t, completionsWat(t, nil), Limits{RecordTimeout: 10 * time.Second})
	bad := newInstance(t, m)
	defer bad.Close(context.Background())
	startWaiting(t, bad, []abi.Record{kind(1, 0), kind(8, 0), kind(0, 0)})
	got := byTag(bad.Poll(context.Background(), time.Now()))
	if got[0].Status != abi.StatusOK {
		t.Fatalf("record 0: %+v", got[0])
	}
	if f := got[1].Fault(); f == nil || f.Kind != FaultProtocol || !strings.Contains(f.Msg, "invalid status 9") {
		t.Fatalf("record 1: %v %v", got[1].Status, got[1].Err)
	}
	if f := got[2].Fault(); f == nil || f.Kind != FaultInstanceLost {
		t.Fatalf("record 2: %v %v", got[2].Status, got[2].Err)
	}
	// Returning during a completion: the value is its record's status.
	in := newInstance(t, m)
	defer in.Close(context.Background())
	startWaiting(t, in, []abi.Record{kind(1, 0), kind(9, 0), kind(0, 0)})
	got = byTag(in.Poll(context.Background(), time.Now()))
	if got[0].Status != abi.StatusOK || got[1].Status != abi.StatusOK || in.Dead() {
		t.Fatalf("decided %+v, dead %v", got, in.Dead())
	}
	// The completion it did not take went through wasmstream_on_complete.
	if got[2].Status != abi.StatusOK {
		t.Fatalf("record 2: %+v", got[2])
	}
	if many, one := entryCalls(t, in); many != 1 || one != 1 {
		t.Fatalf("%d completions calls and %d on_complete calls, want 1 and 1", many, one)
	}
}

// A module without the entry gets one wasmstream_on_complete call per
// completion, as before.
func TestCompletionsOldModuleOnePerCall(t *testing.T) {
	m := load(t, completionsWat(t, func(s string) string {
		return strings.Replace(s, `(export "wasmstream_on_completions_v1")`, `(export "unused_completions")`, 1)
	}), Limits{RecordTimeout: 10 * time.Second})
	if m.Info().Completions {
		t.Fatal("Info().Completions is true")
	}
	in := newInstance(t, m)
	defer in.Close(context.Background())
	startWaiting(t, in, []abi.Record{kind(1, 0), kind(5, 0), kind(6, 0), kind(0, 0)})
	got := byTag(in.Poll(context.Background(), time.Now()))
	if len(got) != 3 || got[0].Status != abi.StatusOK || len(got[0].Outputs) != 1 || got[2].Status != abi.StatusFail || got[3].Status != abi.StatusOK {
		t.Fatalf("decided %+v", got)
	}
	waitQueued(t, in, 1)
	if got := byTag(in.Poll(context.Background(), time.Now())); got[1].Status != abi.StatusOK || len(got[1].Outputs) != 1 {
		t.Fatalf("record 1: %+v", got)
	}
	if many, one := entryCalls(t, in); many != 0 || one != 5 {
		t.Fatalf("%d completions calls and %d on_complete calls, want 0 and 5", many, one)
	}
}

// A module that exports the entry without importing completion_next, with
// another signature, or without wasmstream_on_complete is refused at load,
// naming what is wrong.
func TestCompletionsEntryRefused(t *testing.T) {
	e := newEngine(t)
	for _, tc := range []struct {
		name string
		edit func(string) string
		want string
	}{
		{"no import", func(s string) string {
			s = strings.Replace(s, `(import "wasmstream_batch_v1" "completion_next" (func $next (param i32 i32 i32 i32 i32) (result i32)))`, ``, 1)
			return strings.Replace(s, `(func (export "wasmstream_on_completions_v1")`,
				`(func $next (param i32 i32 i32 i32 i32) (result i32) (i32.const 0)) (func (export "wasmstream_on_completions_v1")`, 1)
		}, "exports wasmstream_on_completions_v1 but does not import wasmstream_batch_v1.completion_next"},
		{"signature", func(s string) string {
			return strings.Replace(s, `(param $count i32) (param $max i32) (result i32)`, `(param $count i32) (param $max i32) (param $x i32) (result i32)`, 1)
		}, "export wasmstream_on_completions_v1 is func(i32, i32, i32) -> (i32), want func(i32, i32) -> (i32)"},
		{"no on_complete", func(s string) string {
			return strings.Replace(s, `(export "wasmstream_on_complete")`, ``, 1)
		}, "exports wasmstream_on_completions_v1 but not wasmstream_on_complete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Load(context.Background(), completionsWat(t, tc.edit), ModuleConfig{Name: "test"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// A completion of a record that already ended (here by its deadline) goes
// through wasmstream_on_complete, as canceled; the others of the queue
// share one call.
func TestCompletionsCanceledOnePerCall(t *testing.T) {
	m := load(t, completionsWat(t, nil), Limits{RecordTimeout: 150 * time.Millisecond})
	in := newInstance(t, m)
	defer in.Close(context.Background())
	r0 := kind(1, 0)
	if res := in.Process(context.Background(), &r0, 0); res.Status != abi.StatusPending {
		t.Fatalf("record 0: %v %v", res.Status, res.Err)
	}
	time.Sleep(200 * time.Millisecond)
	recs := []abi.Record{kind(1, 0), kind(1, 0)}
	for i := range recs {
		if res := in.Process(context.Background(), &recs[i], i+1); res.Status != abi.StatusPending {
			t.Fatalf("record %d: %v %v", i+1, res.Status, res.Err)
		}
	}
	waitQueued(t, in, 3)
	got := byTag(in.Poll(context.Background(), time.Now()))
	if f := got[0].Fault(); f == nil || f.Kind != FaultDeadline {
		t.Fatalf("record 0: %+v", got[0])
	}
	if got[1].Status != abi.StatusOK || got[2].Status != abi.StatusOK || len(got[2].Outputs) != 1 {
		t.Fatalf("decided %+v", got)
	}
	if many, one := entryCalls(t, in); many != 1 || one != 1 {
		t.Fatalf("%d completions calls and %d on_complete calls, want 1 and 1", many, one)
	}
}

// exportCounter counts the guest calls an Observer sees, by export.
type exportCounter struct{ calls map[string]int }

func (c *exportCounter) GuestCall(tag any, export string, start time.Time, d time.Duration, err error) {
	c.calls[export]++
}
func (c *exportCounter) AsyncOp(any, abi.OpKind, string, time.Time, time.Duration, string) {}

// Each SDK's lookup example exports the completions entry: completions
// queued together reach their continuations in one call, with the outcomes
// one wasmstream_on_complete call each gives.
func TestSDKCompletionsInOneCall(t *testing.T) {
	for _, g := range []struct {
		lang string
		wasm func(t *testing.T) []byte
	}{
		{"Go", func(t *testing.T) []byte { return guest(t, "plugins/examples/lookup") }},
		{"Rust", func(t *testing.T) []byte { return rustGuest(t, "plugins/examples/rust-lookup") }},
		{"AssemblyScript", func(t *testing.T) []byte { return asGuest(t, "plugins/examples/as-lookup") }},
	} {
		t.Run(g.lang, func(t *testing.T) {
			wasm := g.wasm(t)
			obs := &exportCounter{calls: map[string]int{}}
			// A module per lookup service: its "fail-" keys fail once.
			load := func() *Module {
				srv := newLookupServer(t, func() time.Duration { return 0 })
				m, err := sharedEngine(t).Load(context.Background(), wasm, ModuleConfig{
					Name: "lookup", Limits: Limits{RecordTimeout: 10 * time.Second}, Observer: obs,
					Env:   map[string]string{"LOOKUP_URL": srv.URL + "/users/"},
					Async: AsyncConfig{Config: asyncop.Config{HTTP: asyncop.HTTP{AllowHosts: []string{srv.Host()}, Timeout: 2 * time.Second}}, Key: "pipelines.lookup.async"},
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { m.Close(context.Background()) })
				if !m.Info().Completions {
					t.Fatalf("the %s lookup guest does not export %s", g.lang, abi.ExportOnCompletions)
				}
				return m
			}
			recs := []abi.Record{*rec("7", ""), *rec("gone-1", ""), *rec("fail-1", ""), *rec("7", "chain"), *rec("8", ""),
				{Topic: "in", Key: []byte("json"), Value: []byte(` {"order": [1, 2.5e3, true, null, "x\u00e9"]} `), Attempt: 2, Partition: 1, Offset: 99}}
			// One by one: each completion in a call of its own.
			want := map[int]Result{}
			one := newInstance(t, load())
			defer one.Close(context.Background())
			for i := range recs {
				startWaiting(t, one, recs[i:i+1], i)
				for len(want) <= i {
					for tag, r := range byTag(one.Poll(context.Background(), time.Now())) {
						want[tag] = r
					}
					if len(want) <= i {
						waitQueued(t, one, 1)
					}
				}
			}
			if obs.calls[abi.ExportOnCompletions] != 0 {
				t.Fatalf("calls %v: completions delivered one by one went through the entry", obs.calls)
			}
			clear(obs.calls)
			// Together: every completion in one call, the chained record's
			// second one later.
			in := newInstance(t, load())
			defer in.Close(context.Background())
			startWaiting(t, in, recs)
			got := byTag(in.Poll(context.Background(), time.Now()))
			if len(got) != len(recs)-1 || obs.calls[abi.ExportOnCompletions] != len(recs) || obs.calls[abi.ExportOnComplete] != 0 {
				t.Fatalf("%d records decided, calls %v; want %d, every completion through %s", len(got), obs.calls, len(recs)-1, abi.ExportOnCompletions)
			}
			waitQueued(t, in, 1)
			for tag, r := range byTag(in.Poll(context.Background(), time.Now())) {
				got[tag] = r
			}
			for i := range recs {
				sameAsGo(t, g.lang+" (completions in one call)", "lookup of "+string(recs[i].Key), got[i], want[i])
				if (got[i].Err == nil) != (want[i].Err == nil) || (got[i].Err != nil && got[i].Err.Error() != want[i].Err.Error()) {
					t.Fatalf("lookup of %q: error %v, one by one %v", recs[i].Key, got[i].Err, want[i].Err)
				}
			}
		})
	}
}

// opRecorder records what an Observer sees.
type opRecorder struct{ ops, calls []string }

func (o *opRecorder) GuestCall(tag any, export string, _ time.Time, _ time.Duration, err error) {
	o.calls = append(o.calls, fmt.Sprintf("%v %v", tag, err))
}
func (o *opRecorder) AsyncOp(tag any, kind abi.OpKind, _ string, _ time.Time, _ time.Duration, outcome string) {
	o.ops = append(o.ops, fmt.Sprintf("%v %v %s", tag, kind, outcome))
}

// What the Observer sees of the operations, the operations counted in
// flight, the records waiting and their outcomes are the same whether the
// completions go in one call or one call each.
func TestCompletionsObservedAsOnePerCall(t *testing.T) {
	wasm := completionsWat(t, nil)
	run := func(entry bool) (*opRecorder, map[int]Result, int, int) {
		obs := &opRecorder{}
		m, err := newEngine(t).Load(context.Background(), wasm, ModuleConfig{Name: "test", Limits: Limits{RecordTimeout: 10 * time.Second}, Observer: obs})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close(context.Background())
		in := newInstance(t, m)
		defer in.Close(context.Background())
		if !entry {
			in.entry.completions = nil
		}
		startWaiting(t, in, []abi.Record{kind(1, 0), kind(5, 0), kind(6, 0), kind(0, 0), kind(1, 0)})
		got := byTag(in.Poll(context.Background(), time.Now()))
		return obs, got, in.AsyncInFlight(), in.Pending()
	}
	oneObs, one, oneOps, onePending := run(false)
	obs, got, ops, pending := run(true)
	if !slices.Equal(obs.ops, oneObs.ops) {
		t.Fatalf("operations observed:\n%q\none per call:\n%q", obs.ops, oneObs.ops)
	}
	if !slices.Equal(obs.calls, oneObs.calls) {
		t.Fatalf("guest calls observed:\n%q\none per call:\n%q", obs.calls, oneObs.calls)
	}
	if ops != oneOps || pending != onePending || ops != 1 || pending != 1 {
		t.Fatalf("in flight %d, pending %d; one per call: %d, %d", ops, pending, oneOps, onePending)
	}
	if len(got) != len(one) {
		t.Fatalf("decided %v, one per call %v", got, one)
	}
	for tag, r := range one {
		g := got[tag]
		if g.Status != r.Status || len(g.Outputs) != len(r.Outputs) || (g.Err == nil) != (r.Err == nil) || (g.Err != nil && g.Err.Error() != r.Err.Error()) {
			t.Fatalf("record %d: %+v, one per call %+v", tag, g, r)
		}
	}
}
