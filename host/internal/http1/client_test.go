package http1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// newClient is the Client under test. Its Dial counts the connections it
// opens, on the caller's goroutine (dials), so a test knows how many there
// were as soon as a request returns. The client's idle connections are
// closed when the test ends, before the servers made earlier in the test.
func newClient(t *testing.T) (*Client, *atomic.Int64) {
	t.Helper()
	var dials atomic.Int64
	dial := (&net.Dialer{}).DialContext
	c := &Client{
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return dial(ctx, network, addr)
		},
		MaxIdlePerHost: 8,
		IdleTimeout:    time.Minute,
		MaxHeaderBytes: 64 << 10,
	}
	t.Cleanup(c.CloseIdleConnections)
	return c, &dials
}

// connCounts counts what an httptest server saw of its connections.
type connCounts struct {
	opened, closed atomic.Int64
}

// newServer serves handler on an httptest server and counts its
// connections (Config.ConnState).
func newServer(t *testing.T, handler http.HandlerFunc) (*httptest.Server, *connCounts) {
	t.Helper()
	var n connCounts
	srv := httptest.NewUnstartedServer(handler)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			n.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			n.closed.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n
}

// rawServer is a TCP server on 127.0.0.1 that answers at the byte level:
// serve gets each accepted connection, numbered from 0, on a goroutine of
// its own, and the connection is closed when serve returns.
type rawServer struct {
	ln       net.Listener
	accepted atomic.Int64
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
}

func newRawServer(t *testing.T, serve func(n int, nc net.Conn)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for n := 0; ; n++ {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			s.mu.Lock()
			s.conns = append(s.conns, nc)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer nc.Close()
				serve(n, nc)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, nc := range s.conns {
			nc.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) URL() string  { return "http://" + s.ln.Addr().String() }
func (s *rawServer) addr() string { return s.ln.Addr().String() }

// answerEach reads the requests of nc one after another and writes, for
// each, what answer returns for it; it stops at the first read error or
// when answer returns "".
func answerEach(nc net.Conn, answer func(req *http.Request, body []byte) string) {
	br := bufio.NewReader(nc)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		out := answer(req, body)
		if out == "" {
			return
		}
		if _, err := io.WriteString(nc, out); err != nil {
			return
		}
	}
}

// okResponse is an HTTP/1.1 200 with body, its length given, the
// connection kept.
func okResponse(body string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// waitFor polls cond until it holds, failing the test after 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// get GETs url with hc and returns the body read to its end.
func get(t *testing.T, hc *http.Client, url string) string {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", url, err)
	}
	return string(b)
}

// idleConns is a snapshot of c's idle connections to addr.
func idleConns(c *Client, addr string) []*conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*conn(nil), c.idle[addr]...)
}

// ageIdle makes c's idle connections to addr look idle for d longer than
// they have been (so that taking one peeks at it first).
func ageIdle(c *Client, addr string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cn := range c.idle[addr] {
		cn.idleSince = cn.idleSince.Add(-d)
	}
}

func skipWithoutPeek(t *testing.T) {
	switch runtime.GOOS {
	case "windows", "plan9", "js", "wasip1":
		t.Skip("alive cannot peek on " + runtime.GOOS)
	}
}

// --- 1. Connection reuse ---

func TestSequentialRequestsReuseOneConnection(t *testing.T) {
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok "+r.URL.Path)
	})
	c, _ := newClient(t)
	hc := &http.Client{Transport: c}
	for i := 0; i < 5; i++ {
		path := fmt.Sprintf("/%d", i)
		if got := get(t, hc, srv.URL+path); got != "ok "+path {
			t.Fatalf("request %d: body %q", i, got)
		}
	}
	if n := conns.opened.Load(); n != 1 {
		t.Fatalf("5 sequential requests opened %d connections, want 1", n)
	}
}

