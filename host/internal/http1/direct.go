package http1

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"
)

// The direct exchange: a request whose head and body the caller wrote
// ahead, in its own buffer, and a response whose head is kept as the bytes
// it came in (Head), without an http.Request or an http.Response, their
// header maps and strings: a lookup's ~30 allocations of net/http's
// parsing and building come to the body's reader. Only the common answer
// is read this way (isDirectHead); any other is read by net/http
// (http.ReadResponse), as RoundTrip reads it, so its meaning never depends
// on a parser of this package's own.

// A Request is a plain-HTTP request written ahead (Do).
type Request struct {
	// Addr is the host:port to connect to.
	Addr string
	// Wire is the request's head and body as they are sent. Do writes it
	// again, whole, on another connection when a kept one turns out
	// closed before any answer and Replayable is set.
	Wire []byte
	// Method is the request's method, for net/http's reading of an
	// unusual answer (a HEAD has no body).
	Method string
	// Deadline bounds the exchange, body included; zero: none.
	Deadline time.Time
	// Replayable: sending the request twice is harmless (replayable).
	Replayable bool
	// Close: the request asked the server to close the connection.
	Close bool
}

// A Head is a response's status line and headers as read by Do, and its
// body's reader; it is reused from one exchange to the next.
type Head struct {
	// Status is the status code.
	Status int
	// Size is what the status line and the headers count against a
	// response's bound: the protocol, a space and the status, and every
	// name and value (what net/http's parse would hold).
	Size int64
	// ContentLength is the body's length.
	ContentLength int64
	// Body reads the body; read to its end, it gives the connection back.
	Body Body

	raw    []byte // the head's bytes, the names in canonical form
	fields []span // the headers in raw, in the order received
}

// span is a header in Head.raw: name raw[n0:n1], value raw[v0:v1].
type span struct{ n0, n1, v0, v1 int32 }

// Len is the number of headers.
func (h *Head) Len() int { return len(h.fields) }

// Field returns header i's name (canonical, as net/http's) and value; the
// slices are valid until the Head is used again.
func (h *Head) Field(i int) (name, value []byte) {
	f := h.fields[i]
	return h.raw[f.n0:f.n1], h.raw[f.v0:f.v1]
}

// A Body reads the body of a response read into a Head: ContentLength
// bytes from its connection, which it then gives back.
type Body struct {
	cn       *conn
	c        *Client
	ctx      context.Context
	deadline time.Time // the request's
	stop     func() bool
	left     int64
	keep     bool
	end      error // set once the body is settled
}

func (b *Body) Read(p []byte) (int, error) {
	if b.end != nil {
		return 0, b.end
	}
	if b.left == 0 {
		b.finish(io.EOF)
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.cn.br.Read(p)
	b.left -= int64(n)
	if err == io.EOF && b.left > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		ctx := b.ctx
		b.finish(err)
		return n, explainAt(ctx, b.deadline, err)
	}
	if b.left == 0 {
		b.finish(io.EOF)
		return n, io.EOF
	}
	return n, nil
}

// Close settles the connection: closed unless the body was read to its end.
func (b *Body) Close() error {
	if b.end == nil {
		b.finish(errors.New("http1: read on closed body"))
	}
	return nil
}

// finish settles the connection once, as body.finish does.
func (b *Body) finish(err error) {
	b.end = err
	cn, stop := b.cn, b.stop
	b.cn, b.ctx, b.stop = nil, nil, nil // nothing of the request is kept
	if stop() && err == io.EOF && b.keep && cn.br.Buffered() == 0 {
		b.c.put(cn)
		return
	}
	cn.nc.Close()
}

// Do sends req and reads its response's head. The common answer (an
// HTTP/1.1 status other than a redirect, plain headers, a Content-Length)
// is read into h, whose Body then reads the body, and resp is nil; any
// other is read by net/http into resp, whose Body reads the body (as
// RoundTrip's), and h is unused. ctx's cancellation stops the exchange.
func (c *Client) Do(ctx context.Context, req *Request, h *Head) (resp *http.Response, err error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cn, err := c.get(ctx, req.Addr, req.Deadline)
		if err != nil {
			return nil, err
		}
		resp, err := c.exchangeDirect(ctx, cn, req, h)
		if err == nil {
			return resp, nil
		}
		// A kept connection the server had closed: as RoundTrip.
		if !cn.reused || cn.read > 0 || !req.Replayable || ended(ctx, req.Deadline) {
			return nil, err
		}
	}
}

