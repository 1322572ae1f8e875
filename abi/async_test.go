package abi

import (
	"bytes"
	"testing"
	"time"
)

// The asynchronous codecs read bytes a guest controls (requests) or a server
// shapes (responses): whatever decodes must re-encode to the same bytes, and
// nothing may panic or allocate for lengths the input cannot hold.

func FuzzDecodeHTTPRequest(f *testing.F) {
	f.Add(AppendHTTPRequest(nil, &HTTPRequest{Method: "POST", URL: "http://lookup/users/7",
		Headers: []Header{{Key: "Content-Type", Value: []byte("application/json")}, {Key: "X-Empty"}}, Body: []byte(`{"a":1}`), Timeout: 250 * time.Millisecond}))
	f.Add(AppendHTTPRequest(nil, &HTTPRequest{URL: "http://x/", Timeout: 1 << 32 * time.Millisecond}))
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 24))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeHTTPRequest(b)
		if err != nil {
			return
		}
		if re := AppendHTTPRequest(nil, &r); !bytes.Equal(re, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", re, b)
		}
	})
}

func FuzzDecodeHTTPResponse(f *testing.F) {
	f.Add(AppendHTTPResponse(nil, &HTTPResponse{Status: 200, Headers: []Header{{Key: "Content-Length", Value: []byte("2")}}, Body: []byte("ok")}))
	f.Add(AppendHTTPResponse(nil, &HTTPResponse{Status: -1}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeHTTPResponse(b)
		if err != nil {
			return
		}
		if re := AppendHTTPResponse(nil, &r); !bytes.Equal(re, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", re, b)
		}
	})
}

func FuzzDecodeCompletion(f *testing.F) {
	f.Add(AppendCompletionOK(nil, AppendHTTPResponse(nil, &HTTPResponse{Status: 204})))
	f.Add(AppendCompletionError(nil, CompletionError, "http: timed out"))
	f.Add(AppendCompletionError(nil, CompletionCanceled, ""))
	f.Add(AppendCompletionError(nil, CompletionRefused, "host not allowed"))
	f.Add([]byte{9})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCompletion(b)
		if err != nil {
			return
		}
		var re []byte
		if c.Code == CompletionOK {
			re = AppendCompletionOK(nil, c.Payload)
		} else {
			re = AppendCompletionError(nil, c.Code, c.Message)
		}
		if !bytes.Equal(re, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", re, b)
		}
	})
}

func FuzzDecodeTimer(f *testing.F) {
	f.Add(AppendTimer(nil, 50*time.Millisecond))
	f.Add(AppendTimer(nil, 1<<62))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := DecodeTimer(b)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("negative timer %s", d)
		}
		if re := AppendTimer(nil, d); !bytes.Equal(re, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", re, b)
		}
	})
}

// A guest's timeout reaches the host unchanged up to the largest the
// encoding holds.
func TestHTTPRequestTimeoutRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{0, time.Millisecond, 1 << 31 * time.Millisecond, (1<<32 - 1) * time.Millisecond} {
		r, err := DecodeHTTPRequest(AppendHTTPRequest(nil, &HTTPRequest{Timeout: d}))
		if err != nil || r.Timeout != d {
			t.Fatalf("timeout %s came back as %s (%v)", d, r.Timeout, err)
		}
	}
}

// The state operations' encodings, byte for byte (ABI.md §7.3), and their
// round trips.
func TestStateOpEncodings(t *testing.T) {
	if got, want := AppendStateGet(nil, []byte("k")), []byte{1, 0, 0, 0, 'k'}; !bytes.Equal(got, want) {
		t.Fatalf("get request % x, want % x", got, want)
	}
	if k, err := DecodeStateGet([]byte{1, 0, 0, 0, 'k'}); err != nil || string(k) != "k" {
		t.Fatalf("get request: %q %v", k, err)
	}
	for _, bad := range [][]byte{{}, {2, 0, 0, 0, 'k'}, {1, 0, 0, 0, 'k', 0}} {
		if _, err := DecodeStateGet(bad); err == nil {
			t.Errorf("get request % x decoded", bad)
		}
	}
	for _, tc := range []struct {
		v     []byte
		found bool
		enc   []byte
	}{
		{nil, false, []byte{0xff, 0xff, 0xff, 0xff}},
		{[]byte{}, true, []byte{0, 0, 0, 0}},
		{[]byte("12"), true, []byte{2, 0, 0, 0, '1', '2'}},
	} {
		if got := AppendStateGetResult(nil, tc.v); !bytes.Equal(got, tc.enc) {
			t.Errorf("get result %q: % x, want % x", tc.v, got, tc.enc)
		}
		v, found, err := DecodeStateGetResult(tc.enc)
		if err != nil || found != tc.found || !bytes.Equal(v, tc.v) {
			t.Errorf("get result % x: %q %v %v", tc.enc, v, found, err)
		}
	}
	r := StateScanRequest{Prefix: []byte("p/"), After: []byte("p/3"), MaxBytes: 100}
	enc := AppendStateScan(nil, &r)
	if want := []byte{2, 0, 0, 0, 'p', '/', 3, 0, 0, 0, 'p', '/', '3', 100, 0, 0, 0}; !bytes.Equal(enc, want) {
		t.Fatalf("scan request % x, want % x", enc, want)
	}
	got, err := DecodeStateScan(enc)
	if err != nil || string(got.Prefix) != "p/" || string(got.After) != "p/3" || got.MaxBytes != 100 {
		t.Fatalf("scan request: %+v %v", got, err)
	}
	if _, err := DecodeStateScan(enc[:len(enc)-1]); err == nil {
		t.Fatal("a truncated scan request decoded")
	}
	for mb, want := range map[uint32]int{0: StateScanDefaultBytes, 1: 1, StateScanMaxBytes: StateScanMaxBytes, StateScanMaxBytes + 1: StateScanMaxBytes} {
		if got := (&StateScanRequest{MaxBytes: mb}).Limit(); got != want {
			t.Errorf("max_bytes %d: limit %d, want %d", mb, got, want)
		}
	}
}