// A connection is not reused after an exchange that says it ends: a
// response with "Connection: close", a request that asks for it (whether or
// not the server says so in its answer), an HTTP/1.0 response without
// keep-alive. The server keeps its end open and would answer a second
// request on the same connection: only the client can decide not to reuse
// it (a server that closed at once would have a GET sent again on a new
// connection whether the client kept the closed one or not).
func TestConnectionNotReusedAfterItsEnd(t *testing.T) {
	for _, c := range []struct {
		name     string
		response string
		reqConn  string // the request's Connection header
	}{
		{"response Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi", ""},
		{"request Connection: close", okResponse("hi"), "keep-alive, close"},
		{"HTTP/1.0 response without keep-alive", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newRawServer(t, func(n int, nc net.Conn) {
				answerEach(nc, func(*http.Request, []byte) string { return c.response })
			})
			cl, _ := newClient(t)
			hc := &http.Client{Transport: cl}
			for i := 0; i < 2; i++ {
				req := mustRequest(t, "GET", s.URL(), nil)
				if c.reqConn != "" {
					req.Header.Set("Connection", c.reqConn)
				}
				resp, err := hc.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				if b, _ := io.ReadAll(resp.Body); string(b) != "hi" {
					t.Fatalf("request %d: body %q", i, b)
				}
				resp.Body.Close()
			}
			if n := s.accepted.Load(); n != 2 {
				t.Fatalf("2 requests used %d connections, want 2", n)
			}
		})
	}
}

func TestBodyClosedEarlyClosesConnection(t *testing.T) {
	big := strings.Repeat("x", 256<<10)
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			io.WriteString(w, big)
			return
		}
		io.WriteString(w, "small")
	})
	c, _ := newClient(t)
	hc := &http.Client{Transport: c}
	resp, err := hc.Get(srv.URL + "/big")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, "the server to see the connection closed", func() bool { return conns.closed.Load() == 1 })
	if got := get(t, hc, srv.URL+"/small"); got != "small" {
		t.Fatalf("body %q", got)
	}
	if n := conns.opened.Load(); n != 2 {
		t.Fatalf("after a body closed early the next request found %d connections opened in all, want 2", n)
	}
}

// A server that sends a response the client did not ask for (here: bytes
// after the end of the response asked for) has broken the connection:
// net/http's Transport closes it ("Unsolicited response received on idle
// HTTP channel") rather than take those bytes as the answer to the next
// request.
func TestUnsolicitedResponseIsNotTakenAsTheNextAnswer(t *testing.T) {
	s := newRawServer(t, func(n int, nc net.Conn) {
		first := n == 0
		answerEach(nc, func(*http.Request, []byte) string {
			if first {
				first = false
				return okResponse("first") + okResponse("evil!")
			}
			return okResponse("good!")
		})
	})
	c, _ := newClient(t)
	hc := &http.Client{Transport: c}
	if got := get(t, hc, s.URL()+"/1"); got != "first" {
		t.Fatalf("first body %q", got)
	}
	if got := get(t, hc, s.URL()+"/2"); got != "good!" {
		t.Fatalf("second request: body %q, want the server's answer to it, %q", got, "good!")
	}
}

// --- 2. Bodies ---

func TestContentLengthBodyArrivesWhole(t *testing.T) {
	want := strings.Repeat("0123456789abcdef", 10<<10) // 160 KiB
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", fmt.Sprint(len(want)))
		io.WriteString(w, want)
	})
	c, _ := newClient(t)
	resp, err := (&http.Client{Transport: c}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ContentLength != int64(len(want)) {
		t.Fatalf("ContentLength %d, want %d", resp.ContentLength, len(want))
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("body of %d bytes, want %d (equal: %v)", len(got), len(want), string(got) == want)
	}
}

func TestChunkedBodyArrivesWhole(t *testing.T) {
	part1, part2 := strings.Repeat("a", 5000), strings.Repeat("b", 7000)
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, part1)
		w.(http.Flusher).Flush()
		io.WriteString(w, part2)
	})
	c, _ := newClient(t)
	resp, err := (&http.Client{Transport: c}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !reflect.DeepEqual(resp.TransferEncoding, []string{"chunked"}) {
		t.Fatalf("precondition: Transfer-Encoding %q, want chunked", resp.TransferEncoding)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != part1+part2 {
		t.Fatalf("body of %d bytes, want %d", len(got), len(part1)+len(part2))
	}
}

func TestCloseDelimitedBodyArrivesWhole(t *testing.T) {
	s := newRawServer(t, func(n int, nc net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(nc)); err != nil {
			return
		}
		io.WriteString(nc, "HTTP/1.1 200 OK\r\n\r\nhello")
		// and the connection closes (serve returns): the end of the body
	})
	c, _ := newClient(t)
	resp, err := c.RoundTrip(mustRequest(t, "GET", s.URL(), nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "hello" {
		t.Fatalf("body %q, want %q", got, "hello")
	}
}

func TestHEADHasNoBodyAndKeepsConnection(t *testing.T) {
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		io.WriteString(w, "hello") // not sent for HEAD
	})
	c, _ := newClient(t)
	hc := &http.Client{Transport: c}
	resp, err := hc.Head(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(got) != 0 {
		t.Fatalf("HEAD body %q, %v; want none", got, err)
	}
	if got := get(t, hc, srv.URL); got != "hello" {
		t.Fatalf("GET after HEAD: body %q", got)
	}
	if n := conns.opened.Load(); n != 1 {
		t.Fatalf("HEAD then GET opened %d connections, want 1", n)
	}
}

func Test204HasNoBodyAndKeepsConnection(t *testing.T) {
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/none" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		io.WriteString(w, "hello")
	})
	c, _ := newClient(t)
	hc := &http.Client{Transport: c}
	resp, err := hc.Get(srv.URL + "/none")
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || err != nil || len(got) != 0 {
		t.Fatalf("status %d, body %q, %v; want 204 without body", resp.StatusCode, got, err)
	}
	if got := get(t, hc, srv.URL); got != "hello" {
		t.Fatalf("GET after 204: body %q", got)
	}
	if n := conns.opened.Load(); n != 1 {
		t.Fatalf("204 then GET opened %d connections, want 1", n)
	}
}

