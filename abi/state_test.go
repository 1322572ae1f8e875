package abi

import (
	"bytes"
	"testing"
)

func TestStateEntriesRoundTrip(t *testing.T) {
	var b []byte
	b = AppendStateEntry(b, []byte("a"), []byte("1"))
	b = AppendStateEntry(b, []byte("bb"), nil)
	if len(b) != StateEntrySize([]byte("a"), []byte("1"))+StateEntrySize([]byte("bb"), nil) {
		t.Fatalf("size %d", len(b))
	}
	var got []string
	if err := DecodeStateEntries(b, func(k, v []byte) bool { got = append(got, string(k)+"="+string(v)); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "a=1" || got[1] != "bb=" {
		t.Fatalf("%q", got)
	}
	if err := DecodeStateEntries(b[:len(b)-1], func(k, v []byte) bool { return true }); err == nil {
		t.Fatal("a cut entry decoded")
	}
}

func FuzzDecodeStateEntries(f *testing.F) {
	f.Add(AppendStateEntry(nil, []byte("k"), []byte("v")))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		var again []byte
		if DecodeStateEntries(b, func(k, v []byte) bool { again = AppendStateEntry(again, k, v); return true }) == nil && !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs")
		}
	})
}
