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