// --- 3. Stale idle connections ---

func TestStaleIdleConnectionGETSucceedsOnNewConnection(t *testing.T) {
	closed := make(chan struct{})
	s := newRawServer(t, func(n int, nc net.Conn) {
		if n == 0 {
			br := bufio.NewReader(nc)
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			io.WriteString(nc, okResponse("conn0"))
			nc.Close()
			close(closed)
			return
		}
		answerEach(nc, func(*http.Request, []byte) string { return okResponse(fmt.Sprintf("conn%d", n)) })
	})
	c, _ := newClient(t)
	hc := &http.Client{Transport: c}
	if got := get(t, hc, s.URL()); got != "conn0" {
		t.Fatalf("first body %q", got)
	}
	<-closed
	if got := get(t, hc, s.URL()); got != "conn1" {
		t.Fatalf("GET after the server closed the idle connection: body %q, want %q", got, "conn1")
	}
	if n := s.accepted.Load(); n != 2 {
		t.Fatalf("%d connections accepted, want 2", n)
	}
}

// postAfterClose serves a first connection that answers one request and is
// then closed by the server; later connections answer every request. It
// records the bodies of the POSTs it receives.
func postAfterClose(t *testing.T) (s *rawServer, closed chan struct{}, posts func() []string) {
	closed = make(chan struct{})
	var mu sync.Mutex
	var bodies []string
	s = newRawServer(t, func(n int, nc net.Conn) {
		record := func(req *http.Request, body []byte) {
			if req.Method == "POST" {
				mu.Lock()
				bodies = append(bodies, string(body))
				mu.Unlock()
			}
		}
		if n == 0 {
			br := bufio.NewReader(nc)
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			body, _ := io.ReadAll(req.Body)
			record(req, body)
			io.WriteString(nc, okResponse("conn0"))
			nc.Close()
			close(closed)
			return
		}
		answerEach(nc, func(req *http.Request, body []byte) string {
			record(req, body)
			return okResponse(fmt.Sprintf("conn%d", n))
		})
	})
	return s, closed, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), bodies...)
	}
}

