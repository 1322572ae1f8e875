// Package http1 sends plain-HTTP (http://) requests over HTTP/1.1
// keep-alive connections on the caller's goroutine: the goroutine that asks
// writes the request and reads the response, where net/http's Transport
// hands each request to a writing and a reading goroutine of its
// connection (three goroutines and their hand-offs a request). Requests and
// responses are still written and parsed by net/http (Request.Write,
// ReadResponse); this package owns the connections: dialling, reuse, the
// header bound, cancellation.
//
// A Client is an http.RoundTripper: an http.Client over it keeps its
// redirect rules. It does not ask for compressed responses (net/http's
// Transport asks for gzip and undoes it), so a body arrives as the server
// sent it.
package http1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A Client sends requests whose URL scheme is http. Its exported fields are
// set before its first request and not changed after.
type Client struct {
	// Dial opens a connection (net.Dialer.DialContext).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxIdlePerHost caps the idle connections kept per host:port; one
	// coming back past it is closed.
	MaxIdlePerHost int
	// IdleTimeout is how long an idle connection is kept.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds what is read of a response before its body:
	// status line and headers (the bytes read ahead with them count too).
	MaxHeaderBytes int64

	mu     sync.Mutex
	idle   map[string][]*conn // by host:port, the oldest first
	closed bool               // CloseIdleConnections was called: no more are kept
}

// A conn is one connection with its buffers. It belongs to one request at
// a time, or to the idle list.
type conn struct {
	nc        net.Conn
	br        *bufio.Reader
	bw        *bufio.Writer
	key       string
	readLimit int64 // bytes Read may still return; < 0: no limit
	read      int64 // bytes read for the request in progress
	idleSince time.Time
	reused    bool   // it served an earlier request
	deadline  bool   // an I/O deadline is set
	peek      peeker // alive's, made once
	abort     func() // stops its blocked reads and writes at once; made once
	// The watch of a Watcher context (watch): its id, and the stop func
	// (unwatch), made once.
	watcher Watcher
	watchID uint64
	unwatch func() bool
}

// A Watcher is a context that runs a function once it ends, without an
// allocation (a record's: asyncop.RecordContext): a connection's watch of
// its request's context takes it instead of context.AfterFunc's five.
// Watch has f (which must not block) run once the context ends, and
// returns the watch's id, 0 when it has ended (f ran); Unwatch reports
// whether the watch was stopped before f ran. A Watcher may run f at its
// deadline only if something waits on its Done: the connection's I/O
// deadline bounds the exchange.
type Watcher interface {
	Watch(f func()) uint64
	Unwatch(id uint64) bool
}

// Read reads from the connection within readLimit: the header bound.
func (c *conn) Read(p []byte) (int, error) {
	if c.readLimit == 0 {
		return 0, errReadLimit
	}
	if c.readLimit > 0 && int64(len(p)) > c.readLimit {
		p = p[:c.readLimit]
	}
	n, err := c.nc.Read(p)
	c.read += int64(n)
	if c.readLimit > 0 {
		c.readLimit -= int64(n)
	}
	return n, err
}

var errReadLimit = errors.New("read limit exhausted")

// requestDeadline is the context key of a request's own deadline.
type requestDeadline struct{}

// WithRequestDeadline is ctx with a deadline for the requests made with it,
// kept as a value: a connection takes it as its I/O deadline, without the
// timer and cancellation of a context.WithDeadline.
func WithRequestDeadline(ctx context.Context, d time.Time) context.Context {
	return context.WithValue(ctx, requestDeadline{}, d)
}

// RequestDeadline is the earlier of ctx's deadline and the one
// WithRequestDeadline gave it.
func RequestDeadline(ctx context.Context) (time.Time, bool) {
	d, ok := ctx.Deadline()
	if rd, has := ctx.Value(requestDeadline{}).(time.Time); has && (!ok || rd.Before(d)) {
		return rd, true
	}
	return d, ok
}

// aLongTimeAgo is a deadline that has passed: it stops a connection's
// blocked reads and writes at once.
var aLongTimeAgo = time.Unix(1, 0)

