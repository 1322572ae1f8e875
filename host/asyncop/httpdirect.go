package asyncop

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/http1"
)

// The direct way of a plain-HTTP request (RATIONALE.md, "Plain HTTP on the
// asking goroutine"): the guest's request, read in place (a view of its
// encoding), is written on the wire by Start into a buffer reused from one
// lookup to the next, and the answer's head and body are written into the
// completion as they are read (http1.Head), without net/http's Request,
// Response, header maps and strings: a lookup's ~30 allocations come to a
// few. Only requests whose meaning the writing below cannot change take
// it (directRequest): an http:// URL of a plain host, port and path, a
// method other than HEAD or CONNECT, names that are tokens, within the
// bounds and allowed. Any other request takes net/http's way, refusals
// included; and an answer http1 leaves to net/http (a redirect, chunked) is
// read by it, a redirect followed by the client.

// lookup is one request on the direct way, and the buffers it reuses.
type lookup struct {
	op      *httpOp
	ctx     context.Context
	done    func([]byte)
	timeout time.Duration
	raw     []byte // the guest's request: net/http's way's, for a redirect
	method  []byte // in raw
	url     []byte // in raw
	req     http1.Request
	addr    []byte // req.Addr's bytes: the string is kept while they are the same
	head    http1.Head
	run     func() // lk.do, made once
}

// lookups are kept for reuse; one whose buffers grew past maxKept is
// dropped.
var lookups = sync.Pool{New: func() any { return &lookup{} }}

const maxKept = 64 << 10

var getMethod = []byte(http.MethodGet)

// direct starts v, the guest's request raw, on the direct way when it is
// one for it, and returns its description; ok false: it is not, and
// nothing started.
func (op *httpOp) direct(ctx context.Context, v *abi.HTTPRequestView, raw []byte, done func([]byte)) (desc string, ok bool) {
	method := v.Method
	if len(method) == 0 {
		method = getMethod
	}
	if !tokenBytes(method) || string(method) == http.MethodHead || string(method) == http.MethodConnect ||
		len(v.Body) > op.cfg.MaxRequestBytes {
		return "", false
	}
	u, ok := parsePlainURL(v.URL)
	if !ok || !op.allowedBytes(u.host, u.port) {
		return "", false
	}
	headersOK := true
	v.EachHeader(func(name, value []byte) {
		if !tokenBytes(name) || !valueBytesOK(value) {
			headersOK = false
		}
	})
	if !headersOK {
		return "", false
	}
	lk := lookups.Get().(*lookup)
	if lk.run == nil {
		lk.run = lk.do
	}
	lk.op, lk.ctx, lk.done = op, ctx, done
	lk.timeout = op.cfg.Timeout
	if v.Timeout > 0 && v.Timeout < lk.timeout {
		lk.timeout = v.Timeout
	}
	d := time.Now().Add(lk.timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	// The request is read from here on from a copy: the guest goes on
	// writing its memory.
	lk.raw = append(lk.raw[:0], raw...)
	cv, _ := abi.DecodeHTTPRequestView(lk.raw)
	v = &cv
	u, _ = parsePlainURL(v.URL)
	lk.url, lk.method = v.URL, method
	if len(v.Method) > 0 {
		lk.method = v.Method
	}
	n := len(lk.addr)
	lk.addr = append(append(lk.addr, u.host...), ':')
	if len(u.port) > 0 {
		lk.addr = append(lk.addr, u.port...)
	} else {
		lk.addr = append(lk.addr, "80"...)
	}
	if string(lk.addr[n:]) != lk.req.Addr {
		lk.req.Addr = string(lk.addr[n:])
	}
	lk.addr = append(lk.addr[:0], lk.addr[n:]...)
	switch string(method) { // the common ones without an allocation
	case http.MethodGet:
		lk.req.Method = http.MethodGet
	case http.MethodPost:
		lk.req.Method = http.MethodPost
	default:
		lk.req.Method = string(method)
	}
	lk.req.Deadline = d
	lk.req.Wire, lk.req.Replayable, lk.req.Close = writeDirect(lk.req.Wire[:0], method, u, v)
	desc = describe(method, v.URL)
	goroutines.Go(lk.run)
	return desc, true
}

// describe is a request's description in reports: its method and URL, the
// first 200 bytes.
func describe(method, u []byte) string {
	var buf [256]byte
	b := append(append(append(buf[:0], method...), ' '), u...)
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// writeDirect appends the request's head and body to b as http1's
// writeRequest writes them (net/http's Request.Write for such a request:
// the canonical names, net/http's User-Agent unless the guest set one, no
// Host, Content-Length, Transfer-Encoding or Trailer of the guest's), and
// reports whether sending it twice is harmless (http1's replayable) and
// whether it asks to close the connection.
func writeDirect(b, method []byte, u plainURL, v *abi.HTTPRequestView) (_ []byte, replayable, close bool) {
	b = append(b, method...)
	b = append(b, ' ')
	if len(u.path) == 0 || u.path[0] == '?' {
		b = append(b, '/') // net/url's RequestURI of an empty path
	}
	b = append(b, u.path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, u.hostport...)
	b = append(b, "\r\n"...)
	ua, hasUA := "Go-http-client/1.1", false
	var name [64]byte
	v.EachHeader(func(k, value []byte) {
		c := canonical(name[:0], k)
		switch string(c) {
		case "User-Agent":
			if !hasUA {
				hasUA = true
				if len(value) > 0 {
					b = append(append(append(b, "User-Agent: "...), value...), "\r\n"...)
				}
			}
			return
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer":
			return
		case "Idempotency-Key", "X-Idempotency-Key":
			replayable = replayable || len(value) > 0
		case "Connection":
			for _, tok := range strings.Split(string(value), ",") {
				close = close || strings.EqualFold(strings.TrimSpace(tok), "close")
			}
		}
		b = append(append(append(append(b, c...), ": "...), value...), "\r\n"...)
	})
	if !hasUA {
		b = append(append(append(b, "User-Agent: "...), ua...), "\r\n"...)
	}
	switch {
	case len(v.Body) > 0:
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(v.Body)), 10)
		b = append(b, "\r\n"...)
	case string(method) == "POST" || string(method) == "PUT" || string(method) == "PATCH":
		b = append(b, "Content-Length: 0\r\n"...)
	}
	b = append(b, "\r\n"...)
	b = append(b, v.Body...)
	switch string(method) {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		replayable = true
	}
	return b, replayable, close
}

