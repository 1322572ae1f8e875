package asyncop

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

// connCountingServer serves handler and counts the connections clients
// opened to it.
func connCountingServer(t *testing.T, handler http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// startGET starts a GET of u with op and returns where its completion comes.
func startGET(t *testing.T, op *httpOp, u string) <-chan []byte {
	t.Helper()
	got := make(chan []byte, 1)
	req := abi.AppendHTTPRequest(nil, &abi.HTTPRequest{Method: "GET", URL: u})
	if _, err := op.Start(context.Background(), req, func(res []byte) { got <- res }); err != nil {
		t.Fatal(err)
	}
	return got
}

func okBody(t *testing.T, res []byte) []byte {
	t.Helper()
	c, err := abi.DecodeCompletion(res)
	if err != nil || c.Code != abi.CompletionOK {
		t.Fatalf("completion %+v %v", c, err)
	}
	r, err := abi.DecodeHTTPResponse(c.Payload)
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("response %+v %v", r, err)
	}
	return r.Body
}

// Lookups to one service reuse the pipeline's connections: sequential ones
// one connection, L concurrent ones at most L, round after round (none is
// closed for want of room among the idle ones and dialled again).
func TestHTTPConnectionsReused(t *testing.T) {
	var release chan struct{}
	var mu sync.Mutex
	srv, conns := connCountingServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		wait := release
		mu.Unlock()
		if wait != nil {
			<-wait
		}
		w.Write([]byte(`{"id":"` + strings.TrimPrefix(r.URL.Path, "/users/") + `"}`))
	})
	op := newHTTPOp(HTTP{AllowHosts: []string{strings.TrimPrefix(srv.URL, "http://")}}, "")
	for i := 0; i < 50; i++ {
		if b := okBody(t, <-startGET(t, op, srv.URL+"/users/"+strconv.Itoa(i))); string(b) != `{"id":"`+strconv.Itoa(i)+`"}` {
			t.Fatalf("body %q", b)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("50 sequential lookups opened %d connections, want 1", n)
	}

	const L = 64
	for round := 0; round < 3; round++ {
		mu.Lock()
		release = make(chan struct{})
		mu.Unlock()
		var dones []<-chan []byte
		for i := 0; i < L; i++ {
			dones = append(dones, startGET(t, op, srv.URL+"/users/c"+strconv.Itoa(i)))
		}
		// Every request is at the service (or on its way) before any answers.
		time.Sleep(50 * time.Millisecond)
		mu.Lock()
		close(release)
		release = nil
		mu.Unlock()
		for _, d := range dones {
			okBody(t, <-d)
		}
	}
	if n := conns.Load(); n > L+1 {
		t.Fatalf("3 rounds of %d concurrent lookups opened %d connections, want at most %d", L, n, L+1)
	}
	t.Logf("connections: %d", conns.Load())
}

// A response body reaches the guest whole up to the cap, whether the
// service sends a Content-Length or chunks, and one byte more than the cap
// allows is an error.
func TestHTTPResponseBodySizes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		body := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
		if r.URL.Query().Get("chunked") != "" {
			w.Header().Set("Content-Type", "text/plain")
			half := n / 2
			w.Write(body[:half])
			w.(http.Flusher).Flush()
			w.Write(body[half:])
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(body)
	}))
	defer srv.Close()
	const max = 64 << 10
	op := newHTTPOp(HTTP{AllowHosts: []string{strings.TrimPrefix(srv.URL, "http://")}, MaxResponseBytes: max}, "")
	for _, chunked := range []string{"", "1"} {
		for _, n := range []int{0, 1, 511, 512, 513, 4096, 40000, 60000} {
			u := srv.URL + "/?n=" + strconv.Itoa(n) + "&chunked=" + chunked
			got := okBody(t, <-startGET(t, op, u))
			want := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
			if !bytes.Equal(got, want) || got == nil {
				t.Fatalf("chunked=%q n=%d: body of %d bytes (nil %v), want %d", chunked, n, len(got), got == nil, n)
			}
		}
		// Past the cap with the headers: an error naming the key.
		c, err := abi.DecodeCompletion(<-startGET(t, op, srv.URL+"/?n="+strconv.Itoa(max)+"&chunked="+chunked))
		if err != nil || c.Code != abi.CompletionError || !strings.Contains(c.Message, "then a body of more than") {
			t.Fatalf("chunked=%q: over the cap: %+v %v", chunked, c, err)
		}
	}
}

