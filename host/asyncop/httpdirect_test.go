package asyncop

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
)

// seenRequest is what a server read of a request.
type seenRequest struct {
	method, uri, host string
	header            http.Header
	body              string
	length            int64
	te                []string
}

// A request the direct way writes reaches the server as the one net/http's
// way (http.NewRequest, http1's writeRequest) writes: the same method,
// request URI, host, headers and body. Each request is checked to take the
// direct way, and its answer to decode as the other's.
func TestHTTPDirectRequestSameAsNetHTTP(t *testing.T) {
	var mu sync.Mutex
	var seen []seenRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, seenRequest{r.Method, r.RequestURI, r.Host, r.Header.Clone(), string(body), r.ContentLength, r.TransferEncoding})
		mu.Unlock()
		w.Header().Set("X-Echo", r.URL.Path)
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		fmt.Fprintf(w, "%s %s", r.Method, r.URL.RequestURI())
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	op := newHTTPOp(HTTP{AllowHosts: []string{strings.ToUpper("localhost"), host}}, "")
	defer op.CloseIdleConnections()
	h := func(kv ...string) []abi.Header {
		var hs []abi.Header
		for i := 0; i < len(kv); i += 2 {
			hs = append(hs, abi.Header{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return hs
	}
	for i, req := range []abi.HTTPRequest{
		{URL: srv.URL + "/users/k-1", Headers: h("Idempotency-Key", "in/0/1/1")},
		{Method: "GET", URL: srv.URL + "/a/%2F/b!$&'()*+,;=:@~x?q=1&r=%20&s=/?", Headers: h("x-trace-id", "t", "content-TYPE", "a/b", "X-Many", "1", "x-many", "2")},
		{URL: srv.URL, Headers: h("User-Agent", "lookup/1", "user-agent", "second")},
		{URL: srv.URL + "?only=query", Headers: h("User-Agent", "")},
		{URL: srv.URL + "/p?", Headers: h("Host", "other.example", "Content-Length", "99", "Transfer-Encoding", "chunked", "Trailer", "X")},
		{Method: "POST", URL: srv.URL + "/post", Body: []byte(`{"k":1}`), Headers: h("Content-Type", "application/json")},
		{Method: "PUT", URL: srv.URL + "/put"},
		{Method: "PATCH", URL: srv.URL + "/patch", Body: []byte{}},
		{Method: "DELETE", URL: srv.URL + "/delete", Headers: h("Connection", "keep-alive, Close")},
		{Method: "post", URL: strings.Replace(srv.URL, "127.0.0.1", "127.0.0.1", 1) + "/lower", Body: []byte("x"), Headers: h("Tab", "a\tb", "Empty", "")},
	} {
		raw := abi.AppendHTTPRequest(nil, &req)
		// The direct way.
		v, err := abi.DecodeHTTPRequestView(raw)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan []byte, 1)
		if _, ok := op.direct(context.Background(), &v, raw, func(res []byte) { got <- res }); !ok {
			t.Fatalf("request %d (%s %s): not on the direct way", i, req.Method, req.URL)
		}
		direct := <-got
		// net/http's way.
		hr, err := op.newRequest(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		other := op.do(context.Background(), hr, op.cfg.Timeout)
		mu.Lock()
		if len(seen) != 2*(i+1) {
			t.Fatalf("request %d: the server saw %d requests, want %d: direct %q, net/http's %q", i, len(seen), 2*(i+1), direct, other)
		}
		a, b := seen[2*i], seen[2*i+1]
		mu.Unlock()
		if a.method != b.method || a.uri != b.uri || a.host != b.host || a.body != b.body || a.length != b.length ||
			!slices.Equal(a.te, b.te) || !maps.EqualFunc(a.header, b.header, slices.Equal) {
			t.Errorf("request %d: direct %+v\nnet/http %+v", i, a, b)
		}
		ra, rb := decodeOK(t, direct), decodeOK(t, other)
		if ra.Status != rb.Status || string(ra.Body) != string(rb.Body) || !maps.EqualFunc(headerMap(ra.Headers), headerMap(rb.Headers), slices.Equal) {
			t.Errorf("request %d: direct answer %d %q %q\nnet/http's %d %q %q", i, ra.Status, ra.Headers, ra.Body, rb.Status, rb.Headers, rb.Body)
		}
	}
}

// Requests the direct way leaves to net/http's: an https URL, a user, a
// fragment, a bracketed or escaped host, a path or query it would not
// write as given, a HEAD, a name that is not a token, a value with a
// control character, a body over the bound, a host not allowed (net/http's
// way refuses it, saying why).
func TestHTTPDirectLeavesTheRest(t *testing.T) {
	op := newHTTPOp(HTTP{AllowHosts: []string{"h.test", "[::1]"}, MaxRequestBytes: 4}, "")
	for _, req := range []abi.HTTPRequest{
		{URL: "https://h.test/"},
		{URL: "HTTP://h.test/"},
		{URL: "http://u:p@h.test/"},
		{URL: "http://h.test/#frag"},
		{URL: "http://[::1]/"},
		{URL: "http://h%2etest/"},
		{URL: "http://h.test:/"},
		{URL: "http://h.test:123456/"},
		{URL: "http://h.test/a b"},
		{URL: "http://h.test/%zz"},
		{URL: "http://h.test/ü"},
		{URL: "http://h.test/?a b"},
		{URL: "http://h.test/\x7f"},
		{Method: "HEAD", URL: "http://h.test/"},
		{Method: "CONNECT", URL: "http://h.test/"},
		{Method: "G T", URL: "http://h.test/"},
		{URL: "http://h.test/", Headers: []abi.Header{{Key: "Bad Name", Value: []byte("1")}}},
		{URL: "http://h.test/", Headers: []abi.Header{{Key: "X", Value: []byte("a\r\nInjected: 1")}}},
		{Method: "POST", URL: "http://h.test/", Body: []byte("12345")},
		{URL: "http://other.test/"},
	} {
		raw := abi.AppendHTTPRequest(nil, &req)
		v, err := abi.DecodeHTTPRequestView(raw)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := op.direct(context.Background(), &v, raw, func([]byte) { t.Errorf("%s %q: completed on the direct way", req.Method, req.URL) }); ok {
			t.Errorf("%s %q: taken on the direct way", req.Method, req.URL)
		}
	}
}

func decodeOK(t *testing.T, res []byte) abi.HTTPResponse {
	t.Helper()
	c, err := abi.DecodeCompletion(res)
	if err != nil || c.Code != abi.CompletionOK {
		t.Fatalf("completion %+v %v", c, err)
	}
	r, err := abi.DecodeHTTPResponse(c.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func headerMap(hs []abi.Header) http.Header {
	m := http.Header{}
	for _, h := range hs {
		m[h.Key] = append(m[h.Key], string(h.Value))
	}
	return m
}

// What parsePlainURL reads, net/url reads the same way: the same host and
// port, and a request URI that is the URL's path and query as written.
func FuzzPlainURL(f *testing.F) {
	for _, s := range []string{"http://h.test:8080/users/k-1?x=1", "http://H.test", "http://h.test?q", "http://h/a/%2F/b!$&'()*+,;=:@~x?q=1&r=%20&s=/?",
		"http://h/%zz", "http://[::1]:80/", "http://u@h/", "http://h/#f", "http://h:/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, ok := parsePlainURL([]byte(s))
		if !ok {
			return
		}
		pu, err := url.Parse(s)
		if err != nil {
			t.Fatalf("%q: read directly, net/url refuses it: %v", s, err)
		}
		uri := string(u.path)
		if uri == "" || uri[0] == '?' {
			uri = "/" + uri
		}
		if pu.Scheme != "http" || pu.User != nil || pu.Fragment != "" || pu.Opaque != "" || pu.Host != string(u.hostport) ||
			pu.Hostname() != string(u.host) || pu.Port() != string(u.port) || pu.RequestURI() != uri {
			t.Fatalf("%q: direct host %q port %q uri %q; net/url %q %q %q (%#v)", s, u.host, u.port, uri, pu.Hostname(), pu.Port(), pu.RequestURI(), pu)
		}
	})
}
