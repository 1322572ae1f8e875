package host

import (
	"bytes"
	"maps"
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
	// written is the value lengths of the writes made through it (-1: a
	// delete): the record's own writes when a test uses one per record.
	written map[string]int
}

func (s *mapState) wrote(key []byte, n int) {
	if s.written == nil {
		s.written = map[string]int{}
	}
	s.written[string(key)] = n
}

func (s *mapState) Written(key []byte) (int, bool) {
	n, ok := s.written[string(key)]
	return max(n, 0), ok
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
	s.wrote(key, len(value))
	return 0
}

func (s *mapState) Delete(key []byte) abi.Errno {
	delete(s.m, string(key))
	s.wrote(key, -1)
	return 0
}

func (s *mapState) Scan(prefix, after []byte, fn func(k, v []byte) bool) abi.Errno {
	var keys []string
	for k := range s.m {
		if strings.HasPrefix(k, string(prefix)) && (len(after) == 0 || k > string(after)) {
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

// Reader is a copy of the map, taken at async_start.
func (s *mapState) Reader() StateReader {
	return mapReader{&mapState{m: maps.Clone(s.m), maxValue: s.maxValue, foreign: s.foreign}}
}

type mapReader struct{ s *mapState }

func (r mapReader) Check(key []byte) abi.Errno { return r.s.check(key) }

func (r mapReader) Get(key []byte) ([]byte, bool, abi.Errno) {
	v, e := r.s.Get(key)
	if e == abi.ErrnoNotFound {
		return nil, false, 0
	}
	return bytes.Clone(v), e == 0, e
}

func (r mapReader) Scan(prefix, after []byte, fn func(k, v []byte) bool) abi.Errno {
	return r.s.Scan(prefix, after, fn)
}

// The Go count example through the real state host functions
// (checkCountHostFunctions, which the Rust and AssemblyScript count examples
// run too).
func TestStateHostFunctions(t *testing.T) {
	checkCountHostFunctions(t, guest(t, "plugins/examples/count"), false)
}
