//go:build !wasip1

package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
)

func TestCountAsync(t *testing.T) {
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
	// The record's own write before the read: the read sees it.
	if res := guest.Run(abi.Record{Topic: "in", Key: []byte("b"), Headers: []abi.Header{{Key: "count.set", Value: []byte("41")}}}); res.Status != abi.StatusOK || string(res.Outputs[0].Value) != "42" {
		t.Fatalf("set: %v %v %v", res.Status, res.Err, res.Outputs)
	}
	// An abandoned read: decided at once, nothing written.
	if res := guest.Run(abi.Record{Topic: "in", Key: []byte("a"), Headers: []abi.Header{{Key: "count.abandon"}}}); res.Status != abi.StatusOK || len(res.Outputs) != 0 {
		t.Fatalf("abandon: %v %v %v", res.Status, res.Err, res.Outputs)
	}
	// A key over the bound: Await fails at once, terminally.
	res := guest.Run(abi.Record{Topic: "in", Key: []byte(strings.Repeat("k", abi.MaxStateKeyBytes+1))})
	if res.Status != abi.StatusFail || !errors.Is(res.Err, abi.ErrnoTooLarge) {
		t.Fatalf("long key: %v %v", res.Status, res.Err)
	}
	if got := string(guest.StateSnapshot()["a"]); got != "3" {
		t.Fatalf("a = %q, want 3", got)
	}
	// count.retry: the first attempt fails retryably, its write with it
	// (guest.Run drops it); the second counts from the same state.
	retry := abi.Record{Topic: "in", Key: []byte("a"), Headers: []abi.Header{{Key: "count.retry"}}}
	if res := guest.Run(retry); res.Status != abi.StatusRetry {
		t.Fatalf("retry, attempt 1: %v %v %v", res.Status, res.Err, res.Outputs)
	}
	retry.Attempt = 2
	if res := guest.Run(retry); res.Status != abi.StatusOK || string(res.Outputs[0].Value) != "4" {
		t.Fatalf("retry, attempt 2: %v %v %v", res.Status, res.Err, res.Outputs)
	}
	// count.sync counts in the record's call, from the same state.
	if res := guest.Run(abi.Record{Topic: "in", Key: []byte("a"), Headers: []abi.Header{{Key: "count.sync"}}}); res.Status != abi.StatusOK || string(res.Outputs[0].Value) != "5" {
		t.Fatalf("sync: %v %v %v", res.Status, res.Err, res.Outputs)
	}
}

// A scan in small batches: several operations, every key once, in order,
// the record's own write included.
func TestCountAsyncScan(t *testing.T) {
	guest.ResetState()
	for i := 0; i < 20; i++ {
		if res := guest.Run(abi.Record{Topic: "in", Key: []byte(fmt.Sprintf("s/%02d", i))}); res.Status != abi.StatusOK {
			t.Fatal(res.Err)
		}
	}
	res := guest.Run(abi.Record{Topic: "in", Key: []byte("s/"), Headers: []abi.Header{
		{Key: "count.scan", Value: []byte("s/")}, {Key: "count.scanbytes", Value: []byte("30")}}})
	if res.Status != abi.StatusOK || len(res.Outputs) != 22 {
		t.Fatalf("scan: %v %v, %d outputs, want 22", res.Status, res.Err, len(res.Outputs))
	}
	if o := res.Outputs[1]; string(o.Key) != "s/" || string(o.Value) != "1" {
		t.Fatalf("first entry %s=%s, want the record's own write s/=1", o.Key, o.Value)
	}
	for i := 2; i < len(res.Outputs); i++ {
		if o := res.Outputs[i]; string(o.Key) != fmt.Sprintf("s/%02d", i-2) || string(o.Value) != "1" {
			t.Fatalf("entry %d: %s=%s", i, o.Key, o.Value)
		}
	}
}