// postOnce POSTs "payload" to s and checks it succeeded and that the server
// received the body exactly once.
func postOnce(t *testing.T, hc *http.Client, s *rawServer, posts func() []string) {
	t.Helper()
	resp, err := hc.Post(s.URL()+"/post", "text/plain", strings.NewReader("payload"))
	if err != nil {
		t.Fatalf("POST on a connection the server had visibly closed: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "conn1" {
		t.Fatalf("POST: body %q, %v; want %q", b, err, "conn1")
	}
	if got := posts(); !reflect.DeepEqual(got, []string{"payload"}) {
		t.Fatalf("the server received the POST bodies %q, want the one once", got)
	}
}

// The server closed the idle connection and the client can see it (its end
// is in the socket) before the POST takes the connection: the POST goes on
// a new connection, at once.
func TestPOSTAfterServerClosedIdleConnectionSucceeds(t *testing.T) {
	skipWithoutPeek(t)
	s, closed, posts := postAfterClose(t)
	c, _ := newClient(t)
	hc := &http.Client{Transport: c}
	if got := get(t, hc, s.URL()); got != "conn0" {
		t.Fatalf("first body %q", got)
	}
	<-closed
	waitFor(t, "the server's close to reach the client", func() bool {
		idle := idleConns(c, s.addr())
		return len(idle) == 1 && !alive(idle[0].nc)
	})
	postOnce(t, hc, s, posts)
}

// As above, the connection having been idle long (30 s, within
// IdleTimeout) before the POST.
func TestPOSTAfterServerClosedLongIdleConnectionSucceeds(t *testing.T) {
	skipWithoutPeek(t)
	s, closed, posts := postAfterClose(t)
	c, _ := newClient(t)
	hc := &http.Client{Transport: c}
	if got := get(t, hc, s.URL()); got != "conn0" {
		t.Fatalf("first body %q", got)
	}
	<-closed
	waitFor(t, "the server's close to reach the client", func() bool {
		idle := idleConns(c, s.addr())
		return len(idle) == 1 && !alive(idle[0].nc)
	})
	ageIdle(c, s.addr(), 30*time.Second)
	postOnce(t, hc, s, posts)
}

// An idle connection still open is reused after the deadline of the
// request it last served has passed (the deadline stays set on the
// connection while it is idle).
func TestIdleConnectionReusedAfterItsLastRequestDeadline(t *testing.T) {
	skipWithoutPeek(t)
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c, _ := newClient(t)
	d := time.Now().Add(300 * time.Millisecond)
	req := mustRequest(t, "GET", srv.URL, nil).WithContext(WithRequestDeadline(context.Background(), d))
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "ok" {
		t.Fatalf("first body %q, %v", b, err)
	}
	resp.Body.Close()
	// Past the deadline (a known instant, not a hope), and idle long
	// enough for the connection to be peeked at when taken.
	time.Sleep(time.Until(d) + 200*time.Millisecond)
	addr := strings.TrimPrefix(srv.URL, "http://")
	ageIdle(c, addr, 30*time.Second)
	if got := get(t, &http.Client{Transport: c}, srv.URL); got != "ok" {
		t.Fatalf("second body %q", got)
	}
	if n := conns.opened.Load(); n != 1 {
		t.Fatalf("the second request opened a new connection (%d in all, want 1): the idle one, still open, was dropped", n)
	}
}

// --- 4. Response heads ---

func TestResponseHeadersOverMaxHeaderBytes(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("a", 70<<10))
		io.WriteString(w, "ok")
	})
	c, _ := newClient(t)
	resp, err := c.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
	if err == nil {
		resp.Body.Close()
		t.Fatal("70 KiB of headers under a 64 KiB bound: no error")
	}
	if !strings.Contains(err.Error(), "server response headers exceeded") {
		t.Fatalf("error %q, want one saying the server response headers exceeded the bound", err)
	}
}

func TestResponseHeadersUnderMaxHeaderBytes(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("a", 32<<10))
		io.WriteString(w, "ok")
	})
	c, _ := newClient(t)
	resp, err := c.RoundTrip(mustRequest(t, "GET", srv.URL, nil))
	if err != nil {
		t.Fatalf("32 KiB of headers under a 64 KiB bound: %v", err)
	}
	defer resp.Body.Close()
	if len(resp.Header.Get("X-Big")) != 32<<10 {
		t.Fatalf("X-Big of %d bytes", len(resp.Header.Get("X-Big")))
	}
}

func TestInformationalResponsesAreSkipped(t *testing.T) {
	s := newRawServer(t, func(n int, nc net.Conn) {
		answerEach(nc, func(*http.Request, []byte) string {
			return "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" +
				"HTTP/1.1 103 Early Hints\r\nLink: </b>\r\n\r\n" +
				okResponse("final")
		})
	})
	c, _ := newClient(t)
	resp, err := c.RoundTrip(mustRequest(t, "GET", s.URL(), nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "final" || err != nil {
		t.Fatalf("status %d, body %q, %v; want 200 %q", resp.StatusCode, b, err, "final")
	}
}

func TestSwitchingProtocolsIsAnError(t *testing.T) {
	s := newRawServer(t, func(n int, nc net.Conn) {
		answerEach(nc, func(*http.Request, []byte) string {
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
		})
	})
	c, _ := newClient(t)
	resp, err := c.RoundTrip(mustRequest(t, "GET", s.URL(), nil))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a 101 answer returned status %d, no error", resp.StatusCode)
	}
}

// --- 5. Writing requests ---

func mustRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// recordingServer records the requests it reads, and answers each "ok".
type recordingServer struct {
	*rawServer
	mu   sync.Mutex
	reqs []string // method and URI of each request read, or the read error
}

func newRecordingServer(t *testing.T) *recordingServer {
	s := &recordingServer{}
	s.rawServer = newRawServer(t, func(n int, nc net.Conn) {
		br := bufio.NewReader(nc)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				if err != io.EOF {
					s.mu.Lock()
					s.reqs = append(s.reqs, "error: "+err.Error())
					s.mu.Unlock()
				}
				return
			}
			io.Copy(io.Discard, req.Body)
			s.mu.Lock()
			s.reqs = append(s.reqs, req.Method+" "+req.RequestURI)
			s.mu.Unlock()
			if _, err := io.WriteString(nc, okResponse("ok")); err != nil {
				return
			}
		}
	})
	return s
}

