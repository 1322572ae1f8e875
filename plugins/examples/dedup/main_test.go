//go:build !wasip1

package main

import (
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
)

func TestDedup(t *testing.T) {
	guest.ResetState()
	var kept []string
	for _, k := range []string{"x", "y", "x", "z", "y", "x"} {
		res := guest.Run(abi.Record{Topic: "in", Key: []byte(k), Value: []byte("v-" + k)})
		if res.Status != abi.StatusOK {
			t.Fatalf("%s: %v %v", k, res.Status, res.Err)
		}
		for _, o := range res.Outputs {
			kept = append(kept, string(o.Key))
		}
	}
	if got := len(kept); got != 3 || kept[0] != "x" || kept[1] != "y" || kept[2] != "z" {
		t.Fatalf("kept %q, want [x y z]", kept)
	}
}
