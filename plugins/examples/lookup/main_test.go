//go:build !wasip1

package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
)

func TestLookup(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch id := strings.TrimPrefix(r.URL.Path, "/users/"); id {
		case "7":
			w.Write([]byte(`{"name":"Ada"}`))
		case "down":
			w.WriteHeader(503)
		case "bad":
			w.WriteHeader(400)
		default:
			w.WriteHeader(404)
		}
	}))
	defer srv.Close()
	t.Setenv("LOOKUP_URL", srv.URL+"/users/")

	res := guest.Run(abi.Record{Topic: "t", Key: []byte("7"), Value: []byte(`{"order":1}`)})
	if res.Err != nil || len(res.Outputs) != 1 {
		t.Fatalf("%+v", res)
	}
	var got map[string]any
	if err := json.Unmarshal(res.Outputs[0].Value, &got); err != nil {
		t.Fatal(err)
	}
	if got["key"] != "7" || got["lookup"].(map[string]any)["name"] != "Ada" || got["record"].(map[string]any)["order"] != float64(1) {
		t.Fatalf("output %v", got)
	}

	res = guest.Run(abi.Record{Topic: "t", Key: []byte("nobody"), Value: []byte(`x`)})
	if res.Err != nil || len(res.Outputs) != 1 || !strings.Contains(string(res.Outputs[0].Value), `"lookup":null`) {
		t.Fatalf("404: %+v", res)
	}
	for key, want := range map[string]abi.Status{"down": abi.StatusRetry, "bad": abi.StatusFail} {
		if res := guest.Run(abi.Record{Topic: "t", Key: []byte(key)}); res.Status != want || len(res.Outputs) != 0 {
			t.Fatalf("%s: %+v, want %s", key, res, want)
		}
	}
	if res := guest.Run(abi.Record{Topic: "t", Key: []byte("7"), Headers: []abi.Header{{Key: "lookup.mode", Value: []byte("chain")}}}); res.Err != nil || len(res.Outputs) != 1 {
		t.Fatalf("chain: %+v", res)
	}
	if res := guest.Run(abi.Record{Topic: "t", Key: []byte("7"), Headers: []abi.Header{{Key: "lookup.mode", Value: []byte("local")}}}); res.Err != nil || len(res.Outputs) != 1 || !strings.Contains(string(res.Outputs[0].Value), `"lookup":null`) {
		t.Fatalf("local: %+v", res)
	}
	if res := guest.Run(abi.Record{Topic: "t", Key: []byte("7"), Headers: []abi.Header{{Key: "lookup.mode", Value: []byte("pending")}}}); res.Status != abi.StatusFail {
		t.Fatalf("pending without an operation: %+v", res)
	}
}

// The output is built by appending; it must be JSON for any key and value.
func FuzzResult(f *testing.F) {
	for _, s := range []string{"", "plain", `q"uo\te`, "\n\r\t\x00\x1f<>&", "\xff\xfe", "é€😀", "\u2028\u2029", "a\xc3"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		v := appendResult(nil, &guest.Record{Key: s, Value: s, Attempt: 3}, s)
		if !json.Valid(v) {
			t.Fatalf("result is not JSON: %s", v)
		}
	})
}
