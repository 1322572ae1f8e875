package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/asyncop"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/lookupsrv"
)

type lookupServer = lookupsrv.Server

func newLookupServer(t testing.TB, delay func() time.Duration) *lookupServer {
	return lookupsrv.New(t, func(string) time.Duration { return delay() })
}

func loadLookup(t testing.TB, srv *lookupServer, lim Limits, allow ...string) (*Module, *Engine) {
	t.Helper()
	return loadLookupWasm(t, guest(t, "plugins/examples/lookup"), srv, lim, allow...)
}

// loadLookupWasm loads wasm, a lookup guest (the Go or Rust example), as
// loadLookup does.
func loadLookupWasm(t testing.TB, wasm []byte, srv *lookupServer, lim Limits, allow ...string) (*Module, *Engine) {
	t.Helper()
	if allow == nil {
		allow = []string{strings.TrimPrefix(srv.URL, "http://")}
	}
	e := sharedEngine(t)
	m, err := e.Load(context.Background(), wasm, ModuleConfig{
		Name: "lookup", Limits: lim,
		Env:   map[string]string{"LOOKUP_URL": srv.URL + "/users/"},
		Async: AsyncConfig{Config: asyncop.Config{HTTP: asyncop.HTTP{AllowHosts: allow, Timeout: 2 * time.Second}}, Key: "pipelines.lookup.async"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m, e
}

var engineOnce struct {
	sync.Once
	e *Engine
}

// sharedEngine is one engine for the async tests, so that the lookup guest
// is compiled once (its cache is the engine's).
func sharedEngine(t testing.TB) *Engine {
	engineOnce.Do(func() {
		e, err := NewEngine("", nil)
		if err != nil {
			t.Fatal(err)
		}
		engineOnce.e = e
	})
	return engineOnce.e
}

func rec(key string, mode string) *abi.Record {
	r := &abi.Record{Topic: "in", Key: []byte(key), Value: []byte(`"v-` + key + `"`), Attempt: 1}
	if mode != "" {
		r.Headers = []abi.Header{{Key: "lookup.mode", Value: []byte(mode)}}
	}
	return r
}

// drain polls in until want records finished or the deadline passes.
func drain(t *testing.T, in *Instance, want int, deadline time.Duration) map[any]Result {
	t.Helper()
	got := map[any]Result{}
	end := time.Now().Add(deadline)
	for len(got) < want {
		if time.Now().After(end) {
			t.Fatalf("%d of %d records finished within %s (pending %d)", len(got), want, deadline, in.Pending())
		}
		select {
		case <-in.Ready():
		case <-time.After(20 * time.Millisecond):
		}
		for _, d := range in.Poll(context.Background(), time.Now()) {
			if _, dup := got[d.Tag]; dup {
				t.Fatalf("record %v finished twice", d.Tag)
			}
			got[d.Tag] = d.Result
		}
	}
	return got
}

// One instance keeps many lookups in flight; each result reaches its own
// record whatever order the responses arrive in.
func TestAsyncResultsReachTheirRecords(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return time.Duration(rand.IntN(30)) * time.Millisecond })
	m, e := loadLookup(t, srv, Limits{RecordTimeout: 10 * time.Second})
	in := newInstance(t, m)
	const n = 200
	for i := 0; i < n; i++ {
		res := in.Process(context.Background(), rec(fmt.Sprint("k", i), ""), i)
		if res.Status != abi.StatusPending || res.Err != nil {
			t.Fatalf("record %d: %v %v", i, res.Status, res.Err)
		}
	}
	if in.AsyncInFlight() == 0 || in.Pending() == 0 {
		t.Fatalf("nothing in flight after starting %d records", n)
	}
	got := drain(t, in, n, 20*time.Second)
	for i := 0; i < n; i++ {
		res := got[i]
		if res.Err != nil || len(res.Outputs) != 1 {
			t.Fatalf("record %d: %+v", i, res)
		}
		var v struct {
			Key    string
			Record string
			Lookup struct{ ID string }
		}
		if err := json.Unmarshal(res.Outputs[0].Value, &v); err != nil {
			t.Fatal(err)
		}
		k := fmt.Sprint("k", i)
		if v.Key != k || v.Record != "v-"+k || v.Lookup.ID != k || string(res.Outputs[0].Key) != k {
			t.Fatalf("record %d got %+v", i, v)
		}
	}
	if p := srv.Peak.Load(); p < 10 {
		t.Fatalf("peak concurrent requests %d: the instance did not overlap its lookups", p)
	}
	waitZero(t, e)
	t.Logf("peak concurrent requests from one instance: %d", srv.Peak.Load())
}

func waitZero(t *testing.T, e *Engine) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); e.AsyncInFlight() != 0; {
		if time.Now().After(end) {
			t.Fatalf("%d asynchronous operations still counted in flight", e.AsyncInFlight())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAsyncRefusedHost(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 0 })
	m, _ := loadLookup(t, srv, Limits{}, "lookup.internal:8080", "*.example.com")
	in := newInstance(t, m)
	if res := in.Process(context.Background(), rec("7", ""), 1); res.Status != abi.StatusPending {
		t.Fatalf("%+v", res)
	}
	got := drain(t, in, 1, 5*time.Second)[1]
	if got.Status != abi.StatusFail || got.Err == nil || !strings.Contains(got.Err.Error(), "is not allowed (pipelines.lookup.async.http.allow_hosts: lookup.internal:8080, *.example.com)") {
		t.Fatalf("want a terminal failure naming the allow list, got %v %v", got.Status, got.Err)
	}
	if srv.Total.Load() != 0 {
		t.Fatal("the refused request reached the server")
	}
}

