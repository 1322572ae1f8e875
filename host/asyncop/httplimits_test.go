package asyncop

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

// headerServer answers every request with headers of headerBytes bytes in
// all (1 KiB values) and a body of bodyBytes.
func headerServer(headerBytes, bodyBytes int) http.HandlerFunc {
	value := strings.Repeat("v", 1024)
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i*1024 < headerBytes; i++ {
			w.Header().Add(fmt.Sprintf("X-Big-%d", i), value)
		}
		w.Write([]byte(strings.Repeat("b", bodyBytes)))
	}
}

// runHTTPOp performs one OpHTTP request to srvURL with op and returns the
// completion the guest would read.
func runHTTPOp(t *testing.T, op *httpOp, srvURL string) (abi.Completion, []byte) {
	t.Helper()
	req := abi.AppendHTTPRequest(nil, &abi.HTTPRequest{Method: "GET", URL: srvURL + "/big"})
	got := make(chan []byte, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := op.Start(ctx, req, func(res []byte) { got <- res }); err != nil {
		t.Fatal(err)
	}
	var res []byte
	select {
	case res = <-got:
	case <-time.After(40 * time.Second):
		t.Fatal("the operation did not complete")
	}
	c, err := abi.DecodeCompletion(res)
	if err != nil {
		t.Fatal(err)
	}
	return c, res
}

// Response headers count against async.http.max_response_bytes with the
// status line and the body: megabytes of headers never reach a guest, and
// the completion error names the key.
func TestHTTPResponseHeadersCounted(t *testing.T) {
	for _, tc := range []struct {
		name              string
		maxBytes          int64
		headers, body     int
		wantErr, wantPart string
	}{
		{name: "8MiB of headers", maxBytes: 1 << 20, headers: 8 << 20, body: 10,
			wantErr: "async.http.max_response_bytes (1048576", wantPart: "headers"},
		{name: "headers and body together over", maxBytes: 1 << 20, headers: 600 << 10, body: 600 << 10,
			wantErr: "async.http.max_response_bytes (1048576", wantPart: "then a body of more than"},
		{name: "headers alone over a small cap", maxBytes: 64 << 10, headers: 100 << 10, body: 0,
			wantErr: "async.http.max_response_bytes (65536", wantPart: "headers"},
		{name: "within", maxBytes: 1 << 20, headers: 300 << 10, body: 300 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, h2 := range []bool{false, true} {
				srv := httptest.NewUnstartedServer(headerServer(tc.headers, tc.body))
				if h2 {
					srv.EnableHTTP2 = true
					srv.StartTLS()
				} else {
					srv.Start()
				}
				u, _ := url.Parse(srv.URL)
				op := newHTTPOp(HTTP{AllowHosts: []string{u.Host}, MaxResponseBytes: tc.maxBytes}, "")
				if h2 {
					tr := op.client.Transport.(bySchemeTransport).tls
					tr.TLSClientConfig = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
				}
				c, res := runHTTPOp(t, op, srv.URL)
				op.client.CloseIdleConnections()
				srv.Close()
				proto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2]
				if tc.wantErr == "" {
					if c.Code != abi.CompletionOK {
						t.Fatalf("%s: completion %d: %s", proto, c.Code, c.Message)
					}
					r, err := abi.DecodeHTTPResponse(c.Payload)
					if err != nil || len(r.Body) != tc.body {
						t.Fatalf("%s: body of %d bytes, want %d (%v)", proto, len(r.Body), tc.body, err)
					}
					continue
				}
				if c.Code != abi.CompletionError {
					t.Fatalf("%s: completion code %d (%d bytes of result reached the guest), want an error", proto, c.Code, len(res))
				}
				t.Logf("%s: %s", proto, c.Message)
				// An HTTP/2 client drops a connection whose header block is far
				// over its advertised limit: the error cannot say more than that.
				if !strings.Contains(c.Message, tc.wantErr) || (!h2 && !strings.Contains(c.Message, tc.wantPart)) {
					t.Fatalf("%s: error %q lacks %q and %q", proto, c.Message, tc.wantErr, tc.wantPart)
				}
			}
		})
	}
}

// A request's body is the guest's at async_start: the guest may write over
// the memory it passed as soon as async_start returns (its next record
// does), and the service still receives what was asked. Under -race, a
// request that read the guest's memory later is also a data race.
func TestHTTPRequestBodyCopiedAtStart(t *testing.T) {
	received := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		received <- string(b)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	op := newHTTPOp(HTTP{AllowHosts: []string{u.Host}}, "")
	body := []byte(`{"user":7}`)
	// The overwrite comes while the request is still connecting.
	mem := abi.AppendHTTPRequest(nil, &abi.HTTPRequest{Method: "POST", URL: srv.URL + "/users", Body: body})
	done := make(chan []byte, 1)
	if _, err := op.Start(context.Background(), mem, func(res []byte) { done <- res }); err != nil {
		t.Fatal(err)
	}
	for i := range mem {
		mem[i] = 'X' // the guest's next record
	}
	select {
	case got := <-received:
		if got != string(body) {
			t.Fatalf("the service received %q, the guest sent %q", got, body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the service received nothing")
	}
	if c, err := abi.DecodeCompletion(<-done); err != nil || c.Code != abi.CompletionOK {
		t.Fatalf("completion %+v %v", c, err)
	}
}
