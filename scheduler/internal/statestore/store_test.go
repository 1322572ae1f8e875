package statestore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Next(); n != 0 {
		t.Fatalf("next %d", n)
	}
	if err := s.Apply([]Write{{[]byte("a/1"), []byte("x")}, {[]byte("a/2"), []byte("")}, {[]byte("b"), []byte("y")}, {[]byte("a/3"), []byte("z")}, {[]byte("a/3"), nil}}, 42); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := s.Get(nil, []byte("a/1")); !ok || string(v) != "x" {
		t.Fatalf("a/1 = %q %v", v, ok)
	}
	if v, ok, _ := s.Get(nil, []byte("a/2")); !ok || len(v) != 0 {
		t.Fatalf("empty value: %q %v", v, ok)
	}
	if _, ok, _ := s.Get(nil, []byte("a/3")); ok {
		t.Fatal("deleted key found")
	}
	scan := func(prefix, after string) string {
		var ks []string
		s.Scan([]byte(prefix), []byte(after), func(k, v []byte) bool { ks = append(ks, string(k)); return true })
		return strings.Join(ks, ",")
	}
	if got := scan("a/", ""); got != "a/1,a/2" {
		t.Fatalf("scan a/: %s", got)
	}
	if got := scan("a/", "a/1"); got != "a/2" {
		t.Fatalf("scan a/ after a/1: %s", got)
	}
	if got := scan("", "a/2"); got != "b" {
		t.Fatalf("scan all after a/2: %s", got)
	}
	if k := s.Keys(); k != 3 || s.Size() <= 0 {
		t.Fatalf("keys %d", k)
	}
	s.Close()
	s, err = Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Next(); n != 42 {
		t.Fatalf("next after reopening: %d", n)
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Next(); n != 0 || s.Keys() != 0 {
		t.Fatalf("after a reset: next %d, %d keys", n, s.Keys())
	}
	s.Close()
	// A damaged file is replaced by an empty store.
	os.WriteFile(path, []byte("not a bbolt file, not at all, no"), 0o644)
	s, err = Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, _ := s.Next(); n != 0 {
		t.Fatalf("next of a replaced file: %d", n)
	}
}

// Bytes counts the keys and values of the store through puts, overwrites
// and deletes, survives a reopen, is 0 after a reset, and is counted once
// when a store from before the count is opened.
func TestStoreBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	walk := func() int64 {
		var n int64
		s.Scan(nil, nil, func(k, v []byte) bool { n += int64(len(k) + len(v)); return true })
		return n
	}
	check := func(what string) {
		t.Helper()
		if got, want := s.Bytes(), walk(); got != want {
			t.Fatalf("%s: Bytes %d, the keys and values hold %d", what, got, want)
		}
	}
	check("empty")
	steps := [][]Write{
		{{[]byte("a"), []byte("12345")}, {[]byte("bb"), []byte("")}, {[]byte("c"), []byte("xyz")}},
		{{[]byte("a"), []byte("1")}, {[]byte("c"), nil}, {[]byte("missing"), nil}, {[]byte("d"), []byte("long value")}},
		{{[]byte("d"), []byte("x")}, {[]byte("d"), []byte("longer value")}, {[]byte("bb"), nil}},
	}
	for i, ws := range steps {
		if err := s.Apply(ws, int64(i)); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("step %d", i))
	}
	want := s.Bytes()
	s.Close()
	if s, err = Open(path, time.Second); err != nil {
		t.Fatal(err)
	}
	if s.Bytes() != want {
		t.Fatalf("after reopening: %d bytes, want %d", s.Bytes(), want)
	}
	// A store written before the count: counted when opened.
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyBytes) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = Open(path, time.Second); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check("a store without the count")
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	check("reset")
}

