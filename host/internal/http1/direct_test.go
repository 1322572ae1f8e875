package http1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"
)

// directHeads are answers parseDirectHead reads (true) or leaves to
// net/http (false).
var directHeads = []struct {
	head   string
	direct bool
}{
	{"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Sun, 06 Dec 2026 09:00:00 GMT\r\nContent-Length: 15\r\n\r\n", true},
	{"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nx-request-ID:  a b \t\r\n\r\n", true},
	{"HTTP/1.1 200\r\nContent-Length: 3\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n", true},
	{"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", true},
	{"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nX-Bin: \x80\xff\r\n\r\n", true},
	{"HTTP/1.1 200 OK\r\nEmpty:\r\nContent-Length: 1\r\n\r\n", true},
	// net/http's
	{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", false},
	{"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n", false}, // to the connection's end
	{"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n", false},
	{"HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 1\r\n\r\n", false},
	{"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", false},
	{"HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\n", false},
	{"HTTP/1.1 302 Found\r\nLocation: /x\r\nContent-Length: 0\r\n\r\n", false},
	{"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false},
	{"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", false},
	{"HTTP/1.1 200 OK\r\nA: 1\r\n folded\r\nContent-Length: 1\r\n\r\n", false},
	{"HTTP/1.1 200 OK\nContent-Length: 1\n\n", false},
	{"HTTP/1.1 200 OK\r\nBad Name: 1\r\nContent-Length: 1\r\n\r\n", false},
	{"HTTP/1.1 200 OK\r\nA: \x01\r\nContent-Length: 1\r\n\r\n", false},
	{"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n", false}, // not whole
	{"HTTP/1.1 2000 OK\r\nContent-Length: 1\r\n\r\n", false},
	{"HTTP/1.1 200OK\r\nContent-Length: 1\r\n\r\n", false},
}

// What parseDirectHead reads it reads as net/http does: the same status,
// headers (by name, values in order), status line and header size,
// Content-Length and end of the head, and a connection kept. Anything it
// does not read, net/http reads.
func TestDirectHeadSameAsNetHTTP(t *testing.T) {
	for _, c := range directHeads {
		if got := checkDirectHead(t, []byte(c.head+"0123456789abcdef")); got != c.direct {
			t.Errorf("%q: direct %v, want %v", c.head, got, c.direct)
		}
	}
}

func FuzzDirectHead(f *testing.F) {
	for _, c := range directHeads {
		f.Add([]byte(c.head + "body"))
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkDirectHead(t, in) })
}

// checkDirectHead parses in with parseDirectHead and, when it reads it,
// compares with net/http's reading of the same bytes.
func checkDirectHead(t *testing.T, in []byte) bool {
	var h Head
	if !parseDirectHead(bytes.Clone(in), &h) {
		return false
	}
	br := bufio.NewReader(bytes.NewReader(in))
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatalf("%q: read directly, net/http refuses it: %v", in, err)
	}
	if resp.StatusCode != h.Status || resp.ContentLength != h.ContentLength || resp.Close || resp.TransferEncoding != nil {
		t.Fatalf("%q: direct status %d length %d; net/http %d, %d, close %v, %v", in, h.Status, h.ContentLength, resp.StatusCode, resp.ContentLength, resp.Close, resp.TransferEncoding)
	}
	got := http.Header{}
	for i := range h.Len() {
		name, value := h.Field(i)
		got[string(name)] = append(got[string(name)], string(value))
	}
	if !maps.EqualFunc(got, resp.Header, slices.Equal) {
		t.Fatalf("%q: direct headers %q, net/http %q", in, got, resp.Header)
	}
	size := int64(len(resp.Proto) + 1 + len(resp.Status))
	for k, vs := range resp.Header {
		for _, v := range vs {
			size += int64(len(k) + len(v))
		}
	}
	if size != h.Size {
		t.Fatalf("%q: direct size %d, net/http %d", in, h.Size, size)
	}
	if rest := br.Buffered(); len(in)-rest != len(h.raw) {
		t.Fatalf("%q: direct head %d bytes, net/http read %d", in, len(h.raw), len(in)-rest)
	}
	return true
}

