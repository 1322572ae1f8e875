package abi

import (
	"bytes"
	"testing"
)

// TestTimerFiringRoundTrip holds the firing's encoding (ABI.md §4.2) to
// its table: field order, widths, and the empty key kept as a key.
func TestTimerFiringRoundTrip(t *testing.T) {
	f := TimerFiring{At: 1700000060000, StreamTime: 1700000061234, Partition: 3, Attempt: 2, Topic: "in", Key: []byte("k")}
	b := AppendTimerFiring(nil, &f)
	if len(b) != TimerFiringSize(&f) {
		t.Fatalf("size %d, encoded %d", TimerFiringSize(&f), len(b))
	}
	want := []byte{0x60, 0x52, 0xe6, 0xcf, 0x8b, 0x01, 0, 0, 0x32, 0x57, 0xe6, 0xcf, 0x8b, 0x01, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 'i', 'n', 1, 0, 0, 0, 'k'}
	if !bytes.Equal(b, want) {
		t.Fatalf("encoding\n got %x\nwant %x", b, want)
	}
	g, err := DecodeTimerFiring(b)
	if err != nil || g.At != f.At || g.StreamTime != f.StreamTime || g.Partition != 3 || g.Attempt != 2 || g.Topic != "in" || string(g.Key) != "k" {
		t.Fatalf("decoded %+v, %v", g, err)
	}
	if _, err := DecodeTimerFiring(append(b, 0)); err == nil {
		t.Fatal("trailing byte accepted")
	}
	e := AppendTimerFiring(nil, &TimerFiring{Key: nil})
	if g, err := DecodeTimerFiring(e); err != nil || g.Key == nil || len(g.Key) != 0 {
		t.Fatalf("empty key decoded as %v, %v", g.Key, err)
	}
}
