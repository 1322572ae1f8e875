package rpabi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
)

// The payload bytes Redpanda's SDKs write (zig-zag varints: -1 is 0x01, 2
// is 0x04), checked by hand, then the round trip.
func TestPayloadBytes(t *testing.T) {
	rec := &abi.Record{Key: nil, Value: []byte("hi"), Headers: []abi.Header{{Key: "h", Value: nil}, {Key: "", Value: []byte{}}}}
	want := []byte{0x01, 0x04, 'h', 'i', 0x04, 0x02, 'h', 0x01, 0x00, 0x00}
	got := AppendPayload(nil, rec)
	if !bytes.Equal(got, want) {
		t.Fatalf("payload % x, want % x", got, want)
	}
	if PayloadSize(rec) != len(want) {
		t.Fatalf("PayloadSize %d, want %d", PayloadSize(rec), len(want))
	}
	o, err := DecodePayload(got)
	if err != nil {
		t.Fatal(err)
	}
	if o.Key != nil || string(o.Value) != "hi" || len(o.Headers) != 2 || o.Headers[0].Value != nil || o.Headers[1].Value == nil || o.Partition != -1 || o.Topic != "" {
		t.Fatalf("decoded %+v", o)
	}
	empty, _ := DecodePayload([]byte{0x00, 0x00, 0x00})
	if empty.Key == nil || empty.Value == nil || len(empty.Key)+len(empty.Value) != 0 {
		t.Fatalf("empty key and value decoded as %+v", empty)
	}
}

func TestDecodePayloadRefuses(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":           nil,
		"key past end":    {0x08, 'a'},
		"length -2":       {0x03},
		"no headers":      {0x01, 0x01},
		"header null key": {0x01, 0x01, 0x02, 0x01, 0x01},
		"trailing bytes":  {0x01, 0x01, 0x00, 0xff},
		"header count":    binary.AppendVarint([]byte{0x01, 0x01}, abi.MaxHeaders+1),
		"overlong varint": {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
	} {
		if _, err := DecodePayload(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

func TestOptions(t *testing.T) {
	b := AppendOptions(nil, "second")
	if want := append([]byte{0x01, 12}, "second"...); !bytes.Equal(b, want) {
		t.Fatalf("% x, want % x", b, want)
	}
	if topic, err := DecodeOptions(b); err != nil || topic != "second" {
		t.Fatalf("%q %v", topic, err)
	}
	if topic, err := DecodeOptions(nil); err != nil || topic != "" {
		t.Fatalf("no options: %q %v", topic, err)
	}
	for _, bad := range [][]byte{{0x02}, {0x01}, {0x01, 0x01}, {0x01, 0x10, 'a'}} {
		if _, err := DecodeOptions(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("% x: %v", bad, err)
		}
	}
}

// FuzzDecodePayload: whatever a guest writes decodes or is refused, never
// panics, and what decodes encodes back to the same bytes.
func FuzzDecodePayload(f *testing.F) {
	f.Add([]byte{0x01, 0x04, 'h', 'i', 0x04, 0x02, 'h', 0x01, 0x00, 0x00})
	f.Add([]byte{0x00, 0x00, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := DecodePayload(b)
		if err != nil {
			return
		}
		again := AppendPayload(nil, &abi.Record{Key: o.Key, Value: o.Value, Headers: o.Headers})
		// A varint may be written longer than needed; the canonical form
		// decodes to the same output.
		o2, err := DecodePayload(again)
		if err != nil || !bytes.Equal(o2.Key, o.Key) || !bytes.Equal(o2.Value, o.Value) || (o2.Key == nil) != (o.Key == nil) || (o2.Value == nil) != (o.Value == nil) || len(o2.Headers) != len(o.Headers) {
			t.Fatalf("% x decoded to %+v, re-encoded % x to %+v (%v)", b, o, again, o2, err)
		}
	})
}