func (s *recordingServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

// refusedHeader checks that a request with header k: v is refused and
// nothing of it reaches the server: no connection is opened, and the
// server then sees only the request sent after it.
func refusedHeader(t *testing.T, k, v string) {
	t.Helper()
	s := newRecordingServer(t)
	c, dials := newClient(t)
	bad := mustRequest(t, "GET", s.URL()+"/bad", nil)
	bad.Header[k] = []string{v}
	if resp, err := c.RoundTrip(bad); err == nil {
		resp.Body.Close()
		t.Fatalf("header %q: %q was sent, no error", k, v)
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("the refused request opened %d connections", n)
	}
	resp, err := c.RoundTrip(mustRequest(t, "GET", s.URL()+"/good", nil))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if got := s.seen(); !reflect.DeepEqual(got, []string{"GET /good"}) {
		t.Fatalf("the server saw %q, want only the good request", got)
	}
	if n := s.accepted.Load(); n != 1 {
		t.Fatalf("the server accepted %d connections, want 1", n)
	}
}

func TestHeaderNameWithSpaceIsRefused(t *testing.T) {
	refusedHeader(t, "Bad Name", "x")
}

func TestHeaderValueWithCRLFIsRefused(t *testing.T) {
	refusedHeader(t, "X-Ok", "a\r\nX-Injected: 1")
}

// seenRequest is what a handler saw of a request.
type seenRequest struct {
	method        string
	host          string
	header        http.Header
	contentLength int64
	body          string
}

func captureServer(t *testing.T) (*httptest.Server, <-chan seenRequest) {
	seen := make(chan seenRequest, 16)
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen <- seenRequest{r.Method, r.Host, r.Header.Clone(), r.ContentLength, string(b)}
		io.WriteString(w, "ok")
	})
	return srv, seen
}

