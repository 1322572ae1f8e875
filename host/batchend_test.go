package host

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// A call's last deadline (ABI.md §10, §10.1): after record_next or
// completion_next answered 0, the guest has one deadline, never renewed.
// These guests keep calling the host function after it answered 0; on a
// host that gave each such call a fresh limits.record_timeout the call never
// ended, held its guest-call slot for good, and starved every other
// pipeline of the host.

// batchPastEndWat is testdata/batch.wat with its loop going on after
// record_next answered 0, as a guest that ignores the end of its batch.
func batchPastEndWat(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(wt.RepoRoot(t), "host/testdata/batch.wat"))
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	const end = `(if (i32.eqz (local.get $n)) (then (return (i32.const 0))))`
	if !strings.Contains(src, end) {
		t.Fatal("testdata/batch.wat no longer has the end of its batch loop")
	}
	return assemble(t, strings.Replace(src, end, `(if (i32.eqz (local.get $n)) (then (br $records)))`, 1))
}

// completionsPastEndWat is testdata/completions.wat with its completions
// loop going on after completion_next answered 0.
func completionsPastEndWat(t testing.TB) []byte {
	t.Helper()
	return completionsWat(t, func(src string) string {
		const end = `(if (i32.eqz (local.get $n)) (then (return (i32.const 0))))`
		if !strings.Contains(src, end) {
			t.Fatal("testdata/completions.wat no longer has the end of its completions loop")
		}
		return strings.Replace(src, end, `(if (i32.eqz (local.get $n)) (then (br $completions)))`, 1)
	})
}

// The batch call after its last record ends at one deadline: the records
// keep the outcomes record_next gave them, the call faults (deadline) about
// one record_timeout after the end, and the instance is discarded.
func TestBatchPastEndBoundedOnce(t *testing.T) {
	const timeout = 300 * time.Millisecond
	m := load(t, batchPastEndWat(t), Limits{RecordTimeout: timeout})
	in := newInstance(t, m)
	defer in.Close(context.Background())
	recs := []abi.Record{kind(0, 0), kind(1, 2), kind(6, 0)}
	out := make([]Outcome, len(recs))
	ctx, cancel := context.WithTimeout(context.Background(), 20*timeout)
	defer cancel()
	start := time.Now()
	ran := in.ProcessBatch(ctx, batchOf(recs), out)
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("the batch call ran %v, until the test's own context ended: its deadline was renewed", took)
	}
	if ran != 3 {
		t.Fatalf("ran %d, want 3", ran)
	}
	if out[0].Status != abi.StatusOK || out[1].Status != abi.StatusOK || len(out[1].Outputs) != 2 || out[2].Status != abi.StatusRetry {
		t.Fatalf("the records decided before the end lost their outcomes: %v %v %d / %v", out[0].Status, out[1].Status, len(out[1].Outputs), out[2].Status)
	}
	for i := range out {
		if out[i].Fault() != nil {
			t.Fatalf("record %d got the fault after the end: %v", i, out[i].Err)
		}
	}
	if took < timeout || took > 3*timeout {
		t.Fatalf("the call ended %v after it began; want one record_timeout (%v) past its end", took, timeout)
	}
	if !in.Dead() {
		t.Fatal("the instance that ran past its last deadline lives on")
	}
}