func TestAsyncNoNetworkByDefault(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 0 })
	m, _ := loadLookup(t, srv, Limits{}, []string{}...)
	in := newInstance(t, m)
	in.Process(context.Background(), rec("7", ""), 1)
	got := drain(t, in, 1, 5*time.Second)[1]
	if got.Status != abi.StatusFail || !strings.Contains(got.Err.Error(), "allow_hosts is empty") {
		t.Fatalf("%v %v", got.Status, got.Err)
	}
}

func TestAsyncHTTPTimeout(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 0 })
	m, e := loadLookup(t, srv, Limits{RecordTimeout: 10 * time.Second})
	in := newInstance(t, m)
	start := time.Now()
	in.Process(context.Background(), rec("hang", ""), 1)
	got := drain(t, in, 1, 8*time.Second)[1]
	if got.Status != abi.StatusRetry || !strings.Contains(got.Err.Error(), "timed out") {
		t.Fatalf("%v %v", got.Status, got.Err)
	}
	if el := time.Since(start); el < 2*time.Second || el > 6*time.Second {
		t.Fatalf("timed out after %s, want the 2s request timeout", el)
	}
	waitZero(t, e)
}

// A record whose lookup outlives the record deadline fails at the deadline;
// the instance lives on.
func TestAsyncRecordDeadlineCoversWaits(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 0 })
	m, e := loadLookup(t, srv, Limits{RecordTimeout: 300 * time.Millisecond})
	in := newInstance(t, m)
	in.Process(context.Background(), rec("hang", ""), "hang")
	got := drain(t, in, 1, 5*time.Second)["hang"]
	f := got.Fault()
	if f == nil || f.Kind != FaultDeadline || !f.Keep || !strings.Contains(f.Msg, "GET "+srv.URL+"/users/hang") {
		t.Fatalf("%+v", got)
	}
	if in.Dead() {
		t.Fatal("the instance was discarded for a record that waited too long")
	}
	in.Process(context.Background(), rec("after", ""), "after")
	if got := drain(t, in, 1, 5*time.Second)["after"]; got.Err != nil {
		t.Fatalf("next record: %v", got.Err)
	}
	waitZero(t, e)
}

// A guest that never decides its record (it re-arms a timer forever) is
// caught at the deadline, reported with what it waits on, and does not hold
// the instance: other records finish meanwhile.
func TestAsyncCompletionLeak(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 5 * time.Millisecond })
	m, e := loadLookup(t, srv, Limits{RecordTimeout: 500 * time.Millisecond})
	in := newInstance(t, m)
	in.Process(context.Background(), rec("leak", "leak"), "leak")
	for i := 0; i < 20; i++ {
		in.Process(context.Background(), rec(fmt.Sprint(i), ""), i)
	}
	got := drain(t, in, 21, 5*time.Second)
	for i := 0; i < 20; i++ {
		if got[i].Err != nil {
			t.Fatalf("record %d: %v", i, got[i].Err)
		}
	}
	f := got["leak"].Fault()
	if f == nil || f.Kind != FaultDeadline || !strings.Contains(f.Msg, "timer") {
		t.Fatalf("leak: %+v", got["leak"])
	}
	waitZero(t, e)
}