// exchangeDirect writes req's bytes on cn and reads the response's head.
func (c *Client) exchangeDirect(ctx context.Context, cn *conn, req *Request, h *Head) (*http.Response, error) {
	stop := cn.watch(ctx, req.Deadline)
	fail := func(err error) (*http.Response, error) {
		stop()
		cn.nc.Close()
		return nil, explainAt(ctx, req.Deadline, err)
	}
	cn.read = 0
	cn.readLimit = -1
	if _, err := cn.nc.Write(req.Wire); err != nil {
		return fail(err)
	}
	cn.readLimit = c.headerLimit()
	// The head is read directly when it arrived whole with the first
	// bytes, as a lookup's answer does.
	if _, err := cn.br.Peek(1); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if cn.readLimit == 0 {
			err = c.headerLimitErr()
		}
		return fail(err)
	}
	if buf, _ := cn.br.Peek(cn.br.Buffered()); parseDirectHead(buf, h) {
		cn.br.Discard(len(h.raw))
		cn.readLimit = -1
		h.Body = Body{cn: cn, c: c, ctx: ctx, deadline: req.Deadline, stop: stop, left: h.ContentLength, keep: !req.Close}
		if h.ContentLength == 0 {
			h.Body.finish(io.EOF) // settled now: a reader may never ask
		}
		return nil, nil
	}
	hr := &http.Request{Method: req.Method, Close: req.Close}
	resp, err := c.readResponse(cn, hr)
	if err != nil {
		return fail(err)
	}
	return c.withBody(ctx, cn, stop, resp, !resp.Close && !req.Close), nil
}

// parseDirectHead reads buf's head into h when it is whole in buf and the
// common answer: "HTTP/1.1 ddd reason" for a status of 200 to 599 other
// than a redirect, headers each on a CRLF line (no folding), with tokens
// for names and no control characters in values, none of
// Transfer-Encoding, Connection, Pragma or Trailer (net/http gives those a
// meaning beyond their bytes), and one Content-Length. h.raw is then the
// head's bytes (its length is the head's, blank line included). It
// reports false for anything else, which net/http reads.
func parseDirectHead(buf []byte, h *Head) bool {
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		return false
	}
	h.raw = append(h.raw[:0], buf[:end+4]...)
	h.fields = h.fields[:0]
	raw := h.raw
	line, rest, _ := bytes.Cut(raw[:end+2], []byte("\r\n"))
	code, ok := directStatus(line)
	if !ok {
		return false
	}
	h.Status, h.Size, h.ContentLength = code, int64(len(line)), -1
	off := len(line) + 2
	for len(rest) > 0 {
		line, rest, _ = bytes.Cut(rest, []byte("\r\n"))
		if !h.directField(line, off) {
			return false
		}
		off += len(line) + 2
	}
	if code == 204 || code == 304 {
		// No body whatever the headers say (net/http's rule).
		h.ContentLength = 0
	}
	return h.ContentLength >= 0
}

// directStatus reads a status line the direct way takes: HTTP/1.1, a
// final status that is not a redirect, printable reason.
func directStatus(line []byte) (int, bool) {
	if len(line) < 12 || string(line[:9]) != "HTTP/1.1 " || (len(line) > 12 && line[12] != ' ') {
		return 0, false
	}
	code := 0
	for _, d := range line[9:12] {
		if d < '0' || d > '9' {
			return 0, false
		}
		code = code*10 + int(d-'0')
	}
	switch {
	case code < 200 || code > 599:
		return 0, false
	case code == 301 || code == 302 || code == 303 || code == 307 || code == 308:
		return 0, false
	}
	for _, b := range line[9:] {
		if !validValueByte(b) {
			return 0, false
		}
	}
	return code, true
}

// directField reads one header line at offset start of h.raw into h: its
// name canonicalized in place, its value trimmed; a header the direct way
// leaves to net/http, or a malformed one, is false.
func (h *Head) directField(line []byte, start int) bool {
	colon := bytes.IndexByte(line, ':')
	if colon <= 0 || bytes.IndexByte(line, '\n') >= 0 || !canonicalName(line[:colon]) {
		return false
	}
	name := line[:colon]
	v0, v1 := colon+1, len(line)
	for v0 < v1 && (line[v0] == ' ' || line[v0] == '\t') {
		v0++
	}
	for v1 > v0 && (line[v1-1] == ' ' || line[v1-1] == '\t') {
		v1--
	}
	for _, b := range line[v0:v1] {
		if !validValueByte(b) {
			return false
		}
	}
	switch string(name) {
	case "Transfer-Encoding", "Connection", "Pragma", "Trailer":
		return false
	case "Content-Length":
		n, ok := directLength(line[v0:v1])
		if !ok || h.ContentLength >= 0 {
			return false
		}
		h.ContentLength = n
	}
	h.fields = append(h.fields, span{int32(start), int32(start + colon), int32(start + v0), int32(start + v1)})
	h.Size += int64(colon + v1 - v0)
	return true
}

// canonicalName checks that name is a token and rewrites it in place in
// net/http's canonical form (Content-Length).
func canonicalName(name []byte) bool {
	upper := true
	for i, b := range name {
		if !isToken(b) {
			return false
		}
		switch {
		case upper && 'a' <= b && b <= 'z':
			name[i] = b - ('a' - 'A')
		case !upper && 'A' <= b && b <= 'Z':
			name[i] = b + ('a' - 'A')
		}
		upper = b == '-'
	}
	return true
}

// directLength reads a Content-Length value: 1 to 18 decimal digits.
func directLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	n := int64(0)
	for _, d := range v {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + int64(d-'0')
	}
	return n, true
}

// validValueByte reports whether b may appear in a header value as
// net/http reads one: no control character other than tab.
func validValueByte(b byte) bool { return b >= ' ' && b != 0x7f || b == '\t' }