func send(t *testing.T, c *Client, req *http.Request) {
	t.Helper()
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func TestServerReceivesHost(t *testing.T) {
	srv, seen := captureServer(t)
	c, _ := newClient(t)
	send(t, c, mustRequest(t, "GET", srv.URL, nil))
	if r, want := <-seen, strings.TrimPrefix(srv.URL, "http://"); r.host != want {
		t.Fatalf("Host %q, want %q", r.host, want)
	}
}

func TestServerReceivesRequestHost(t *testing.T) {
	srv, seen := captureServer(t)
	c, _ := newClient(t)
	req := mustRequest(t, "GET", srv.URL, nil)
	req.Host = "api.example.test"
	send(t, c, req)
	if r := <-seen; r.host != "api.example.test" {
		t.Fatalf("Host %q, want %q", r.host, "api.example.test")
	}
}

func TestServerReceivesDefaultUserAgent(t *testing.T) {
	srv, seen := captureServer(t)
	c, _ := newClient(t)
	send(t, c, mustRequest(t, "GET", srv.URL, nil))
	if r := <-seen; !reflect.DeepEqual(r.header["User-Agent"], []string{"Go-http-client/1.1"}) {
		t.Fatalf("User-Agent %q, want Go-http-client/1.1", r.header["User-Agent"])
	}
}

func TestServerReceivesGuestUserAgent(t *testing.T) {
	srv, seen := captureServer(t)
	c, _ := newClient(t)
	req := mustRequest(t, "GET", srv.URL, nil)
	req.Header.Set("User-Agent", "guest/2.0")
	send(t, c, req)
	if r := <-seen; !reflect.DeepEqual(r.header["User-Agent"], []string{"guest/2.0"}) {
		t.Fatalf("User-Agent %q, want guest/2.0", r.header["User-Agent"])
	}
}

func TestServerReceivesPOSTBodyWithContentLength(t *testing.T) {
	srv, seen := captureServer(t)
	c, _ := newClient(t)
	send(t, c, mustRequest(t, "POST", srv.URL, strings.NewReader("payload")))
	r := <-seen
	if r.method != "POST" || r.body != "payload" || r.contentLength != 7 || !reflect.DeepEqual(r.header["Content-Length"], []string{"7"}) {
		t.Fatalf("%s with Content-Length %q (%d), body %q; want POST, 7, %q", r.method, r.header["Content-Length"], r.contentLength, r.body, "payload")
	}
}

func TestServerReceivesContentLengthZeroForPOSTWithoutBody(t *testing.T) {
	srv, seen := captureServer(t)
	c, _ := newClient(t)
	req := mustRequest(t, "POST", srv.URL, nil)
	req.Body, req.ContentLength = http.NoBody, 0
	send(t, c, req)
	if r := <-seen; !reflect.DeepEqual(r.header["Content-Length"], []string{"0"}) || r.body != "" {
		t.Fatalf("Content-Length %q, body %q; want 0 and none", r.header["Content-Length"], r.body)
	}
}

// writeRequest writes what Request.Write writes, read back as a request:
// the same method, URI, Host, headers and body.
func TestWriteRequestMatchesRequestWrite(t *testing.T) {
	const u = "http://127.0.0.1:8080/p/a%20th?q=1&r=%2F"
	cases := []struct {
		name string
		make func(t *testing.T) *http.Request
	}{
		{"GET with headers", func(t *testing.T) *http.Request {
			req := mustRequest(t, "GET", u, nil)
			req.Header.Add("Accept", "text/plain")
			req.Header.Add("Accept", "application/json")
			req.Header.Set("X-Trace", "  spaced value\t")
			req.Header["x-lower"] = []string{"kept"}
			return req
		}},
		{"POST with body", func(t *testing.T) *http.Request {
			req := mustRequest(t, "POST", u, bytes.NewReader([]byte(`{"a":1}`)))
			req.Header.Set("Content-Type", "application/json")
			return req
		}},
		{"POST without body", func(t *testing.T) *http.Request {
			req := mustRequest(t, "POST", u, nil)
			req.Body = http.NoBody
			return req
		}},
		{"PUT with Host and User-Agent", func(t *testing.T) *http.Request {
			req := mustRequest(t, "PUT", u, strings.NewReader("put body"))
			req.Host = "api.example.test:9"
			req.Header.Set("User-Agent", "guest/1")
			return req
		}},
		{"DELETE without body", func(t *testing.T) *http.Request {
			return mustRequest(t, "DELETE", "http://example.test", nil)
		}},
		{"headers Request.Write leaves out", func(t *testing.T) *http.Request {
			req := mustRequest(t, "PATCH", u, strings.NewReader("abc"))
			req.Header.Set("Host", "other.test")
			req.Header.Set("Content-Length", "99")
			req.Header.Set("Transfer-Encoding", "chunked")
			req.Header.Set("Trailer", "X-T")
			return req
		}},
		{"empty User-Agent suppresses it", func(t *testing.T) *http.Request {
			req := mustRequest(t, "GET", u, nil)
			req.Header.Set("User-Agent", "")
			return req
		}},
		{"empty method means GET", func(t *testing.T) *http.Request {
			req := mustRequest(t, "GET", u, nil)
			req.Method = ""
			return req
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var want, got bytes.Buffer
			if err := tc.make(t).Write(&want); err != nil {
				t.Fatal(err)
			}
			bw := bufio.NewWriter(&got)
			if err := writeRequest(bw, tc.make(t)); err != nil {
				t.Fatal(err)
			}
			bw.Flush()
			wrote := got.String()
			w, err := readBack(&want)
			if err != nil {
				t.Fatalf("Request.Write's output does not read back: %v", err)
			}
			g, err := readBack(&got)
			if err != nil {
				t.Fatalf("writeRequest wrote %q, which does not read back: %v", wrote, err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("writeRequest wrote\n%+v\nRequest.Write\n%+v", g, w)
			}
		})
	}
}

type readRequest struct {
	Method, RequestURI, Host string
	Header                   http.Header
	ContentLength            int64
	TransferEncoding         []string
	Body                     string
}

func readBack(b *bytes.Buffer) (readRequest, error) {
	req, err := http.ReadRequest(bufio.NewReader(b))
	if err != nil {
		return readRequest{}, err
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return readRequest{}, err
	}
	if b.Len() != 0 {
		return readRequest{}, fmt.Errorf("%d bytes after the request", b.Len())
	}
	return readRequest{req.Method, req.RequestURI, req.Host, req.Header, req.ContentLength, req.TransferEncoding, string(body)}, nil
}

// --- 6. Deadlines and cancellation ---

// silentServer reads what comes and never answers.
func silentServer(t *testing.T) *rawServer {
	return newRawServer(t, func(n int, nc net.Conn) { io.Copy(io.Discard, nc) })
}

func TestRequestDeadlineServerNeverAnswers(t *testing.T) {
	s := silentServer(t)
	c, _ := newClient(t)
	ctx := WithRequestDeadline(context.Background(), time.Now().Add(200*time.Millisecond))
	start := time.Now()
	resp, err := (&http.Client{Transport: c}).Do(mustRequest(t, "GET", s.URL(), nil).WithContext(ctx))
	elapsed := time.Since(start)
	if err == nil {
		resp.Body.Close()
		t.Fatal("no error from a server that never answers")
	}
	if elapsed > time.Second {
		t.Fatalf("returned after %v, deadline 200ms", elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v is not context.DeadlineExceeded", err)
	}
}

func TestRequestDeadlineBodyStalls(t *testing.T) {
	s := newRawServer(t, func(n int, nc net.Conn) {
		answerEach(nc, func(*http.Request, []byte) string {
			return "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello"
		})
		io.Copy(io.Discard, nc) // and no more
	})
	c, _ := newClient(t)
	ctx := WithRequestDeadline(context.Background(), time.Now().Add(200*time.Millisecond))
	start := time.Now()
	resp, err := c.RoundTrip(mustRequest(t, "GET", s.URL(), nil).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	elapsed := time.Since(start)
	if err == nil {
		t.Fatalf("read %q and no error from a body that stalled", b)
	}
	if elapsed > time.Second {
		t.Fatalf("the read returned after %v, deadline 200ms", elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v is not context.DeadlineExceeded", err)
	}
	if string(b) != "hello" {
		t.Fatalf("read %q before the stall, want %q", b, "hello")
	}
}

// A request sent again on a new connection (its reused one failed) is not
// sent once its deadline has passed: no connection is dialled for it.
func TestNoNewConnectionAfterRequestDeadline(t *testing.T) {
	s := newRawServer(t, func(n int, nc net.Conn) {
		first := true
		answerEach(nc, func(*http.Request, []byte) string {
			if first {
				first = false
				return okResponse("one")
			}
			io.Copy(io.Discard, nc) // the second is never answered
			return ""
		})
	})
	c, dials := newClient(t)
	hc := &http.Client{Transport: c}
	if got := get(t, hc, s.URL()); got != "one" {
		t.Fatalf("first body %q", got)
	}
	ctx := WithRequestDeadline(context.Background(), time.Now().Add(200*time.Millisecond))
	resp, err := hc.Do(mustRequest(t, "GET", s.URL(), nil).WithContext(ctx))
	if err == nil {
		resp.Body.Close()
		t.Fatal("no error from a server that never answers")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v is not context.DeadlineExceeded", err)
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d connections dialled, want 1: a new one was dialled after the request's deadline", n)
	}
}

// The request's deadline bounds the whole request, connecting included (as
// it does for https://, where it becomes a context's): a dial that hangs
// (a host that drops SYNs) ends at the deadline.
func TestRequestDeadlineBoundsDial(t *testing.T) {
	c, _ := newClient(t)
	c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(1500 * time.Millisecond): // the dialer's Timeout (3 s in host/ops.go)
			return nil, errors.New("simulated connect timeout after 1.5s")
		}
	}
	ctx := WithRequestDeadline(context.Background(), time.Now().Add(200*time.Millisecond))
	start := time.Now()
	resp, err := c.RoundTrip(mustRequest(t, "GET", "http://192.0.2.1/", nil).WithContext(ctx))
	elapsed := time.Since(start)
	if err == nil {
		resp.Body.Close()
		t.Fatal("no error")
	}
	if elapsed > time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("returned after %v with %v; want context.DeadlineExceeded by the 200ms deadline", elapsed, err)
	}
}

// waitingServer answers /fast at once; /wait signals arrived and answers
// only when the client has gone (or after 5 s).
func waitingServer(t *testing.T) (*httptest.Server, *connCounts, chan struct{}) {
	arrived := make(chan struct{}, 1)
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			arrived <- struct{}{}
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		io.WriteString(w, "fast")
	})
	return srv, conns, arrived
}