// Redirects are followed as net/http's client follows them, within the
// allow list, five at most (ABI.md): a 302 and a 303 become a GET without a body, a
// 307 keeps its method and body, a host off the list is refused, a sixth
// redirect is an error.
func TestHTTPRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/echo":
			b, _ := io.ReadAll(r.Body)
			fmt.Fprintf(w, "%s %s", r.Method, b)
		case strings.HasPrefix(r.URL.Path, "/to/"):
			code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/to/"))
			w.Header().Set("Location", "/echo")
			w.WriteHeader(code)
		case strings.HasPrefix(r.URL.Path, "/hop/"):
			n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hop/"))
			if n == 0 {
				fmt.Fprint(w, "arrived")
				return
			}
			http.Redirect(w, r, "/hop/"+strconv.Itoa(n-1), http.StatusFound)
		case r.URL.Path == "/away":
			http.Redirect(w, r, "http://elsewhere.invalid/echo", http.StatusFound)
		}
	}))
	defer srv.Close()
	op := newHTTPOp(HTTP{AllowHosts: []string{strings.TrimPrefix(srv.URL, "http://")}}, "")
	call := func(method, path, body string) abi.Completion {
		got := make(chan []byte, 1)
		req := abi.AppendHTTPRequest(nil, &abi.HTTPRequest{Method: method, URL: srv.URL + path, Body: []byte(body)})
		if _, err := op.Start(context.Background(), req, func(res []byte) { got <- res }); err != nil {
			t.Fatal(err)
		}
		c, err := abi.DecodeCompletion(<-got)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	body := func(c abi.Completion) string {
		t.Helper()
		if c.Code != abi.CompletionOK {
			t.Fatalf("completion %d: %s", c.Code, c.Message)
		}
		r, err := abi.DecodeHTTPResponse(c.Payload)
		if err != nil || r.Status != http.StatusOK {
			t.Fatalf("response %+v %v", r, err)
		}
		return string(r.Body)
	}
	for _, tc := range []struct{ method, path, body, want string }{
		{"GET", "/to/302", "", "GET "},
		{"POST", "/to/302", "x", "GET "},
		{"POST", "/to/303", "x", "GET "},
		{"POST", "/to/307", "kept", "POST kept"},
		{"PUT", "/to/308", "kept", "PUT kept"},
		{"GET", "/hop/5", "", "arrived"},
	} {
		if got := body(call(tc.method, tc.path, tc.body)); got != tc.want {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.path, got, tc.want)
		}
	}
	if c := call("GET", "/hop/6", ""); c.Code != abi.CompletionError || !strings.Contains(c.Message, "stopped after 5 redirects") {
		t.Errorf("six hops: %d %q", c.Code, c.Message)
	}
	if c := call("GET", "/away", ""); c.Code != abi.CompletionError || !strings.Contains(c.Message, "elsewhere.invalid:80 is not allowed") {
		t.Errorf("off the list: %d %q", c.Code, c.Message)
	}
}

// A URL's user and password reach the service as Basic authentication, as
// net/http's client sends them.
func TestHTTPURLUserIsBasicAuth(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		fmt.Fprintf(w, "%v %s %s", ok, u, p)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	op := newHTTPOp(HTTP{AllowHosts: []string{host}}, "")
	if b := okBody(t, <-startGET(t, op, "http://ann:s3cret@"+host+"/")); string(b) != "true ann s3cret" {
		t.Fatalf("with a user in the URL the service saw %q", b)
	}
	if b := okBody(t, <-startGET(t, op, srv.URL+"/")); string(b) != "false  " {
		t.Fatalf("without one the service saw %q", b)
	}
}
