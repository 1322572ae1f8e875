//go:build !wasip1

package main

import (
	"bytes"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
)

func TestUppercase(t *testing.T) {
	res := guest.Run(abi.Record{Topic: "in", Key: []byte("k1"), Value: []byte("hello, Wörld"),
		Headers: []abi.Header{{Key: "h", Value: []byte("v")}}})
	if res.Err != nil || res.Status != abi.StatusOK {
		t.Fatalf("status %v err %v", res.Status, res.Err)
	}
	if len(res.Outputs) != 1 {
		t.Fatalf("%d outputs, want 1", len(res.Outputs))
	}
	o := res.Outputs[0]
	if string(o.Value) != "HELLO, WÖRLD" || string(o.Key) != "k1" || o.Topic != "" || o.Partition != -1 {
		t.Fatalf("output %+v", o)
	}
	if len(o.Headers) != 1 || o.Headers[0].Key != "h" || string(o.Headers[0].Value) != "v" {
		t.Fatalf("headers not kept: %+v", o.Headers)
	}
}

func TestUppercaseNullValue(t *testing.T) {
	res := guest.Run(abi.Record{Topic: "in"})
	if res.Err != nil || len(res.Outputs) != 1 || res.Outputs[0].Value != nil {
		t.Fatalf("null value: %+v", res)
	}
}

// FuzzToUpper: the in-place ASCII path and the fallback agree with
// bytes.ToUpper on any input.
func FuzzToUpper(f *testing.F) {
	for _, s := range []string{"", "hello, World", "hello, Wörld", "ß", "\xff\xfe", "abc\x80"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		want := bytes.ToUpper(v)
		if got := toUpper(append([]byte(nil), v...)); !bytes.Equal(got, want) {
			t.Fatalf("toUpper(%q) = %q, bytes.ToUpper %q", v, got, want)
		}
	})
}