// cancelWhileWaiting sends /wait with a context canceled once the server
// has the request, and returns the error and how long the request took.
func cancelWhileWaiting(t *testing.T, hc *http.Client, srv *httptest.Server, arrived chan struct{}) (error, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-arrived
		cancel()
	}()
	start := time.Now()
	resp, err := hc.Do(mustRequest(t, "GET", srv.URL+"/wait", nil).WithContext(ctx))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("no error from a request canceled while waiting (status %d)", resp.StatusCode)
	}
	return err, time.Since(start)
}

func TestCancelWhileWaitingReturnsCanceled(t *testing.T) {
	srv, _, arrived := waitingServer(t)
	c, _ := newClient(t)
	err, elapsed := cancelWhileWaiting(t, &http.Client{Transport: c}, srv, arrived)
	if elapsed > time.Second {
		t.Fatalf("returned %v after the request was sent", elapsed)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v is not context.Canceled", err)
	}
}

func TestCanceledRequestConnectionIsNotReused(t *testing.T) {
	srv, conns, arrived := waitingServer(t)
	c, _ := newClient(t)
	hc := &http.Client{Transport: c}
	// The connection is first idle, then taken by the request canceled.
	if got := get(t, hc, srv.URL+"/fast"); got != "fast" {
		t.Fatalf("body %q", got)
	}
	cancelWhileWaiting(t, hc, srv, arrived)
	if got := get(t, hc, srv.URL+"/fast"); got != "fast" {
		t.Fatalf("body %q", got)
	}
	if n := conns.opened.Load(); n != 2 {
		t.Fatalf("%d connections opened, want 2: the canceled request's connection was reused", n)
	}
}

