package asyncop

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/http1"
)

// HTTP is the section of the OpHTTP operation (async.http). With no
// AllowHosts every request is refused: a module has no network unless the
// config grants it.
type HTTP struct {
	// AllowHosts are the hosts a guest may call: "name", "name:port" or
	// "*.domain" (any subdomain). Names compare case-insensitively; an entry
	// without a port allows every port.
	AllowHosts []string `koanf:"allow_hosts"`
	// Timeout bounds each request, from start to the end of the body. A
	// guest may ask for less, never more; the record's deadline bounds it
	// too.
	Timeout time.Duration `koanf:"timeout"`
	// ConnectTimeout bounds connecting and the TLS handshake.
	ConnectTimeout time.Duration `koanf:"connect_timeout"`
	// MaxResponseBytes caps a response: its status line, header names and
	// values and body together, as the guest would read them. The
	// transport stops reading headers past it; a longer response completes
	// with an error.
	MaxResponseBytes int64 `koanf:"max_response_bytes"`
	// MaxRequestBytes caps a request body.
	MaxRequestBytes int `koanf:"max_request_bytes"`
}

// Defaults of the HTTP section.
const (
	DefaultHTTPTimeout          = 10 * time.Second
	DefaultHTTPConnectTimeout   = 3 * time.Second
	DefaultHTTPMaxResponseBytes = 1 << 20
	DefaultHTTPMaxRequestBytes  = 1 << 20
)

// SetDefaults sets h's zero fields to their defaults.
func (h *HTTP) SetDefaults() {
	if h.Timeout <= 0 {
		h.Timeout = DefaultHTTPTimeout
	}
	if h.ConnectTimeout <= 0 {
		h.ConnectTimeout = DefaultHTTPConnectTimeout
	}
	if h.MaxResponseBytes <= 0 {
		h.MaxResponseBytes = DefaultHTTPMaxResponseBytes
	}
	if h.MaxRequestBytes <= 0 {
		h.MaxRequestBytes = DefaultHTTPMaxRequestBytes
	}
}

// Check adds a problem for each value of h that cannot work.
func (h *HTTP) Check(prefix string, add func(key, format string, args ...any)) {
	for j, e := range h.AllowHosts {
		if msg := checkAllowHost(e); msg != "" {
			add(fmt.Sprintf("%s.allow_hosts[%d]", prefix, j), "%q: %s", e, msg)
		}
	}
	if h.Timeout < time.Millisecond {
		add(prefix+".timeout", "%s: want at least 1ms", h.Timeout)
	}
	if h.ConnectTimeout < time.Millisecond {
		add(prefix+".connect_timeout", "%s: want at least 1ms", h.ConnectTimeout)
	}
	if h.MaxResponseBytes < 1 || h.MaxResponseBytes > 1<<30 {
		add(prefix+".max_response_bytes", "%d: want 1 to 1 GiB", h.MaxResponseBytes)
	}
	if h.MaxRequestBytes < 1 || h.MaxRequestBytes > 1<<30 {
		add(prefix+".max_request_bytes", "%d: want 1 to 1 GiB", h.MaxRequestBytes)
	}
}

// checkAllowHost checks an allow_hosts entry: "name", "name:port" or
// "*.domain", no scheme and no path.
func checkAllowHost(h string) string {
	switch {
	case h == "":
		return "empty"
	case strings.Contains(h, "://") || strings.ContainsAny(h, "/?#@ "):
		return "want a host name, host:port or *.domain, without scheme or path"
	case h == "*" || (strings.Contains(h, "*") && (!strings.HasPrefix(h, "*.") || strings.Count(h, "*") > 1)):
		return "a wildcard is only allowed as a leading \"*.\" (any subdomain)"
	}
	return ""
}

// Operations makes the OpHTTP operation of one module: its own transport.
func (h *HTTP) Operations(key string, _ Env) map[abi.OpKind]Operation {
	return map[abi.OpKind]Operation{abi.OpHTTP: NewHTTP(*h, key)}
}

// NewHTTP is the OpHTTP operation of cfg (its zero fields take their
// defaults), with key naming the section in refusals
// ("pipelines.lookup.async.http").
func NewHTTP(cfg HTTP, key string) Operation { return newHTTPOp(cfg, key) }

// httpOp performs HTTP requests to allowed hosts.
type httpOp struct {
	cfg    HTTP
	key    string       // the section's key, for refusals
	allow  []allowEntry // cfg.AllowHosts, read once
	client *http.Client
	plain  *http1.Client // the client's transport for http://
}