// TestStoreEmptyKey: the empty key is a key like any other — set, read,
// listed first by a scan of every key (and only then), counted, deleted,
// kept across a reopen — though bbolt refuses an empty key (before, Apply
// failed with "key required").
func TestStoreEmptyKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.db")
	s, err := Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Apply([]Write{{[]byte("a"), []byte("1")}, {[]byte{}, []byte("e")}, {nil, []byte("n")}, {[]byte("b"), []byte("2")}}, 4); err != nil {
		t.Fatalf("applying writes of the empty key: %v", err)
	}
	for _, k := range [][]byte{nil, {}} {
		if v, ok, err := s.Get(nil, k); err != nil || !ok || string(v) != "n" {
			t.Fatalf("get %#v: %q %v %v, want the last write of the empty key", k, v, ok, err)
		}
	}
	scan := func(prefix, after string) string {
		var ks []string
		if err := s.Scan([]byte(prefix), []byte(after), func(k, v []byte) bool { ks = append(ks, fmt.Sprintf("%q=%s", k, v)); return true }); err != nil {
			t.Fatal(err)
		}
		return strings.Join(ks, ",")
	}
	if got := scan("", ""); got != `""=n,"a"=1,"b"=2` {
		t.Fatalf("scan of every key: %s", got)
	}
	if got := scan("", "a"); got != `"b"=2` {
		t.Fatalf("scan after a: %s", got)
	}
	if got := scan("a", ""); got != `"a"=1` {
		t.Fatalf("scan of prefix a: %s", got)
	}
	// A scan stopped at the empty key stops.
	n := 0
	s.Scan(nil, nil, func(k, v []byte) bool { n++; return false })
	if n != 1 {
		t.Fatalf("a scan stopped at its first key went on: %d keys", n)
	}
	if k := s.Keys(); k != 3 {
		t.Fatalf("%d keys, want 3", k)
	}
	s.Close()
	if s, err = Open(path, time.Second); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, ok, _ := s.Get(nil, nil); !ok || string(v) != "n" {
		t.Fatalf("the empty key after a reopen: %q %v", v, ok)
	}
	if err := s.Apply([]Write{{[]byte{}, []byte{}}}, -1); err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := s.Get(nil, nil); !ok || len(v) != 0 {
		t.Fatalf("an empty value of the empty key: %q %v", v, ok)
	}
	if err := s.Apply([]Write{{nil, nil}}, 5); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(nil, nil); ok || scan("", "") != `"a"=1,"b"=2` || s.Keys() != 2 {
		t.Fatalf("the empty key deleted: found %v, scan %s, %d keys", ok, scan("", ""), s.Keys())
	}
	if err := s.Apply([]Write{{nil, []byte("x")}}, -1); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Get(nil, nil); ok || s.Keys() != 0 {
		t.Fatalf("the empty key survived a reset")
	}
}

// TestStoreRefusesWhatItCannotHold: a key over MaxKeyBytes fails the whole
// Apply before anything is written (the offset is not recorded either).
func TestStoreRefusesWhatItCannotHold(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "p.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, n := range []int{MaxKeyBytes + 1, 40 << 10} {
		err := s.Apply([]Write{{[]byte("a"), []byte("1")}, {make([]byte, n), []byte("x")}}, 9)
		if !errors.Is(err, ErrCannotHold) {
			t.Fatalf("a key of %d bytes: %v, want ErrCannotHold", n, err)
		}
		if _, ok, _ := s.Get(nil, []byte("a")); ok {
			t.Fatal("a write of a refused Apply was made")
		}
		if next, _ := s.Next(); next != 0 {
			t.Fatalf("a refused Apply recorded offset %d", next)
		}
	}
	if err := Check(Write{Key: make([]byte, MaxKeyBytes), Value: nil}); err != nil {
		t.Fatalf("a key of MaxKeyBytes: %v", err)
	}
}

// Two-part keys (Key2) are kept apart from one-part keys: a one-part scan
// never lists them, a scan of a key's encoding lists its subs in order and
// not a longer key's, and SplitKey2 reads back what Key2 wrote. The
// stream time is counted in no key and listed by no scan.
func TestStoreKey2(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "p.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k2 := func(k, sub string) []byte { return Key2(nil, []byte(k), []byte(sub)) }
	if err := s.Apply([]Write{
		{[]byte("a"), []byte("1")},
		{k2("a", "y"), []byte("2")},
		{k2("a", ""), []byte("3")},
		{k2("a", "x"), []byte("4")},
		{k2("ab", "x"), []byte("5")},
		{[]byte(StreamTimeKey), []byte{0, 0, 0, 0, 0, 0, 0, 9}},
	}, 1); err != nil {
		t.Fatal(err)
	}
	var one []string
	s.Scan(nil, nil, func(k, v []byte) bool { one = append(one, string(k)); return true })
	if strings.Join(one, ",") != "a" {
		t.Fatalf("one-part scan: %q", one)
	}
	var subs []string
	s.Scan(k2("a", ""), nil, func(k, v []byte) bool {
		key, sub, ok := SplitKey2(k)
		if !ok || string(key) != "a" {
			t.Fatalf("split %q: %q %v", k, key, ok)
		}
		subs = append(subs, string(sub)+"="+string(v))
		return true
	})
	if strings.Join(subs, ",") != "=3,x=4,y=2" {
		t.Fatalf("subs of a: %q", subs)
	}
	if v, ok, _ := s.Get(nil, k2("a", "")); !ok || string(v) != "3" {
		t.Fatalf("(a, \"\") = %q %v", v, ok)
	}
	if tm, err := s.StreamTime(); err != nil || tm != 9 {
		t.Fatalf("stream time %d %v", tm, err)
	}
	want := int64(len("a1"))
	for _, k := range [][]byte{k2("a", "y"), k2("a", ""), k2("a", "x"), k2("ab", "x")} {
		want += int64(len(k) + 1)
	}
	if s.Bytes() != want || s.Keys() != 5 {
		t.Fatalf("bytes %d keys %d, want %d, 5", s.Bytes(), s.Keys(), want)
	}
	for _, w := range []Write{{Key: Key2(nil, []byte("a"), make([]byte, MaxKeyBytes+1))}, {Key: []byte(StreamTimeKey), Value: []byte("x")}} {
		if err := Check(w); !errors.Is(err, ErrCannotHold) {
			t.Fatalf("check %d-byte key: %v", len(w.Key), err)
		}
	}
}