// canonical appends name in net/http's canonical form (a token: each word
// upper-case first, lower-case after) to b.
func canonical(b, name []byte) []byte {
	upper := true
	for _, c := range name {
		switch {
		case upper && 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		case !upper && 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		b = append(b, c)
		upper = c == '-'
	}
	return b
}

// plainURL is an http:// URL as parsePlainURL reads it; the slices alias
// the URL.
type plainURL struct {
	hostport   []byte // host, or host:port
	host, port []byte // port empty: none given
	path       []byte // path and query, as sent; an empty path is "/"
}

// parsePlainURL reads s when it is an http:// URL that net/url reads as s
// is written and net/http requests as it is written: a host of letters,
// digits, dots and hyphens, a port of digits, a path of unreserved
// characters, sub-delimiters, ':', '@', '/' and %-escapes, and a query of
// printable characters; no user, no fragment. It reports false for any
// other, which net/url reads.
func parsePlainURL(s []byte) (plainURL, bool) {
	var u plainURL
	rest, ok := bytes.CutPrefix(s, []byte("http://"))
	if !ok {
		return u, false
	}
	end := bytes.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	u.hostport, u.path = rest[:end], rest[end:]
	u.host = u.hostport
	if i := bytes.IndexByte(u.hostport, ':'); i >= 0 {
		u.host, u.port = u.hostport[:i], u.hostport[i+1:]
		if !plainPort(u.port) {
			return u, false
		}
	}
	path, query, _ := bytes.Cut(u.path, []byte("?"))
	return u, plainHost(u.host) && plainPath(path) && plainQuery(query)
}

// plainPort reports whether p is 1 to 5 decimal digits.
func plainPort(p []byte) bool {
	if len(p) == 0 || len(p) > 5 {
		return false
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// plainHost reports whether h is a non-empty name of letters, digits,
// dots and dashes (nothing net/url would rewrite).
func plainHost(h []byte) bool {
	if len(h) == 0 {
		return false
	}
	for _, c := range h {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// plainPath reports whether path holds only unreserved and sub-delim
// characters and well-formed percent escapes.
func plainPath(path []byte) bool {
	for i := 0; i < len(path); i++ {
		switch c := path[i]; {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9':
		case strings.IndexByte("-._~!$&'()*+,;=:@/", c) >= 0:
		case c == '%' && i+2 < len(path) && isHex(path[i+1]) && isHex(path[i+2]):
			i += 2
		default:
			return false
		}
	}
	return true
}

// plainQuery reports whether q has no control, space, non-ASCII or '#'.
func plainQuery(q []byte) bool {
	for _, c := range q {
		if c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// tokenBytes reports whether b is a token (RFC 9110, 5.6.2): a method or a
// header name.
func tokenBytes(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// valueBytesOK reports whether a header value has no control character
// other than tab (what net/http's transport refuses).
func valueBytesOK(b []byte) bool {
	for _, c := range b {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// do performs lk's request on its goroutine and hands over its result.
func (lk *lookup) do() {
	res := lk.op.doDirect(lk)
	done := lk.done
	// Nothing of the record's is kept with the lookup: its context, its
	// callback, its body's watch of the context.
	lk.op, lk.ctx, lk.done = nil, nil, nil
	lk.head.Body = http1.Body{}
	if cap(lk.raw) <= maxKept && cap(lk.req.Wire) <= maxKept {
		lookups.Put(lk)
	}
	done(res)
}

// doDirect performs lk's request and returns its completion.
func (op *httpOp) doDirect(lk *lookup) []byte {
	resp, err := op.plain.Do(lk.ctx, &lk.req, &lk.head)
	if err != nil {
		return lk.failed(nil, err)
	}
	if resp == nil {
		return op.headCompletion(lk)
	}
	if !isRedirect(resp.StatusCode) {
		return lk.failed(resp, nil)
	}
	// The client follows the redirect from this answer, with the request
	// as net/http's way makes it.
	hr, err := op.request(withTimeout(lk.ctx, lk.timeout), lk.raw)
	if err != nil {
		resp.Body.Close()
		return lk.failed(nil, err)
	}
	resp.Request = hr
	c := *op.client
	c.Transport = &answered{first: resp, next: op.client.Transport}
	resp, err = c.Do(hr)
	if err != nil {
		return op.completion(lk.ctx, string(lk.method), string(lk.url), lk.timeout, nil, err)
	}
	return lk.failed(resp, nil)
}

// failed is the completion of lk's request when it failed with err (in
// net/http's words) or was answered in resp, which net/http read.
func (lk *lookup) failed(resp *http.Response, err error) []byte {
	method, u := string(lk.method), string(lk.url)
	if err != nil {
		err = &url.Error{Op: verb(method), URL: u, Err: err}
	}
	return lk.op.completion(lk.ctx, method, u, lk.timeout, resp, err)
}

// headCompletion is the completion of a response read into lk.head: its
// head and its body, read into one buffer sized by Content-Length.
func (op *httpOp) headCompletion(lk *lookup) []byte {
	h := &lk.head
	defer h.Body.Close()
	if h.Size > op.cfg.MaxResponseBytes {
		return op.tooLarge(string(lk.method), string(lk.url), fmt.Sprintf("%d bytes of status line and headers", h.Size))
	}
	room := op.cfg.MaxResponseBytes - h.Size
	if h.ContentLength > room {
		return op.tooLarge(string(lk.method), string(lk.url), fmt.Sprintf("%d bytes of status line and headers, then a body of more than %d", h.Size, room))
	}
	size := 1 + 8 + 4 + int(h.ContentLength)
	for i := range h.Len() {
		name, value := h.Field(i)
		size += 8 + len(name) + len(value)
	}
	b := make([]byte, 1, size)
	b[0] = abi.CompletionOK
	b = abi.AppendHTTPResponseStart(b, h.Status, h.Len())
	for i := range h.Len() {
		name, value := h.Field(i)
		b = abi.AppendHTTPField(b, name, value)
	}
	b = binary.LittleEndian.AppendUint32(b, 0)
	at := len(b)
	if h.ContentLength > 0 {
		var err error
		if b, err = appendBounded(b, &h.Body, h.ContentLength); err != nil {
			return lk.failed(nil, err)
		}
	}
	binary.LittleEndian.PutUint32(b[at-4:at], uint32(len(b)-at))
	return b
}

// verb is net/http's name of method in its errors ("Get").
func verb(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

func isRedirect(status int) bool {
	switch status {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}
