package statestore

import (
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