// RoundTrip sends req and reads its response's status line and headers.
// The response's body is read from the connection; reading it to the end
// gives the connection back for reuse, closing it early closes the
// connection.
func (c *Client) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil || req.URL.Scheme != "http" {
		closeBody(req)
		return nil, errors.New("http1: only http:// requests")
	}
	if err := validHeader(req.Header); err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	deadline, _ := RequestDeadline(ctx)
	key := hostPort(req)
	for {
		if err := ctx.Err(); err != nil {
			closeBody(req)
			return nil, err
		}
		cn, err := c.get(ctx, key, deadline)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, err := c.exchange(ctx, cn, req, deadline)
		if err == nil {
			return resp, nil
		}
		// A connection the server had already closed, found out only
		// now: the request is sent again on another when nothing came
		// back and sending it twice is harmless (net/http's rule).
		if !cn.reused || cn.read > 0 || !replayable(req) || ended(ctx, deadline) {
			return nil, err
		}
		if req, err = rewind(req); err != nil {
			return nil, err
		}
	}
}

// watch sets cn's I/O deadline for an exchange (the zero time: none) and
// has ctx's cancellation stop the exchange at once; stop ends the watch,
// false when it fired.
func (cn *conn) watch(ctx context.Context, deadline time.Time) (stop func() bool) {
	// The deadline bounds the whole exchange, body included; a
	// cancellation (the record ended) stops it at once.
	if !deadline.IsZero() || cn.deadline {
		cn.nc.SetDeadline(deadline)
		cn.deadline = !deadline.IsZero()
	}
	if w, ok := ctx.(Watcher); ok {
		if cn.unwatch == nil {
			cn.unwatch = cn.stopWatch
		}
		cn.watcher, cn.watchID = w, w.Watch(cn.abort)
		return cn.unwatch
	}
	if ctx.Done() == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(ctx, cn.abort)
}

// stopWatch ends the watch of a Watcher; false when it fired (or was
// ended already), as context.AfterFunc's stop.
func (cn *conn) stopWatch() bool {
	w, id := cn.watcher, cn.watchID
	cn.watcher, cn.watchID = nil, 0
	return w != nil && id != 0 && w.Unwatch(id)
}

// headerLimit is what may be read of a response before its body.
func (c *Client) headerLimit() int64 {
	if c.MaxHeaderBytes <= 0 {
		return 1 << 20
	}
	return c.MaxHeaderBytes
}

func (c *Client) headerLimitErr() error {
	return fmt.Errorf("server response headers exceeded %d bytes; aborted", c.headerLimit())
}

// exchange writes req on cn and reads the response's head.
func (c *Client) exchange(ctx context.Context, cn *conn, req *http.Request, deadline time.Time) (*http.Response, error) {
	stop := cn.watch(ctx, deadline)
	fail := func(err error) (*http.Response, error) {
		stop()
		cn.nc.Close()
		return nil, explainAt(ctx, deadline, err)
	}
	cn.read = 0
	cn.readLimit = -1
	if err := writeRequest(cn.bw, req); err != nil {
		return fail(err)
	}
	if err := cn.bw.Flush(); err != nil {
		return fail(err)
	}
	cn.readLimit = c.headerLimit()
	resp, err := c.readResponse(cn, req)
	if err != nil {
		return fail(err)
	}
	return c.withBody(ctx, cn, stop, resp, !resp.Close && !wantsClose(req)), nil
}

// readResponse reads a response's head from cn with net/http, past any
// 1xx answers, within cn's read limit.
func (c *Client) readResponse(cn *conn, req *http.Request) (*http.Response, error) {
	for informational := 0; ; informational++ {
		resp, err := http.ReadResponse(cn.br, req)
		if err != nil {
			if cn.readLimit == 0 {
				err = c.headerLimitErr()
			}
			return nil, err
		}
		// 1xx answers come before the response (100 Continue, 103
		// Early Hints); 101 would switch protocols.
		if resp.StatusCode < 100 || resp.StatusCode > 199 {
			cn.readLimit = -1
			return resp, nil
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return nil, errors.New("the server switched protocols (101), which lookups do not")
		}
		if informational == 5 {
			return nil, errors.New("too many 1xx informational responses")
		}
	}
}

// withBody is resp with a body that settles cn when read (keep: cn may
// serve another request).
func (c *Client) withBody(ctx context.Context, cn *conn, stop func() bool, resp *http.Response, keep bool) *http.Response {
	b := &body{rc: resp.Body, c: c, cn: cn, ctx: ctx, stop: stop, keep: keep}
	if resp.Body == http.NoBody {
		b.finish(nil)
		return resp
	}
	resp.Body = b
	return resp
}