func TestRequestDeadline(t *testing.T) {
	base := time.Now().Add(time.Hour)
	early, late := base, base.Add(time.Minute)
	withCtxDeadline := func(d time.Time) context.Context {
		ctx, cancel := context.WithDeadline(context.Background(), d)
		t.Cleanup(cancel)
		return ctx
	}
	cases := []struct {
		name   string
		ctx    context.Context
		want   time.Time
		wantOK bool
	}{
		{"none", context.Background(), time.Time{}, false},
		{"value only", WithRequestDeadline(context.Background(), early), early, true},
		{"context only", withCtxDeadline(early), early, true},
		{"value earlier", WithRequestDeadline(withCtxDeadline(late), early), early, true},
		{"context earlier", WithRequestDeadline(withCtxDeadline(early), late), early, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := RequestDeadline(tc.ctx)
			if ok != tc.wantOK || !got.Equal(tc.want) {
				t.Fatalf("RequestDeadline = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

// --- 7. CloseIdleConnections ---

func TestCloseIdleConnectionsClosesIdle(t *testing.T) {
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c, _ := newClient(t)
	if got := get(t, &http.Client{Transport: c}, srv.URL); got != "ok" {
		t.Fatalf("body %q", got)
	}
	c.CloseIdleConnections()
	waitFor(t, "the server to see the idle connection closed", func() bool { return conns.closed.Load() == 1 })
}

func TestBodyFinishedAfterCloseIdleConnectionsClosesConnection(t *testing.T) {
	srv, conns := newServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	c, _ := newClient(t)
	resp, err := (&http.Client{Transport: c}).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	c.CloseIdleConnections()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(b) != "hello" {
		t.Fatalf("body %q, %v", b, err)
	}
	if idle := idleConns(c, strings.TrimPrefix(srv.URL, "http://")); len(idle) != 0 {
		t.Fatalf("%d connections kept idle", len(idle))
	}
	waitFor(t, "the server to see the connection closed", func() bool { return conns.closed.Load() == 1 })
}

// --- 8. Redirects ---

func TestRedirectFollowed(t *testing.T) {
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/from" {
			http.Redirect(w, r, "/to", http.StatusFound)
			return
		}
		io.WriteString(w, "arrived at "+r.URL.Path)
	})
	c, _ := newClient(t)
	resp, err := (&http.Client{Transport: c}).Get(srv.URL + "/from")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 || string(b) != "arrived at /to" {
		t.Fatalf("status %d, body %q, %v; want 200 %q", resp.StatusCode, b, err, "arrived at /to")
	}
}

func TestRedirect307POSTKeepsBody(t *testing.T) {
	type got struct{ method, body string }
	at := make(chan got, 1)
	srv, _ := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/from" {
			http.Redirect(w, r, "/to", http.StatusTemporaryRedirect)
			return
		}
		b, _ := io.ReadAll(r.Body)
		at <- got{r.Method, string(b)}
		io.WriteString(w, "ok")
	})
	c, _ := newClient(t)
	resp, err := (&http.Client{Transport: c}).Post(srv.URL+"/from", "text/plain", strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if g := <-at; g != (got{"POST", "payload"}) {
		t.Fatalf("the redirect's target received %s %q, want POST %q", g.method, g.body, "payload")
	}
}
