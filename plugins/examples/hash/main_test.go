//go:build !wasip1

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
)

func TestHash(t *testing.T) {
	res := guest.Run(abi.Record{Topic: "t", Partition: 1, Offset: 9, Key: []byte("k"), Value: []byte("abc"),
		Headers: []abi.Header{{Key: "rounds", Value: []byte("2")}}})
	if res.Err != nil || len(res.Outputs) != 1 {
		t.Fatalf("%+v", res)
	}
	var got struct {
		Partition, Offset, Rounds int
		SHA256                    string
	}
	if err := json.Unmarshal(res.Outputs[0].Value, &got); err != nil {
		t.Fatal(err)
	}
	s1 := sha256.Sum256([]byte("abc"))
	s2 := sha256.Sum256(s1[:])
	if got.SHA256 != hex.EncodeToString(s2[:]) || got.Offset != 9 || got.Partition != 1 || got.Rounds != 2 {
		t.Fatalf("%+v", got)
	}
	if res := guest.Run(abi.Record{Topic: "t", Headers: []abi.Header{{Key: "rounds", Value: []byte("many")}}}); res.Status != abi.StatusFail {
		t.Fatalf("bad rounds: %v", res.Status)
	}
}