// A body reads a response's body and then settles its connection: back to
// the idle list when read to the end, closed otherwise.
type body struct {
	rc   io.ReadCloser
	c    *Client
	cn   *conn
	ctx  context.Context
	stop func() bool // stops the cancellation watch
	keep bool        // the connection may serve another request
	end  error       // set once the body is settled
}

func (b *body) Read(p []byte) (int, error) {
	if b.end != nil {
		return 0, b.end
	}
	n, err := b.rc.Read(p)
	if err != nil {
		b.finish(err)
		if err != io.EOF {
			err = explain(b.ctx, err)
		}
	}
	return n, err
}

// wantsClose reports whether req asked the server to close the connection
// after its response.
func wantsClose(req *http.Request) bool {
	if req.Close {
		return true
	}
	for _, v := range req.Header["Connection"] {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "close") {
				return true
			}
		}
	}
	return false
}

// ended reports whether ctx is done or the request's deadline has passed.
func ended(ctx context.Context, deadline time.Time) bool {
	return ctx.Err() != nil || (!deadline.IsZero() && !time.Now().Before(deadline))
}

// explain says why err ended a request when its context or deadline did:
// the context's error, or context.DeadlineExceeded for the request's own
// deadline, wrapping what the connection reported.
func explain(ctx context.Context, err error) error {
	d, _ := RequestDeadline(ctx)
	return explainAt(ctx, d, err)
}

// explainAt is explain with the request's deadline given (zero: none).
func explainAt(ctx context.Context, deadline time.Time, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w (%v)", cerr, err)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && !deadline.IsZero() && !time.Now().Before(deadline) {
		return fmt.Errorf("%w (%v)", context.DeadlineExceeded, err)
	}
	return err
}

func (b *body) Close() error {
	if b.end == nil {
		b.finish(errors.New("http1: read on closed body"))
	}
	return nil
}

// finish settles the connection once: it is reused when the body was read
// to its end (err is io.EOF, or nil for a response without one), the
// server keeps it open and the cancellation watch never fired.
func (b *body) finish(err error) {
	if err == nil {
		err = io.EOF
	}
	b.end = err
	// Bytes past the response's end were never asked for (net/http's
	// reader closes such a connection too).
	if b.stop() && err == io.EOF && b.keep && b.cn.br.Buffered() == 0 {
		b.c.put(b.cn)
		return
	}
	b.cn.nc.Close()
}

// get takes an idle connection to key, or dials one within deadline (the
// zero time: none but ctx's).
func (c *Client) get(ctx context.Context, key string, deadline time.Time) (*conn, error) {
	now := time.Now()
	for {
		c.mu.Lock()
		list := c.idle[key]
		if len(list) == 0 {
			c.mu.Unlock()
			break
		}
		cn := list[len(list)-1]
		list[len(list)-1] = nil
		c.idle[key] = list[:len(list)-1]
		c.mu.Unlock()
		// Peeked at first: a server that closed it (or sent what nobody
		// asked for) has said so by now.
		if now.Sub(cn.idleSince) < c.IdleTimeout && cn.peek.alive(cn.nc) {
			cn.reused = true
			return cn, nil
		}
		cn.nc.Close()
	}
	// The request's own deadline bounds connecting too.
	dctx := ctx
	if !deadline.IsZero() {
		if cd, has := ctx.Deadline(); !has || deadline.Before(cd) {
			var cancel context.CancelFunc
			dctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
		}
	}
	nc, err := c.Dial(dctx, "tcp", key)
	if err != nil {
		return nil, explain(dctx, err)
	}
	cn := &conn{nc: nc, key: key}
	cn.abort = func() { nc.SetDeadline(aLongTimeAgo) }
	cn.br = bufio.NewReaderSize(cn, 4096)
	cn.bw = bufio.NewWriterSize(nc, 4096)
	return cn, nil
}

// put keeps cn idle, unless there is no room or the client is closed. The
// connections idle past IdleTimeout are closed on the way.
func (c *Client) put(cn *conn) {
	now := time.Now()
	cn.idleSince = now
	var drop []*conn
	c.mu.Lock()
	if c.idle == nil {
		c.idle = make(map[string][]*conn)
	}
	list := c.idle[cn.key]
	stale := 0
	for stale < len(list) && now.Sub(list[stale].idleSince) >= c.IdleTimeout {
		stale++
	}
	if stale > 0 {
		drop = append(drop, list[:stale]...)
		list = append(list[:0], list[stale:]...)
		clear(list[len(list):cap(list)][:stale])
	}
	if c.closed || len(list) >= c.MaxIdlePerHost {
		drop = append(drop, cn)
	} else {
		list = append(list, cn)
	}
	c.idle[cn.key] = list
	c.mu.Unlock()
	for _, d := range drop {
		d.nc.Close()
	}
}