// A record that faults in its continuation discards the instance; the
// records waiting on it fail as lost, and their late completions are
// dropped.
func TestAsyncInstanceLost(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 0 })
	m, e := loadLookup(t, srv, Limits{RecordTimeout: 5 * time.Second})
	in := newInstance(t, m)
	in.Process(context.Background(), rec("slow", ""), "slow")
	in.Process(context.Background(), rec("boom", "panic"), "boom")
	got := drain(t, in, 2, 5*time.Second)
	if f := got["boom"].Fault(); f == nil || f.Kind != FaultPanic {
		t.Fatalf("boom: %+v", got["boom"])
	}
	if f := got["slow"].Fault(); f == nil || f.Kind != FaultInstanceLost {
		t.Fatalf("slow: %+v", got["slow"])
	}
	if !in.Dead() {
		t.Fatal("instance alive after a panic")
	}
	// The slow response still arrives; it must be dropped without effect.
	time.Sleep(600 * time.Millisecond)
	if d := in.Poll(context.Background(), time.Now()); len(d) != 0 {
		t.Fatalf("dead instance returned %d more records", len(d))
	}
	waitZero(t, e)
}

func TestAsyncPendingWithoutOperation(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 0 })
	m, _ := loadLookup(t, srv, Limits{})
	in := newInstance(t, m)
	res := in.Process(context.Background(), rec("7", "pending"), 1)
	if res.Status != abi.StatusFail || !strings.Contains(res.Err.Error(), "no asynchronous operation is outstanding") {
		t.Fatalf("%v %v", res.Status, res.Err)
	}
}

func TestAsyncChain(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return 0 })
	m, _ := loadLookup(t, srv, Limits{})
	in := newInstance(t, m)
	in.Process(context.Background(), rec("7", "chain"), 1)
	if got := drain(t, in, 1, 5*time.Second)[1]; got.Err != nil || len(got.Outputs) != 1 {
		t.Fatalf("%+v", got)
	}
}

// Per-record operation cap and a module that imports async_start without
// the completion export.
func TestAsyncModuleChecks(t *testing.T) {
	imp := wt.Import{Module: abi.HostModule, Name: abi.ImportAsyncStart, Params: []byte{wt.I32, wt.I32, wt.I32, wt.I32}, Results: []byte{wt.I32}}
	_, err := newEngine(t).Load(context.Background(), wt.Minimal(wt.I32Const(0), imp).Bytes(), ModuleConfig{Name: "x"})
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "does not export wasmstream_on_complete") {
		t.Fatalf("%v", err)
	}
}

// Many instances share the engine's count; it returns to zero.
func TestAsyncConcurrentInstances(t *testing.T) {
	srv := newLookupServer(t, func() time.Duration { return time.Duration(rand.IntN(10)) * time.Millisecond })
	m, e := loadLookup(t, srv, Limits{RecordTimeout: 10 * time.Second})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in, err := m.NewInstance(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			for i := 0; i < 50; i++ {
				in.Process(context.Background(), rec(fmt.Sprint(w, "-", i), ""), i)
			}
			got := drain(t, in, 50, 20*time.Second)
			for i := 0; i < 50; i++ {
				if got[i].Err != nil {
					t.Error(got[i].Err)
				}
			}
		}()
	}
	wg.Wait()
	waitZero(t, e)
}

// A module's connections close with it: a replaced pipeline's module does
// not keep them (and their goroutines) open until they have been idle long
// enough.
func TestHTTPConnectionsCloseWithModule(t *testing.T) {
	var opened, closed atomic.Int64
	srv := lookupsrv.Handler(nil)
	srv.Server = httptest.NewUnstartedServer(srv)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Shutdown)
	m, _ := loadLookupWasm(t, guest(t, "plugins/examples/lookup"), srv, Limits{RecordTimeout: 10 * time.Second})
	in := newInstance(t, m)
	const n = 8
	for i := 0; i < n; i++ {
		if res := in.Process(context.Background(), rec(fmt.Sprint("k", i), ""), i); res.Status != abi.StatusPending {
			t.Fatalf("record %d: %v %v", i, res.Status, res.Err)
		}
	}
	for tag, res := range drain(t, in, n, 10*time.Second) {
		if res.Err != nil || len(res.Outputs) != 1 {
			t.Fatalf("record %v: %+v", tag, res)
		}
	}
	if opened.Load() == 0 || closed.Load() != 0 {
		t.Fatalf("before Close: %d connections opened, %d closed", opened.Load(), closed.Load())
	}
	m.Close(context.Background())
	for end := time.Now().Add(5 * time.Second); closed.Load() < opened.Load(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after Close: %d of %d connections closed", closed.Load(), opened.Load())
		}
	}
}
