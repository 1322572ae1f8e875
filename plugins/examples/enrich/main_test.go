//go:build !wasip1

package main

import (
	"encoding/json"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
)

func TestEnrich(t *testing.T) {
	res := guest.Run(abi.Record{Topic: "orders", Partition: 2, Offset: 7, Attempt: 1, Key: []byte("o-1"), Value: []byte(`{"id":1,"item":"tea"}`)})
	if res.Err != nil || len(res.Outputs) != 1 {
		t.Fatalf("%+v", res)
	}
	var got map[string]any
	if err := json.Unmarshal(res.Outputs[0].Value, &got); err != nil {
		t.Fatal(err)
	}
	src := got["source"].(map[string]any)
	if got["item"] != "tea" || got["enriched"] != true || src["topic"] != "orders" || src["offset"] != float64(7) || src["partition"] != float64(2) || got["attempt"] != float64(1) {
		t.Fatalf("enriched doc: %v", got)
	}
	if string(res.Outputs[0].Key) != "o-1" {
		t.Fatalf("key %q", res.Outputs[0].Key)
	}
}

func TestEnrichOutcomes(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  abi.Status
	}{
		{`not json`, abi.StatusFail},
		{`{"fault":"fail"}`, abi.StatusFail},
		{`{"fault":"retry"}`, abi.StatusRetry},
		{`{"fault":"nonsense"}`, abi.StatusFail},
	} {
		res := guest.Run(abi.Record{Topic: "t", Value: []byte(tc.value)})
		if res.Status != tc.want || res.Err == nil || len(res.Outputs) != 0 {
			t.Fatalf("%s: status %v err %v outputs %d; want %v with an error and no output", tc.value, res.Status, res.Err, len(res.Outputs), tc.want)
		}
	}
}

func TestEnrichTransient(t *testing.T) {
	for attempt, want := range map[uint32]abi.Status{1: abi.StatusRetry, 2: abi.StatusRetry, 3: abi.StatusOK} {
		res := guest.Run(abi.Record{Topic: "t", Attempt: attempt, Value: []byte(`{"fault":"transient","until":3}`)})
		if res.Status != want {
			t.Fatalf("attempt %d: %v (%v)", attempt, res.Status, res.Err)
		}
	}
}