func newHTTPOp(cfg HTTP, key string) *httpOp {
	cfg.SetDefaults()
	if key == "" {
		key = "async.http"
	}
	op := &httpOp{cfg: cfg, key: key}
	for _, e := range cfg.AllowHosts {
		a := allowEntry{host: strings.ToLower(e)}
		if h, p, err := net.SplitHostPort(e); err == nil {
			a.host, a.port = strings.ToLower(h), p
		}
		op.allow = append(op.allow, a)
	}
	dial := (&net.Dialer{Timeout: cfg.ConnectTimeout, KeepAlive: 30 * time.Second}).DialContext
	tr := &http.Transport{
		Proxy:                 nil, // never from the environment: the allow list is the policy
		DialContext:           dial,
		TLSHandshakeTimeout:   cfg.ConnectTimeout,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
		// Headers count against the response cap: the transport stops
		// reading them (HTTP/1 and HTTP/2) before they could exceed it.
		MaxResponseHeaderBytes: cfg.MaxResponseBytes,
	}
	// http:// goes over connections read and written by the goroutine
	// that asks (RATIONALE.md, "Plain HTTP on the asking goroutine");
	// https:// over net/http's Transport, with HTTP/2.
	plain := &http1.Client{
		Dial:           dial,
		MaxIdlePerHost: tr.MaxIdleConnsPerHost,
		IdleTimeout:    tr.IdleConnTimeout,
		MaxHeaderBytes: cfg.MaxResponseBytes,
	}
	op.plain = plain
	op.client = &http.Client{
		Transport: bySchemeTransport{plain: plain, tls: tr},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > 5 { // via: the requests before this one; five redirects are followed
				return errors.New("stopped after 5 redirects")
			}
			return op.allowed(req.URL)
		},
	}
	return op
}

// bySchemeTransport sends http:// requests with plain and the others with
// tls.
type bySchemeTransport struct {
	plain *http1.Client
	tls   *http.Transport
}

func (t bySchemeTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" {
		return t.plain.RoundTrip(req)
	}
	ctx := req.Context()
	d, ok := http1.RequestDeadline(ctx)
	if cd, has := ctx.Deadline(); !ok || (has && !cd.After(d)) {
		return t.tls.RoundTrip(req)
	}
	// The request's deadline comes before its context's: net/http takes
	// it as a context, canceled once the body is closed.
	dctx, cancel := context.WithDeadline(ctx, d)
	resp, err := t.tls.RoundTrip(req.WithContext(dctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

// cancelOnClose is a response body that cancels its request's context
// when closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func (t bySchemeTransport) CloseIdleConnections() {
	t.plain.CloseIdleConnections()
	t.tls.CloseIdleConnections()
}

// CloseIdleConnections closes the idle connections of op's transport: its
// module closed.
func (op *httpOp) CloseIdleConnections() { op.client.CloseIdleConnections() }

// allowEntry is an allow_hosts entry: its host in lower case ("*.domain"
// for any subdomain) and its port, "" for any.
type allowEntry struct{ host, port string }

// allowed checks u against the allow list.
func (op *httpOp) allowed(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme %q is not allowed (http or https)", u.Scheme)
	}
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if op.allowedBytes([]byte(host), []byte(port)) {
		return nil
	}
	if len(op.cfg.AllowHosts) == 0 {
		return fmt.Errorf("host %s is not allowed: no hosts are (%s.allow_hosts is empty)", net.JoinHostPort(host, port), op.key)
	}
	return fmt.Errorf("host %s is not allowed (%s.allow_hosts: %s)", net.JoinHostPort(host, port), op.key, strings.Join(op.cfg.AllowHosts, ", "))
}

// allowedBytes reports whether the allow list has host (any case) and
// port (empty: 80, http's).
func (op *httpOp) allowedBytes(host, port []byte) bool {
	if len(port) == 0 {
		port = []byte("80")
	}
	for _, e := range op.allow {
		if e.port != "" && e.port != string(port) {
			continue
		}
		if bytes.EqualFold(host, []byte(e.host)) ||
			(strings.HasPrefix(e.host, "*.") && len(host) >= len(e.host)-1 && bytes.EqualFold(host[len(host)-(len(e.host)-1):], []byte(e.host[1:]))) {
			return true
		}
	}
	return false
}