// The same for the completions entry: after completion_next answered 0 the
// call has one deadline; the completions it delivered keep their outcomes.
func TestCompletionsPastEndBoundedOnce(t *testing.T) {
	const timeout = 300 * time.Millisecond
	m := load(t, completionsPastEndWat(t), Limits{RecordTimeout: 10 * timeout})
	in := newInstance(t, m)
	defer in.Close(context.Background())
	recs := []abi.Record{kind(0, 0), kind(1, 0), kind(6, 0)}
	startWaiting(t, in, recs)
	// The records' deadline is 3 s; the call's after its end is measured
	// from its end, record_timeout again: the call must end by then.
	ctx, cancel := context.WithTimeout(context.Background(), 30*timeout)
	defer cancel()
	start := time.Now()
	got := byTag(in.Poll(ctx, time.Now()))
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("the completions call ran %v, until the test's own context ended: its deadline was renewed", took)
	}
	if len(got) != 3 || got[0].Status != abi.StatusOK || got[1].Status != abi.StatusOK || len(got[1].Outputs) != 1 || got[2].Status != abi.StatusFail {
		t.Fatalf("the completions delivered before the end lost their outcomes: %+v", got)
	}
	if took > 10*timeout+time.Second {
		t.Fatalf("the call ended %v after it began; want one record_timeout (%v) past its end", took, 10*timeout)
	}
	if !in.Dead() {
		t.Fatal("the instance that ran past its last deadline lives on")
	}
}

// Starvation: as many guests as the engine has guest-call slots keep
// running batches that never end on their own; an honest pipeline on the
// same engine still gets its records through, because each hostile call
// gives its slot back one record_timeout after its last record.
func TestBatchPastEndDoesNotStarveOtherPipelines(t *testing.T) {
	const timeout = 200 * time.Millisecond
	e := newEngine(t)
	hostile, err := e.Load(context.Background(), batchPastEndWat(t), ModuleConfig{Name: "hostile", Limits: Limits{RecordTimeout: timeout}})
	if err != nil {
		t.Fatal(err)
	}
	defer hostile.Close(context.Background())
	honest, err := e.Load(context.Background(), wt.BuildWat(t, "host/testdata/batch.wat"), ModuleConfig{Name: "honest", Limits: Limits{RecordTimeout: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer honest.Close(context.Background())

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	faults := 0
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for ctx.Err() == nil {
				in, err := hostile.NewInstance(ctx)
				if err != nil {
					return
				}
				recs := []abi.Record{kind(0, 0), kind(0, 0)}
				out := make([]Outcome, len(recs))
				in.ProcessBatch(ctx, batchOf(recs), out)
				if in.Dead() && ctx.Err() == nil {
					mu.Lock()
					faults++
					mu.Unlock()
				}
				in.Close(context.Background())
			}
		})
	}
	defer func() { stop(); wg.Wait() }()
	// The hostile calls hold every slot before the honest pipeline asks
	// for one (on a loaded machine starting them takes a while).
	slotsHeld := time.Now().Add(10 * time.Second)
	for hostile.slots.Running() < e.slots.Size() {
		if time.Now().After(slotsHeld) {
			t.Fatalf("the hostile guests hold %d of %d slots after 10 s", hostile.slots.Running(), e.slots.Size())
		}
		time.Sleep(time.Millisecond)
	}

	in, err := honest.NewInstance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close(context.Background())
	const n = 100
	done := 0
	hctx, hcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer hcancel()
	for done < n {
		if hctx.Err() != nil {
			t.Fatalf("the honest pipeline decided %d of %d records in 30 s beside guests that never end their batches", done, n)
		}
		recs := make([]abi.Record, 10)
		for i := range recs {
			recs[i] = kind(1, 1)
		}
		out := make([]Outcome, len(recs))
		ran := in.ProcessBatch(hctx, batchOf(recs), out)
		for i := range ran {
			if out[i].Status != abi.StatusOK {
				t.Fatalf("honest record: %v %v", out[i].Status, out[i].Err)
			}
		}
		done += ran
	}
	// The honest records ran on slots the hostile calls gave back by
	// faulting; wait for the count to show it (the goroutine that saw its
	// instance die may not have counted yet).
	faulted := func() bool { mu.Lock(); defer mu.Unlock(); return faults > 0 }
	counted := time.Now().Add(10 * time.Second)
	for !faulted() && time.Now().Before(counted) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if faults == 0 {
		t.Fatal("no hostile call ended in a fault: the test did not exercise the bound")
	}
}