// CloseIdleConnections closes the idle connections, and those coming back
// from here on.
func (c *Client) CloseIdleConnections() {
	c.mu.Lock()
	idle := c.idle
	c.idle, c.closed = nil, true
	c.mu.Unlock()
	for _, list := range idle {
		for _, cn := range list {
			cn.nc.Close()
		}
	}
}

// hostPort is req's host:port, port 80 when the URL names none.
func hostPort(req *http.Request) string {
	if p := req.URL.Port(); p != "" {
		return net.JoinHostPort(req.URL.Hostname(), p)
	}
	return net.JoinHostPort(req.URL.Hostname(), "80")
}

// replayable reports whether req may be sent again after a connection
// failed before any response: its method is idempotent and its body can be
// had again (http.NewRequest sets GetBody for a bytes.Reader).
func replayable(req *http.Request) bool {
	switch req.Method {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
	default:
		if req.Header.Get("Idempotency-Key") == "" && req.Header.Get("X-Idempotency-Key") == "" {
			return false
		}
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// rewind is req with its body to read again.
func rewind(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	again := *req
	again.Body = body
	return &again, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// writeRequest writes req's head and body to w as Request.Write does for
// the requests a guest makes (an ASCII host, a body of known length);
// others it leaves to Request.Write.
func writeRequest(w *bufio.Writer, req *http.Request) error {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	if req.Method == "CONNECT" || !plainHost(host) || (hasBody && req.ContentLength <= 0) || req.TransferEncoding != nil || req.Close {
		return req.Write(w)
	}
	if req.Method == "" {
		w.WriteString("GET ")
	} else {
		w.WriteString(req.Method)
		w.WriteByte(' ')
	}
	w.WriteString(req.URL.RequestURI())
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(host)
	w.WriteString("\r\n")
	ua := defaultUserAgent
	if vs, ok := req.Header["User-Agent"]; ok {
		ua = "" // an empty one: none is sent
		if len(vs) > 0 {
			ua = vs[0]
		}
	}
	if ua != "" {
		w.WriteString("User-Agent: ")
		w.WriteString(ua)
		w.WriteString("\r\n")
	}
	for k, vs := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		}
		for _, v := range vs {
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(v)
			w.WriteString("\r\n")
		}
	}
	switch {
	case hasBody:
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(w.AvailableBuffer(), req.ContentLength, 10))
		w.WriteString("\r\n")
	case req.Method == "POST" || req.Method == "PUT" || req.Method == "PATCH":
		w.WriteString("Content-Length: 0\r\n")
	}
	w.WriteString("\r\n")
	if !hasBody {
		return nil
	}
	n, err := io.Copy(w, req.Body)
	req.Body.Close()
	if err == nil && n != req.ContentLength {
		err = fmt.Errorf("http: ContentLength=%d with Body length %d", req.ContentLength, n)
	}
	return err
}

// defaultUserAgent is the User-Agent net/http sends when a request has none.
const defaultUserAgent = "Go-http-client/1.1"

// plainHost reports whether host is written as it is: printable ASCII, no
// zone (Request.Write converts international names and drops zones).
func plainHost(host string) bool {
	if host == "" {
		return false
	}
	for i := 0; i < len(host); i++ {
		if b := host[i]; b <= ' ' || b >= 0x7f || b == '%' {
			return false
		}
	}
	return true
}

// validHeader refuses header names that are not tokens and values with
// control characters other than tab: what net/http's Transport refuses, so
// a request's headers cannot end early or add lines.
func validHeader(h http.Header) error {
	for k, vs := range h {
		if k == "" {
			return errors.New("invalid header field name \"\"")
		}
		for i := 0; i < len(k); i++ {
			if !isToken(k[i]) {
				return fmt.Errorf("invalid header field name %q", k)
			}
		}
		for _, v := range vs {
			for i := 0; i < len(v); i++ {
				if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
					return fmt.Errorf("invalid header field value for %q", k)
				}
			}
		}
	}
	return nil
}

// isToken reports whether b may appear in a header name (RFC 9110, 5.6.2).
func isToken(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	switch b {
	case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
		return true
	}
	return false
}