func (op *httpOp) Start(ctx context.Context, raw []byte, done func([]byte)) (string, error) {
	v, err := abi.DecodeHTTPRequestView(raw)
	if err != nil {
		return "", err
	}
	if desc, ok := op.direct(ctx, &v, raw, done); ok {
		return desc, nil
	}
	req, err := abi.DecodeHTTPRequest(raw)
	if err != nil {
		return "", err
	}
	if req.Method == "" {
		req.Method = http.MethodGet
	}
	desc := describe([]byte(req.Method), []byte(req.URL))
	refuse := func(format string, args ...any) (string, error) {
		done(abi.AppendCompletionError(nil, abi.CompletionRefused, "http: "+fmt.Sprintf(format, args...)))
		return desc, nil
	}
	timeout := op.cfg.Timeout
	if req.Timeout > 0 && req.Timeout < timeout {
		timeout = req.Timeout
	}
	hr, err := op.newRequest(withTimeout(ctx, timeout), &req)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			return refuse("bad URL: %v", err)
		}
		return refuse("%v", err)
	}
	if err := op.allowed(hr.URL); err != nil {
		return refuse("%s %s refused: %v", req.Method, req.URL, err)
	}
	if len(req.Body) > op.cfg.MaxRequestBytes {
		return refuse("request body of %d bytes exceeds %s.max_request_bytes (%d)", len(req.Body), op.key, op.cfg.MaxRequestBytes)
	}
	goroutines.Go(func() { done(op.do(hr.Context(), hr, timeout)) })
	return desc, nil
}

// newRequest is req as net/http's request, with ctx. Nothing is sent.
func (op *httpOp) newRequest(ctx context.Context, req *abi.HTTPRequest) (*http.Request, error) {
	// The body is a copy: req's aliases the guest's memory, which the guest
	// goes on writing while the request is sent (one over the limit is
	// refused, and not copied). No body, or an empty one, is
	// http.NoBody (set below), without a reader to make.
	var body io.Reader
	if len(req.Body) > 0 && len(req.Body) <= op.cfg.MaxRequestBytes {
		body = bytes.NewReader(bytes.Clone(req.Body))
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	// The request parses the URL, once: the allow list checks what it
	// will request.
	hr, err := http.NewRequestWithContext(ctx, method, req.URL, body)
	if err != nil {
		return nil, err
	}
	if body == nil {
		hr.Body, hr.ContentLength = http.NoBody, 0
	}
	for _, h := range req.Headers {
		hr.Header.Add(h.Key, string(h.Value))
	}
	return hr, nil
}

// request is the guest's request raw (a copy) as net/http's request, with
// ctx: for a redirect the direct way met.
func (op *httpOp) request(ctx context.Context, raw []byte) (*http.Request, error) {
	req, err := abi.DecodeHTTPRequest(raw)
	if err != nil {
		return nil, err
	}
	return op.newRequest(ctx, &req)
}

// withTimeout is ctx carrying a request's deadline, timeout from now, when
// ctx ends later (a record's deadline; usually it is shorter than a
// request's timeout: limits.record_timeout 5s, async.http.timeout 10s).
// The deadline is a value, not a context of its own with a timer: a plain
// connection takes it as its deadline, and only an https request makes it
// a context (bySchemeTransport).
func withTimeout(ctx context.Context, timeout time.Duration) context.Context {
	d := time.Now().Add(timeout)
	if cd, ok := ctx.Deadline(); ok && !cd.After(d) {
		return ctx
	}
	return http1.WithRequestDeadline(ctx, d)
}

func (op *httpOp) do(ctx context.Context, hr *http.Request, timeout time.Duration) []byte {
	resp, err := op.send(hr)
	return op.completion(ctx, hr.Method, hr.URL.String(), timeout, resp, err)
}

// tooLarge is the completion of a response over max_response_bytes.
func (op *httpOp) tooLarge(method, u, detail string) []byte {
	return abi.AppendCompletionError(nil, abi.CompletionError, fmt.Sprintf("http: %s %s: response over %s.max_response_bytes (%d bytes for the status line, headers and body together): %s", method, u, op.key, op.cfg.MaxResponseBytes, detail))
}

// completion is the completion of the request method u: resp's, or err's
// when it failed.
func (op *httpOp) completion(ctx context.Context, method, u string, timeout time.Duration, resp *http.Response, err error) []byte {
	fail := func(err error) []byte {
		msg := err.Error()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
			msg = fmt.Sprintf("%s %s: timed out (request timeout %s or the record's deadline): %v", method, u, timeout, err)
		}
		return abi.AppendCompletionError(nil, abi.CompletionError, "http: "+msg)
	}
	tooLarge := func(detail string) []byte { return op.tooLarge(method, u, detail) }
	if err != nil {
		if headerLimitErr(err) {
			return tooLarge(fmt.Sprintf("the transport stopped reading its headers (%v)", err))
		}
		if strings.Contains(err.Error(), "connection error: PROTOCOL_ERROR") {
			// An HTTP/2 client ends the connection this way when a header
			// block is far over the limit it advertised.
			err = fmt.Errorf("%w (the server broke HTTP/2, or sent response headers over %s.max_response_bytes (%d))", err, op.key, op.cfg.MaxResponseBytes)
		}
		return fail(err)
	}
	defer resp.Body.Close()
	head := headerSize(resp)
	if head > op.cfg.MaxResponseBytes {
		return tooLarge(fmt.Sprintf("%d bytes of status line and headers", head))
	}
	room := op.cfg.MaxResponseBytes - head
	// The completion is encoded first with a null body, whose length the
	// body read into the same buffer then replaces: one allocation, sized
	// by Content-Length when the server sends one within the cap (and a
	// byte more, where the read meets the end of the body).
	hint := int64(512)
	if resp.ContentLength >= 0 && resp.ContentLength <= room {
		hint = resp.ContentLength + 1
	}
	vals := 0
	for _, vs := range resp.Header {
		vals += len(vs)
	}
	b := make([]byte, 1, 1+4+4+int(head)+8*vals+4+int(hint))
	b[0] = abi.CompletionOK
	b = abi.AppendHTTPResponseOf(b, resp.StatusCode, resp.Header, nil)
	at := len(b)
	b, err = appendBounded(b, resp.Body, room)
	if err != nil {
		return fail(err)
	}
	n := int64(len(b) - at)
	if n > room {
		return tooLarge(fmt.Sprintf("%d bytes of status line and headers, then a body of more than %d", head, room))
	}
	binary.LittleEndian.PutUint32(b[at-4:at], uint32(n))
	return b
}