// A lookup on the direct way: the request's bytes as written, the answer
// read into a Head, its body to the end, and the connection kept for the
// next, on which a chunked answer is read by net/http.
func TestDoDirectAndNetHTTPAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	answers := []string{
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nworld\r\n0\r\n\r\n",
		"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
	}
	served := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for _, a := range answers {
			req, err := http.ReadRequest(br)
			if err != nil {
				served <- err
				return
			}
			io.Copy(io.Discard, req.Body)
			if req.Header.Get("X-K") != "v" {
				served <- io.ErrUnexpectedEOF
				return
			}
			c.Write([]byte(a))
		}
		served <- nil
	}()
	c := &Client{Dial: (&net.Dialer{}).DialContext, MaxIdlePerHost: 4, IdleTimeout: time.Minute, MaxHeaderBytes: 1 << 20}
	defer c.CloseIdleConnections()
	addr := ln.Addr().String()
	req := &Request{Addr: addr, Method: "GET", Replayable: true, Deadline: time.Now().Add(10 * time.Second),
		Wire: []byte("GET /x HTTP/1.1\r\nHost: " + addr + "\r\nX-K: v\r\n\r\n")}
	var h Head
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i, want := range []string{"hello", "world", ""} {
		resp, err := c.Do(ctx, req, &h)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		var body []byte
		if i == 1 {
			if resp == nil {
				t.Fatal("a chunked answer read directly")
			}
			body, err = io.ReadAll(resp.Body)
		} else {
			if resp != nil {
				t.Fatalf("request %d: read by net/http", i)
			}
			body, err = io.ReadAll(&h.Body)
		}
		if err != nil || string(body) != want {
			t.Fatalf("request %d: body %q %v, want %q", i, body, err, want)
		}
		if n := len(c.idle[addr]); n != 1 {
			t.Fatalf("request %d: %d idle connections, want the one kept", i, n)
		}
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	if h.Status != 201 || h.Len() != 1 {
		t.Fatalf("last head %d, %d headers", h.Status, h.Len())
	}
}

// directGET is a GET of s's "/" for Do, within deadline.
func directGET(s *rawServer, deadline time.Time) *Request {
	return &Request{Addr: s.addr(), Method: "GET", Replayable: true, Deadline: deadline,
		Wire: []byte("GET / HTTP/1.1\r\nHost: " + s.addr() + "\r\n\r\n")}
}

// On the direct way too, the request's deadline bounds the body, and the
// context's end stops a request waiting for its answer at once; each says
// which it was.
func TestDoDirectDeadlineAndCancel(t *testing.T) {
	t.Parallel()
	s := newRawServer(t, func(n int, nc net.Conn) {
		if n == 0 {
			answerEach(nc, func(*http.Request, []byte) string {
				return "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello" // and no more
			})
		}
		io.Copy(io.Discard, nc) // never answers
	})
	c, _ := newClient(t)
	var h Head
	start := time.Now()
	resp, err := c.Do(context.Background(), directGET(s, time.Now().Add(200*time.Millisecond)), &h)
	if err != nil || resp != nil {
		t.Fatalf("the head: %v, read by net/http %v", err, resp != nil)
	}
	b, err := io.ReadAll(&h.Body)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
		t.Fatalf("read %q, %v after %v from a body that stalled, deadline 200ms", b, err, time.Since(start))
	}
	if n := len(c.idle[s.addr()]); n != 0 {
		t.Fatalf("%d idle connections after a body cut short", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start = time.Now()
	if _, err := c.Do(ctx, directGET(s, time.Now().Add(time.Minute)), &h); !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("a request whose context ended after 100ms: %v after %v", err, time.Since(start))
	}
}

// A kept connection the server closed meanwhile is found out before it is
// used, or on its first read, and the request goes on another.
func TestDoDirectKeptConnectionClosed(t *testing.T) {
	t.Parallel()
	s := newRawServer(t, func(n int, nc net.Conn) {
		answerEach(nc, func(*http.Request, []byte) string { return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" })
	})
	c, dials := newClient(t)
	var h Head
	for i := range 2 {
		if resp, err := c.Do(context.Background(), directGET(s, time.Now().Add(10*time.Second)), &h); err != nil || resp != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if b, err := io.ReadAll(&h.Body); err != nil || string(b) != "ok" {
			t.Fatalf("request %d: %q %v", i, b, err)
		}
		if i == 0 {
			for _, cn := range c.idle[s.addr()] {
				cn.nc.(*net.TCPConn).CloseRead() // as if the server had closed it
				cn.nc.Close()
			}
		}
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("%d dials, want 2", n)
	}
}
