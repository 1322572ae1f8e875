package host

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
)

// mapState is a State over a map, with the bounds the scheduler's has
// (value size) and a key rule standing for the partition check.
type mapState struct {
	m        map[string][]byte
	maxValue int
	foreign  string // keys with this prefix belong to another partition
}

func (s *mapState) check(key []byte) abi.Errno {
	if s.foreign != "" && bytes.HasPrefix(key, []byte(s.foreign)) {
		return abi.ErrnoWrongKey
	}
	return 0
}

func (s *mapState) Get(key []byte) ([]byte, abi.Errno) {
	if e := s.check(key); e != 0 {
		return nil, e
	}
	v, ok := s.m[string(key)]
	if !ok {
		return nil, abi.ErrnoNotFound
	}
	return v, 0
}

func (s *mapState) Put(key, value []byte) abi.Errno {
	if e := s.check(key); e != 0 {
		return e
	}
	if len(value) > s.maxValue {
		return abi.ErrnoTooLarge
	}
	s.m[string(key)] = bytes.Clone(value)
	return 0
}

func (s *mapState) Delete(key []byte) abi.Errno { delete(s.m, string(key)); return 0 }

func (s *mapState) Scan(prefix, after []byte, fn func(k, v []byte) bool) abi.Errno {
	var keys []string
	for k := range s.m {
		if strings.HasPrefix(k, string(prefix)) && k > string(after) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !fn([]byte(k), s.m[k]) {
			break
		}
	}
	return 0
}

func TestStateHostFunctions(t *testing.T) {
	m := load(t, guest(t, "plugins/examples/count"), Limits{})
	in := newInstance(t, m)
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
	// Values larger than the guest's first buffer (256 bytes) come back whole.
	if res := run("b", abi.Header{Key: "count.pad", Value: []byte("1000")}); res.Status != abi.StatusOK {
		t.Fatalf("padded: %v", res.Err)
	}
	if res := run("b"); res.Status != abi.StatusOK || string(res.Outputs[0].Value) != "2" {
		t.Fatalf("read back a padded value: %v %+v", res.Err, res.Outputs)
	}
	// A scan in several batches (keys of 300 bytes of padding, 64 KiB buffer).
	for i := 0; i < 300; i++ {
		st.m["s/"+strings.Repeat("k", 3)+string(rune('a'+i%26))+string(rune('a'+i/26))] = bytes.Repeat([]byte{'v'}, 300)
	}
	res := run("s/", abi.Header{Key: "count.scan", Value: []byte("s/")})
	if res.Status != abi.StatusOK || len(res.Outputs) != 302 {
		t.Fatalf("scan: %v %v, %d outputs, want 302", res.Status, res.Err, len(res.Outputs))
	}
	for i := 2; i < len(res.Outputs); i++ {
		if string(res.Outputs[i-1].Key) >= string(res.Outputs[i].Key) {
			t.Fatalf("scan out of order at %d: %s, %s", i, res.Outputs[i-1].Key, res.Outputs[i].Key)
		}
	}
	for _, tc := range []struct {
		name string
		res  Result
		want abi.Errno
	}{
		{"too large", run("c", abi.Header{Key: "count.pad", Value: []byte("70000")}), abi.ErrnoTooLarge},
		{"key too large", run(strings.Repeat("k", abi.MaxStateKeyBytes+1)), abi.ErrnoTooLarge},
		{"wrong partition", run("a", abi.Header{Key: "count.key", Value: []byte("other-a")}), abi.ErrnoWrongKey},
		{"no state", in.Process(context.Background(), &abi.Record{Topic: "in", Key: []byte("a"), Attempt: 1}, nil), abi.ErrnoNoState},
	} {
		if tc.res.Status != abi.StatusFail || tc.res.Err == nil || !strings.Contains(tc.res.Err.Error(), tc.want.Error()) {
			t.Errorf("%s: %v %v, want a failure naming %q", tc.name, tc.res.Status, tc.res.Err, tc.want.Error())
		}
	}
	if string(st.m["a"]) != "3" {
		t.Fatalf("a = %q", st.m["a"])
	}
}