// send is op.client.Do(hr). A plain-HTTP request goes to its connection
// directly: the client, with its copies of the request's headers for
// redirects, is needed only when the answer is a redirect, which it then
// follows from that answer as it would have.
func (op *httpOp) send(hr *http.Request) (*http.Response, error) {
	if hr.URL.Scheme != "http" || hr.URL.User != nil {
		// The client sends a URL's user and password as Basic
		// authentication; the connection would not.
		return op.client.Do(hr)
	}
	resp, err := op.plain.RoundTrip(hr)
	if err != nil {
		// What the client would have returned.
		verb := "Get"
		if hr.Method != "" {
			verb = hr.Method[:1] + strings.ToLower(hr.Method[1:])
		}
		return nil, &url.Error{Op: verb, URL: hr.URL.Redacted(), Err: err}
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		c := *op.client
		c.Transport = &answered{first: resp, next: op.client.Transport}
		return c.Do(hr)
	}
	return resp, nil
}

// answered is a transport whose first request was answered already.
type answered struct {
	first *http.Response
	next  http.RoundTripper
}

func (a *answered) RoundTrip(req *http.Request) (*http.Response, error) {
	if resp := a.first; resp != nil {
		a.first = nil
		return resp, nil
	}
	return a.next.RoundTrip(req)
}

// appendBounded appends what r reads to b until io.EOF or until it has
// appended more than max bytes (max+1 at most: the caller refuses those).
// It grows b by doubling, never past max+1 bytes appended.
func appendBounded(b []byte, r io.Reader, max int64) ([]byte, error) {
	start := len(b)
	for {
		got := int64(len(b) - start)
		if got > max {
			return b, nil
		}
		left := max + 1 - got
		if len(b) == cap(b) {
			grow := int64(cap(b))
			if grow < 512 {
				grow = 512
			}
			if grow > left {
				grow = left
			}
			b = append(b[:cap(b)], make([]byte, grow)...)[:len(b)]
		}
		spare := b[len(b):cap(b)]
		if int64(len(spare)) > left {
			spare = spare[:left]
		}
		n, err := r.Read(spare)
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// headerSize is what a response's status line and headers count against
// max_response_bytes: the protocol and status, and every header name and
// value.
func headerSize(resp *http.Response) int64 {
	n := int64(len(resp.Proto) + 1 + len(resp.Status))
	for k, vs := range resp.Header {
		for _, v := range vs {
			n += int64(len(k) + len(v))
		}
	}
	return n
}

// headerLimitErr reports whether err is the transport refusing response
// headers over Transport.MaxResponseHeaderBytes (HTTP/1 or HTTP/2); net/http
// has no sentinel for either.
func headerLimitErr(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "server response headers exceeded") || strings.Contains(msg, "header list larger than")
}
