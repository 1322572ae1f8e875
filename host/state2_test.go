package host

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// mapState2 is a mapState that serves two-part keys and stream time
// (State2): the two-part keys in a map of their own, "key\x00sub".
type mapState2 struct {
	*mapState
	m2   map[string][]byte
	time int64
}

func (s *mapState2) Get2(key, sub []byte) ([]byte, abi.Errno) {
	if e := s.check(key); e != 0 {
		return nil, e
	}
	v, ok := s.m2[string(key)+"\x00"+string(sub)]
	if !ok {
		return nil, abi.ErrnoNotFound
	}
	return v, 0
}

func (s *mapState2) Put2(key, sub, value []byte) abi.Errno {
	if e := s.check(key); e != 0 {
		return e
	}
	s.m2[string(key)+"\x00"+string(sub)] = bytes.Clone(value)
	return 0
}

func (s *mapState2) Delete2(key, sub []byte) abi.Errno {
	delete(s.m2, string(key)+"\x00"+string(sub))
	return 0
}

func (s *mapState2) Written2(key, sub []byte) (int, bool) { return 0, false }

func (s *mapState2) Scan2(key, prefix, after []byte, fn func(sub, v []byte) bool) abi.Errno {
	if e := s.check(key); e != 0 {
		return e
	}
	head := string(key) + "\x00"
	var subs []string
	for k := range s.m2 {
		if sub, ok := strings.CutPrefix(k, head); ok && strings.HasPrefix(sub, string(prefix)) && (len(after) == 0 || sub > string(after)) {
			subs = append(subs, sub)
		}
	}
	sort.Strings(subs)
	for _, sub := range subs {
		if !fn([]byte(sub), s.m2[head+sub]) {
			break
		}
	}
	return 0
}

func (s *mapState2) StreamTime() (int64, abi.Errno) { return s.time, 0 }

// The event-time host functions (ABI.md §4.2) through the Go SDK's
// bindings (window.Bind, host/testdata/eventtime): stream time as the
// State gives it, two-part keys listed in sub order and apart from the
// one-part key of the same bytes, a two-part write counted as an output,
// and -11 from a State that serves none of it.
func TestEventTimeHostFunctions(t *testing.T) {
	wasm := guest(t, "host/testdata/eventtime")
	in := newInstance(t, load(t, wasm, Limits{}))
	st := &mapState2{mapState: &mapState{m: map[string][]byte{}, maxValue: 1 << 10, foreign: "other-"}, m2: map[string][]byte{}, time: -1}
	run := func(st State, key, value string, at int64, hs ...abi.Header) Result {
		return in.ProcessState(context.Background(), &abi.Record{Topic: "in", Key: []byte(key), Value: []byte(value), Timestamp: at, Attempt: 1, Headers: hs}, nil, st)
	}
	want := func(res Result, out string) {
		t.Helper()
		if res.Status != abi.StatusOK || len(res.Outputs) != 1 || string(res.Outputs[0].Value) != out {
			t.Fatalf("%v %v %+v, want %q", res.Status, res.Err, res.Outputs, out)
		}
	}
	want(run(st, "a", "x", 1000, abi.Header{Key: "eventtime.one"}), "-1 1000=x")
	if string(st.m["a"]) != "one" || len(st.m2) != 1 {
		t.Fatalf("one-part %q, two-part %q", st.m, st.m2)
	}
	st.time = 1000
	want(run(st, "a", "y", 1002), "1000 1000=x,1002=y")
	want(run(st, "a", "z", 1001), "1000 1000=x,1001=z,1002=y")
	want(run(st, "b", "w", 1003), "1000 1003=w")
	if res := run(st, "other-a", "v", 1004); res.Status == abi.StatusOK || !errors.Is(res.Err, abi.ErrnoWrongKey) && !strings.Contains(errString(res.Err), abi.ErrnoWrongKey.Error()) {
		t.Fatalf("a key of another partition: %v %v", res.Status, res.Err)
	}
	// A two-part write is an output: with one output allowed, the emit
	// after it is refused.
	one := newInstance(t, load(t, wasm, Limits{MaxOutputs: 1}))
	if res := one.ProcessState(context.Background(), &abi.Record{Topic: "in", Key: []byte("c"), Timestamp: 1, Attempt: 1}, nil, st); res.Status == abi.StatusOK {
		t.Fatalf("a put2 and an emit under limits.max_outputs 1: %v %+v", res.Status, res.Outputs)
	}
	// A State without State2, and no state at all: -11.
	for _, s := range []State{st.mapState, nil} {
		if res := run(s, "a", "x", 1); res.Status == abi.StatusOK || !strings.Contains(errString(res.Err), abi.ErrnoNoState.Error()) {
			t.Fatalf("no event-time state (%T): %v %v", s, res.Status, res.Err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The event-time host functions' edge cases (host/testdata/state2.wat):
// stream_time's out outside memory faults the call; a sub over 1 KiB is
// -9; state_scan2 follows §4.1's buffer rules, the empty sub's entry
// coming only with the next one (-2 when the buffer holds it alone);
// stream_time writes the State's value as an i64.
func TestEventTimeHostFunctionEdges(t *testing.T) {
	in := newInstance(t, load(t, wt.BuildWat(t, "host/testdata/state2.wat"), Limits{}))
	st := &mapState2{mapState: &mapState{m: map[string][]byte{}, maxValue: 1 << 10}, m2: map[string][]byte{}, time: 1234}
	run := func(c int64) Result {
		return in.ProcessState(context.Background(), &abi.Record{Offset: c, Topic: "in", Attempt: 1}, nil, st)
	}
	if res := run(0); res.Fault() == nil || res.Fault().Kind != FaultBadPointer || !strings.Contains(res.Fault().Msg, abi.ImportStreamTime) {
		t.Fatalf("stream_time across the end of memory: %v %v", res.Status, res.Err)
	}
	in = newInstance(t, load(t, wt.BuildWat(t, "host/testdata/state2.wat"), Limits{}))
	for c := int64(1); c <= 3; c++ {
		if res := run(c); res.Status != abi.StatusOK {
			t.Errorf("case %d: %v %v", c, res.Status, res.Err)
		}
	}
}
