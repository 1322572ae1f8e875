//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
)

func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		value   string
		headers []abi.Header
		kept    bool
	}{
		{"please keep me", nil, true},
		{"drop me", nil, false},
		{"", nil, false},
		{"x-red-x", []abi.Header{{Key: "match", Value: []byte("red")}}, true},
		{"keep but not blue", []abi.Header{{Key: "match", Value: []byte("blue!")}}, false},
	} {
		res := guest.Run(abi.Record{Topic: "in", Value: []byte(tc.value), Headers: tc.headers})
		if res.Err != nil || res.Status != abi.StatusOK {
			t.Fatalf("%q: status %v err %v", tc.value, res.Status, res.Err)
		}
		if got := len(res.Outputs) == 1; got != tc.kept {
			t.Fatalf("%q: kept = %v, want %v", tc.value, got, tc.kept)
		}
		if tc.kept && string(res.Outputs[0].Value) != tc.value {
			t.Fatalf("%q: value changed to %q", tc.value, res.Outputs[0].Value)
		}
	}
}