// TestAppendHTTPResponseOfIsAppendHTTPResponse: a response encoded from
// net/http's header map decodes to the same status, body and headers (one
// Header a value) as one encoded from an HTTPResponse, and with one header
// name is the same bytes.
func TestAppendHTTPResponseOfIsAppendHTTPResponse(t *testing.T) {
	one := map[string][]string{"Set-Cookie": {"a=1", "b=2"}}
	want := AppendHTTPResponse(nil, &HTTPResponse{Status: 201, Body: []byte("ok"),
		Headers: []Header{{Key: "Set-Cookie", Value: []byte("a=1")}, {Key: "Set-Cookie", Value: []byte("b=2")}}})
	if got := AppendHTTPResponseOf(nil, 201, one, []byte("ok")); !bytes.Equal(got, want) {
		t.Fatalf("one header name:\n got %x\nwant %x", got, want)
	}
	many := map[string][]string{"Content-Type": {"application/json"}, "Date": {"today"}, "X-Empty": {""}, "X-None": {}}
	r, err := DecodeHTTPResponse(AppendHTTPResponseOf(nil, 404, many, []byte{}))
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 404 || r.Body == nil || len(r.Body) != 0 || len(r.Headers) != 3 {
		t.Fatalf("decoded %+v", r)
	}
	for _, h := range r.Headers {
		if vs := many[h.Key]; len(vs) != 1 || vs[0] != string(h.Value) {
			t.Errorf("header %s=%q, sent %q", h.Key, h.Value, vs)
		}
	}
}

// TestDecodeHTTPResponseInto: a response decoded into the array of the
// headers given, the common names without an allocation (the Go SDK's
// decoded response is one allocation, its headers included), any other
// name as itself; the same response as DecodeHTTPResponse.
func TestDecodeHTTPResponseInto(t *testing.T) {
	common := AppendHTTPResponse(nil, &HTTPResponse{Status: 200, Body: []byte(`{"id":"k"}`), Headers: []Header{
		{Key: "Content-Type", Value: []byte("application/json")}, {Key: "Date", Value: []byte("Sat, 05 Dec 2026 05:00:00 GMT")},
		{Key: "Content-Length", Value: []byte("10")}, {Key: "Etag", Value: []byte(`"x"`)}}})
	other := AppendHTTPResponse(nil, &HTTPResponse{Status: 404, Headers: []Header{{Key: "X-Served-By", Value: []byte("cache-1")}}})
	hs := make([]Header, 0, 8)
	for _, c := range []struct {
		b      []byte
		allocs float64
	}{{common, 0}, {other, 1}} {
		want, err := DecodeHTTPResponse(c.b)
		if err != nil {
			t.Fatal(err)
		}
		var r HTTPResponse
		if n := testing.AllocsPerRun(100, func() {
			r = HTTPResponse{Headers: hs}
			if err := DecodeHTTPResponseInto(c.b, &r); err != nil {
				t.Fatal(err)
			}
		}); n != c.allocs {
			t.Errorf("decoding %d headers (%s…): %.0f allocations, want %.0f", len(want.Headers), want.Headers[0].Key, n, c.allocs)
		}
		if !bytes.Equal(AppendHTTPResponse(nil, &r), AppendHTTPResponse(nil, &want)) || &r.Headers[0] != &hs[:1][0] {
			t.Errorf("decoded into the array given: %+v, want %+v", r, want)
		}
	}
}
