//go:build !wasip1

package main

import (
	"errors"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
)

func TestCount(t *testing.T) {
	guest.ResetState()
	want := []string{"1", "2", "1", "3"}
	for i, k := range []string{"a", "a", "b", "a"} {
		res := guest.Run(abi.Record{Topic: "in", Key: []byte(k)})
		if res.Status != abi.StatusOK || len(res.Outputs) != 1 {
			t.Fatalf("record %d: %v %v", i, res.Status, res.Err)
		}
		if o := res.Outputs[0]; string(o.Key) != k || string(o.Value) != want[i] {
			t.Fatalf("record %d: %s=%s, want %s=%s", i, o.Key, o.Value, k, want[i])
		}
	}
	// A value over the bound fails the record, and leaves the count as it was.
	res := guest.Run(abi.Record{Topic: "in", Key: []byte("a"), Headers: []abi.Header{{Key: "count.pad", Value: []byte("70000")}}})
	if res.Status != abi.StatusFail || !errors.Is(res.Err, abi.ErrnoTooLarge) {
		t.Fatalf("oversized: %v %v", res.Status, res.Err)
	}
	if got := string(guest.StateSnapshot()["a"]); got != "3" {
		t.Fatalf("a = %q after a failed record, want 3", got)
	}
}
