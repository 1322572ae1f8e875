package host

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

// The asynchronous state operations (kinds 3 and 4, ABI.md §7.3) through
// the count-async example: a state get as an operation, the put in its
// completion.

// sharedState stands for a task's overlay and store: what the records of a
// partition share, safe for concurrent use. Reads of a gated key wait until
// its gate is opened.
type sharedState struct {
	mu      sync.Mutex
	m       map[string][]byte
	foreign string // keys with this prefix belong to another partition
	gates   map[string]chan struct{}
	reads   atomic.Int64 // reads through a Reader
}

func newSharedState() *sharedState {
	return &sharedState{m: map[string][]byte{}, foreign: "other-", gates: map[string]chan struct{}{}}
}

func (sh *sharedState) gate(key string) chan struct{} {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	g := make(chan struct{})
	sh.gates[key] = g
	return g
}

func (sh *sharedState) get(key string) ([]byte, bool) {
	sh.mu.Lock()
	g := sh.gates[key]
	sh.mu.Unlock()
	if g != nil {
		<-g
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	v, ok := sh.m[key]
	return bytes.Clone(v), ok
}

func (sh *sharedState) check(key []byte) abi.Errno {
	if len(key) > abi.MaxStateKeyBytes {
		return abi.ErrnoTooLarge
	}
	if bytes.HasPrefix(key, []byte(sh.foreign)) {
		return abi.ErrnoWrongKey
	}
	return 0
}

// merged is the shared keys in range with writes over them, sorted.
func (sh *sharedState) merged(writes map[string][]byte, prefix, after []byte) ([]string, map[string][]byte) {
	sh.mu.Lock()
	all := maps.Clone(sh.m)
	sh.mu.Unlock()
	for k, v := range writes {
		if v == nil {
			delete(all, k)
		} else {
			all[k] = v
		}
	}
	var keys []string
	for k := range all {
		if strings.HasPrefix(k, string(prefix)) && (len(after) == 0 || k > string(after)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, all
}

// layerState is one record's State: its writes (a nil value deletes) over
// the shared state; commit hands them over, as the scheduler does when the
// record succeeds.
type layerState struct {
	sh     *sharedState
	writes map[string][]byte
}

func (sh *sharedState) begin() *layerState { return &layerState{sh: sh, writes: map[string][]byte{}} }

func (s *layerState) commit() {
	s.sh.mu.Lock()
	defer s.sh.mu.Unlock()
	for k, v := range s.writes {
		if v == nil {
			delete(s.sh.m, k)
		} else {
			s.sh.m[k] = v
		}
	}
}

func (s *layerState) Get(key []byte) ([]byte, abi.Errno) {
	if e := s.sh.check(key); e != 0 {
		return nil, e
	}
	if v, ok := s.writes[string(key)]; ok {
		if v == nil {
			return nil, abi.ErrnoNotFound
		}
		return v, 0
	}
	if v, ok := s.sh.get(string(key)); ok {
		return v, 0
	}
	return nil, abi.ErrnoNotFound
}

func (s *layerState) Put(key, value []byte) abi.Errno {
	if e := s.sh.check(key); e != 0 {
		return e
	}
	s.writes[string(key)] = append([]byte{}, value...)
	return 0
}

func (s *layerState) Delete(key []byte) abi.Errno {
	if e := s.sh.check(key); e != 0 {
		return e
	}
	s.writes[string(key)] = nil
	return 0
}

func (s *layerState) Written(key []byte) (int, bool) {
	v, ok := s.writes[string(key)]
	return len(v), ok
}

func (s *layerState) Scan(prefix, after []byte, fn func(k, v []byte) bool) abi.Errno {
	keys, all := s.sh.merged(s.writes, prefix, after)
	for _, k := range keys {
		if !fn([]byte(k), all[k]) {
			break
		}
	}
	return 0
}

func (s *layerState) Reader() StateReader {
	return &layerReader{sh: s.sh, writes: maps.Clone(s.writes)}
}

// layerReader: the record's writes at async_start over the shared state.
type layerReader struct {
	sh     *sharedState
	writes map[string][]byte
}

func (r *layerReader) Check(key []byte) abi.Errno { return r.sh.check(key) }

func (r *layerReader) Get(key []byte) ([]byte, bool, abi.Errno) {
	r.sh.reads.Add(1)
	if v, ok := r.writes[string(key)]; ok {
		return bytes.Clone(v), v != nil, 0
	}
	v, ok := r.sh.get(string(key))
	return v, ok, 0
}

func (r *layerReader) Scan(prefix, after []byte, fn func(k, v []byte) bool) abi.Errno {
	r.sh.reads.Add(1)
	r.sh.get(string(prefix)) // waits while the prefix is gated
	keys, all := r.sh.merged(r.writes, prefix, after)
	for _, k := range keys {
		if !fn([]byte(k), all[k]) {
			break
		}
	}
	return 0
}

func loadCountAsync(t *testing.T, lim Limits) *Module {
	t.Helper()
	m, err := sharedEngine(t).Load(context.Background(), guest(t, "plugins/examples/count-async"), ModuleConfig{Name: "count-async", Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	return m
}

func hdr(k, v string) abi.Header { return abi.Header{Key: k, Value: []byte(v)} }

// runCount processes one record with st to its outcome (draining its
// completions) and commits st's writes when it succeeds.
func runCount(t *testing.T, in *Instance, st *layerState, key string, hs ...abi.Header) Result {
	t.Helper()
	r := &abi.Record{Topic: "in", Key: []byte(key), Attempt: 1, Headers: hs}
	res := in.ProcessState(context.Background(), r, key, st)
	if res.Status == abi.StatusPending {
		res = drain(t, in, 1, 10*time.Second)[key]
	}
	if res.Status == abi.StatusOK {
		st.commit()
	}
	return res
}

func wantCount(t *testing.T, what string, res Result, key, count string) {
	t.Helper()
	if res.Status != abi.StatusOK || len(res.Outputs) == 0 {
		t.Fatalf("%s: %v %v %+v", what, res.Status, res.Err, res.Outputs)
	}
	if o := res.Outputs[0]; string(o.Key) != key || string(o.Value) != count {
		t.Fatalf("%s: %s=%s, want %s=%s", what, o.Key, o.Value, key, count)
	}
}

// A get of a missing key, of a key the shared state has (another record's
// write: the overlay), of a key the record itself wrote before the
// operation started; a delete of the record's own hides the shared value.
func TestAsyncStateGet(t *testing.T) {
	m := loadCountAsync(t, Limits{RecordTimeout: 10 * time.Second})
	in := newInstance(t, m)
	sh := newSharedState()
	wantCount(t, "missing key", runCount(t, in, sh.begin(), "a"), "a", "1")
	if sh.reads.Load() != 1 {
		t.Fatalf("%d reads through the Reader, want 1: the get did not go the async path", sh.reads.Load())
	}
	wantCount(t, "a key of the shared state", runCount(t, in, sh.begin(), "a"), "a", "2")
	sh.mu.Lock()
	sh.m["b"] = []byte("10")
	sh.mu.Unlock()
	wantCount(t, "a key another record wrote", runCount(t, in, sh.begin(), "b"), "b", "11")
	wantCount(t, "the record's own write", runCount(t, in, sh.begin(), "b", hdr("count.set", "41")), "b", "42")
	if got := string(sh.m["b"]); got != "42" {
		t.Fatalf("b = %q", got)
	}
	// The Reader is taken at async_start: a write of the record's after it
	// is not seen, the ones before it are.
	st := sh.begin()
	st.Put([]byte("c"), []byte("7"))
	rd := st.Reader()
	st.Put([]byte("c"), []byte("8"))
	st.Delete([]byte("b"))
	if v, ok, e := rd.Get([]byte("c")); e != 0 || !ok || string(v) != "7" {
		t.Fatalf("c through the reader: %q %v %v", v, ok, e)
	}
	if v, ok, e := rd.Get([]byte("b")); e != 0 || !ok || string(v) != "42" {
		t.Fatalf("b through the reader: %q %v %v", v, ok, e)
	}
	if v, ok, e := st.Reader().Get([]byte("b")); e != 0 || ok {
		t.Fatalf("b deleted by the record: %q %v %v", v, ok, e)
	}
}

// A scan in batches of a few entries: many operations, chained; every key
// once, in order, with the record's own write.
func TestAsyncStateScan(t *testing.T) {
	m := loadCountAsync(t, Limits{RecordTimeout: 10 * time.Second})
	in := newInstance(t, m)
	sh := newSharedState()
	for i := 0; i < 50; i++ {
		sh.m[fmt.Sprintf("s/%03d", i)] = bytes.Repeat([]byte{'v'}, i)
	}
	sh.m["t/outside"] = []byte("x")
	before := sh.reads.Load()
	res := runCount(t, in, sh.begin(), "s/", hdr("count.scan", "s/"), hdr("count.scanbytes", "100"))
	wantCount(t, "scan", res, "s/", "1")
	if len(res.Outputs) != 52 {
		t.Fatalf("%d outputs, want 52", len(res.Outputs))
	}
	if o := res.Outputs[1]; string(o.Key) != "s/" || string(o.Value) != "1" {
		t.Fatalf("first entry %s=%s, want the record's own write", o.Key, o.Value)
	}
	for i, o := range res.Outputs[2:] {
		if string(o.Key) != fmt.Sprintf("s/%03d", i) || len(o.Value) != i {
			t.Fatalf("entry %d: %s (%d bytes)", i, o.Key, len(o.Value))
		}
	}
	// Batches of at most 100 bytes (one entry when it alone is more): many
	// operations, each bounded.
	if ops := sh.reads.Load() - before - 1; ops < 15 {
		t.Fatalf("%d scan operations, want at least 15 for 100-byte batches", ops)
	}
}

// The scan op's batch bound: at most limit bytes, yet at least one entry;
// the empty key's entry never alone.
func TestAsyncStateScanBound(t *testing.T) {
	sh := newSharedState()
	for i := 0; i < 10; i++ {
		sh.m[fmt.Sprintf("k%d", i)] = bytes.Repeat([]byte{'v'}, 100)
	}
	prefix := "k"
	scan := func(after string, maxBytes uint32) (keys []string) {
		t.Helper()
		got := make(chan []byte, 1)
		req := abi.AppendStateScan(nil, &abi.StateScanRequest{Prefix: []byte(prefix), After: []byte(after), MaxBytes: maxBytes})
		if _, err := (stateScanOp{}).StartRecord(context.Background(), sh.begin(), req, func(r []byte) { got <- r }); err != nil {
			t.Fatal(err)
		}
		c, err := abi.DecodeCompletion(<-got)
		if err != nil || c.Code != abi.CompletionOK {
			t.Fatalf("scan: %v %+v", err, c)
		}
		abi.DecodeStateEntries(c.Payload, func(k, v []byte) bool { keys = append(keys, string(k)); return true })
		return keys
	}
	if got := scan("", 10); len(got) != 1 || got[0] != "k0" {
		t.Fatalf("a bound below one entry: %v, want [k0]", got)
	}
	if got := scan("k0", 3*110); strings.Join(got, ",") != "k1,k2,k3" {
		t.Fatalf("three entries' bytes: %v", got)
	}
	if got := scan("", 0); len(got) != 10 {
		t.Fatalf("the default bound: %v", got)
	}
	if got := scan("k9", 0); len(got) != 0 {
		t.Fatalf("after the last key: %v", got)
	}
	// The empty key sorts first; a batch of it alone would hand the guest
	// the empty cursor, which starts the scan over: it comes with the next
	// entry, whatever the bound.
	sh.m[""] = bytes.Repeat([]byte{'v'}, 100)
	prefix = ""
	if got := scan("", 10); strings.Join(got, ",") != ",k0" {
		t.Fatalf("a bound below the empty key's entry: %q, want the empty key and k0", got)
	}
	if got := scan("", 2*110); strings.Join(got, ",") != ",k0" {
		t.Fatalf("a bound of two entries: %q, want the empty key and k0", got)
	}
	delete(sh.m, "k0")
	for i := 1; i < 10; i++ {
		delete(sh.m, fmt.Sprintf("k%d", i))
	}
	if got := scan("", 10); len(got) != 1 || got[0] != "" {
		t.Fatalf("the empty key alone in the state: %q", got)
	}
}

// What async_start refuses at once, as its errno: a key of another
// partition (-10), a key or prefix over 1024 bytes (-9), no state (-11); a
// malformed request (-3).
func TestAsyncStateErrors(t *testing.T) {
	m := loadCountAsync(t, Limits{RecordTimeout: 10 * time.Second})
	in := newInstance(t, m)
	sh := newSharedState()
	long := strings.Repeat("k", abi.MaxStateKeyBytes+1)
	for _, tc := range []struct {
		name string
		res  Result
		want abi.Errno
	}{
		{"wrong partition", runCount(t, in, sh.begin(), "a", hdr("count.key", "other-a")), abi.ErrnoWrongKey},
		{"key too large", runCount(t, in, sh.begin(), long), abi.ErrnoTooLarge},
		{"scan prefix too large", runCount(t, in, sh.begin(), "a", hdr("count.scan", long)), abi.ErrnoTooLarge},
		{"no state", in.Process(context.Background(), &abi.Record{Topic: "in", Key: []byte("a"), Attempt: 1}, nil), abi.ErrnoNoState},
	} {
		if tc.res.Status != abi.StatusFail || tc.res.Err == nil || !strings.Contains(tc.res.Err.Error(), tc.want.Error()) {
			t.Errorf("%s: %v %v, want a failure naming %q", tc.name, tc.res.Status, tc.res.Err, tc.want.Error())
		}
	}
	if in.Dead() || in.Pending() != 0 || in.AsyncInFlight() != 0 {
		t.Fatalf("after refusals: dead %v, pending %d, in flight %d", in.Dead(), in.Pending(), in.AsyncInFlight())
	}
	// The scan whose prefix was refused came after the count's put: that
	// record failed, and its write went with it.
	if got := string(sh.m["a"]); got != "" {
		t.Fatalf("a = %q after failed records", got)
	}
	// The operations' own answers, without a guest.
	st := sh.begin()
	for _, tc := range []struct {
		name string
		op   RecordOperation
		st   State
		req  []byte
		want abi.Errno
	}{
		{"get: wrong key", stateGetOp{}, st, abi.AppendStateGet(nil, []byte("other-x")), abi.ErrnoWrongKey},
		{"get: no state", stateGetOp{}, nil, abi.AppendStateGet(nil, []byte("x")), abi.ErrnoNoState},
		{"get: malformed", stateGetOp{}, st, []byte{9, 0, 0, 0, 'x'}, abi.ErrnoBadEncoding},
		{"scan: cursor too large", stateScanOp{}, st, abi.AppendStateScan(nil, &abi.StateScanRequest{After: []byte(long)}), abi.ErrnoTooLarge},
		{"scan: malformed", stateScanOp{}, st, abi.AppendStateGet(nil, []byte("p")), abi.ErrnoBadEncoding},
	} {
		_, err := tc.op.StartRecord(context.Background(), tc.st, tc.req, func([]byte) { t.Errorf("%s: done called", tc.name) })
		e, ok := err.(abi.Errno)
		if tc.want == abi.ErrnoBadEncoding {
			ok, e = err != nil && !ok, abi.ErrnoBadEncoding
		}
		if !ok || e != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// A record decided while its read is outstanding: the read is canceled,
// its late completion is delivered as canceled (the guest frees it, the
// instance lives on), and nothing is left in flight.
func TestAsyncStateCanceledWhenDecided(t *testing.T) {
	m := loadCountAsync(t, Limits{RecordTimeout: 10 * time.Second})
	in := newInstance(t, m)
	sh := newSharedState()
	g := sh.gate("a")
	st := sh.begin()
	res := in.ProcessState(context.Background(), &abi.Record{Topic: "in", Key: []byte("a"), Attempt: 1, Headers: []abi.Header{hdr("count.abandon", "")}}, "a", st)
	if res.Status != abi.StatusOK || len(res.Outputs) != 0 {
		t.Fatalf("abandon: %v %v %+v", res.Status, res.Err, res.Outputs)
	}
	if in.AsyncInFlight() != 0 || in.Pending() != 0 {
		t.Fatalf("in flight %d, pending %d after the record was decided", in.AsyncInFlight(), in.Pending())
	}
	close(g) // the read completes now, for a record that ended
	deadline := time.Now().Add(5 * time.Second)
	for m.asyncOps.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d operations still counted in flight by the engine", m.asyncOps.Load())
		}
		select {
		case <-in.Ready():
		case <-time.After(10 * time.Millisecond):
		}
	}
	if got := in.Poll(context.Background(), time.Now()); len(got) != 0 {
		t.Fatalf("a canceled completion decided records: %+v", got)
	}
	if in.Dead() {
		t.Fatal("the instance died on the canceled completion")
	}
	wantCount(t, "after", runCount(t, in, sh.begin(), "a"), "a", "1")
}

// done is called exactly once, also when the context ends before or while
// the read runs; a read cut short is an error, not a result.
func TestAsyncStateDoneOnceOnCancel(t *testing.T) {
	for _, op := range []RecordOperation{stateGetOp{}, stateScanOp{}} {
		for _, early := range []bool{true, false} {
			sh := newSharedState()
			g := sh.gate("slow")
			ctx, cancel := context.WithCancel(context.Background())
			if early {
				cancel()
			}
			var calls atomic.Int32
			results := make(chan []byte, 2)
			req := abi.AppendStateGet(nil, []byte("slow"))
			if _, ok := op.(stateScanOp); ok {
				req = abi.AppendStateScan(nil, &abi.StateScanRequest{Prefix: []byte("slow")})
			}
			if _, err := op.StartRecord(ctx, sh.begin(), req, func(r []byte) { calls.Add(1); results <- r }); err != nil {
				t.Fatal(err)
			}
			cancel()
			close(g)
			var r []byte
			select {
			case r = <-results:
			case <-time.After(5 * time.Second):
				t.Fatalf("%T early=%v: no completion", op, early)
			}
			if c, err := abi.DecodeCompletion(r); err != nil || c.Code != abi.CompletionError {
				t.Fatalf("%T early=%v: %v %+v, want an error completion", op, early, err, c)
			}
			time.Sleep(20 * time.Millisecond)
			if n := calls.Load(); n != 1 {
				t.Fatalf("%T early=%v: done called %d times", op, early, n)
			}
		}
	}
}

// The pool keeps working while a read waits: a record whose key's read is
// held stays pending while other records start, read, write and finish on
// the same instance and on a second one; then it completes with the count
// the others' writes left.
func TestAsyncStateInstanceWorksWhileReadWaits(t *testing.T) {
	m := loadCountAsync(t, Limits{RecordTimeout: 20 * time.Second})
	in, in2 := newInstance(t, m), newInstance(t, m)
	sh := newSharedState()
	sh.m["slow"] = []byte("5")
	g := sh.gate("slow")
	slow := sh.begin()
	if res := in.ProcessState(context.Background(), &abi.Record{Topic: "in", Key: []byte("slow"), Attempt: 1}, "slow", slow); res.Status != abi.StatusPending {
		t.Fatalf("slow: %v %v", res.Status, res.Err)
	}
	for i := 0; i < 20; i++ {
		inst := in
		if i%2 == 1 {
			inst = in2
		}
		k := fmt.Sprintf("k%d", i%4)
		wantCount(t, fmt.Sprintf("record %d", i), runCount(t, inst, sh.begin(), k), k, fmt.Sprint(i/4+1))
	}
	if in.Pending() != 1 {
		t.Fatalf("pending %d, want the slow record", in.Pending())
	}
	close(g)
	res := drain(t, in, 1, 10*time.Second)["slow"]
	wantCount(t, "slow", res, "slow", "6")
}
