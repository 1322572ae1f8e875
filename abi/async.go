package abi

import (
	"encoding/binary"
	"math"
	"slices"
	"time"
)

// Asynchronous operations (ABI.md, section 7). A guest starts an operation
// with async_start and returns StatusPending; the host performs it
// concurrently and, when it completes, calls wasmstream_on_complete on the
// same instance with the operation's result, readable with result_read.

// ExportOnComplete: (handle i32, op i32, len i32) -> i32 status. Required of
// a module that imports async_start.
const ExportOnComplete = "wasmstream_on_complete"

// Host functions of asynchronous operations.
const (
	// ImportAsyncStart: (handle i32, kind i32, req i32, req_len i32) -> i32:
	// an operation id > 0, or -errno.
	ImportAsyncStart = "async_start"
	// ImportResultRead: (op i32, buf i32, buf_len i32) -> i32: the result's
	// length, or -errno. Valid during the on_complete call of op only.
	ImportResultRead = "result_read"
)

// OpKind names a kind of asynchronous operation. Kinds are only ever added:
// a guest asking for a kind the host does not have gets ErrnoNotSupported,
// never a different behaviour.
type OpKind int32

const (
	// OpTimer completes after a delay. Request: u64 nanoseconds. Result
	// payload: empty.
	OpTimer OpKind = 1
	// OpHTTP performs an HTTP request. Request: HTTPRequest. Result payload:
	// HTTPResponse.
	OpHTTP OpKind = 2
	// OpStateGet reads a key of the record's state (ABI.md §7.3). Request:
	// the key (AppendStateGet). Result payload: the value as nullable bytes,
	// null when the key has none (DecodeStateGetResult).
	OpStateGet OpKind = 3
	// OpStateScan reads a batch of the keys with a prefix (ABI.md §7.3).
	// Request: StateScanRequest. Result payload: scan entries
	// (AppendStateEntry), none when there are no more keys.
	OpStateScan OpKind = 4
	// OpSchemaByID looks a schema up in the schema registry by its id
	// (ABI.md §7.3). Request: AppendSchemaByID. Result payload: the schema
	// definition (AppendSchemaDef).
	OpSchemaByID OpKind = 5
	// OpSchemaBySubject looks up a subject's schema of one version, -1 the
	// latest. Request: AppendSchemaBySubject. Result payload: the subject
	// schema (AppendSubjectSchema).
	OpSchemaBySubject OpKind = 6
	// OpSchemaRegister registers a schema under a subject the pipeline
	// allows. Request: AppendSchemaRegister. Result payload: its id and
	// version (AppendSchemaRegistered).
	OpSchemaRegister OpKind = 7
)

func (k OpKind) String() string {
	switch k {
	case OpTimer:
		return "timer"
	case OpHTTP:
		return "http"
	case OpStateGet:
		return "state_get"
	case OpStateScan:
		return "state_scan"
	case OpSchemaByID:
		return "schema_by_id"
	case OpSchemaBySubject:
		return "schema_by_subject"
	case OpSchemaRegister:
		return "schema_register"
	}
	return "unknown"
}

// Completion codes: the first byte of every result.
const (
	CompletionOK       byte = 0 // the operation succeeded; a kind-specific payload follows
	CompletionError    byte = 1 // the operation failed; a string message follows
	CompletionCanceled byte = 2 // the record ended first (deadline, instance lost); a string message follows. The record's handle is no longer valid.
	CompletionRefused  byte = 3 // the host refused the operation by policy (a host not on the allow list, a body over a limit): retrying will not help; a string message follows
)

// Completion is a decoded result.
type Completion struct {
	Code    byte
	Message string // CompletionError, CompletionCanceled
	Payload []byte // CompletionOK; aliases the input
}

// AppendCompletionOK appends an OK result with payload p.
func AppendCompletionOK(b, p []byte) []byte { return append(append(b, CompletionOK), p...) }

// AppendCompletionError appends a failed (code CompletionError) or canceled
// result with message msg.
func AppendCompletionError(b []byte, code byte, msg string) []byte {
	return appendString(append(b, code), msg)
}

// DecodeCompletion decodes a result.
func DecodeCompletion(b []byte) (Completion, error) {
	d := decoder{b: b}
	if !d.need(1) {
		return Completion{}, d.finish("completion")
	}
	c := Completion{Code: b[0]}
	d.off = 1
	switch c.Code {
	case CompletionOK:
		c.Payload = b[1:len(b):len(b)]
		d.off = len(b)
	case CompletionError, CompletionCanceled, CompletionRefused:
		c.Message = d.str()
	default:
		d.fail("completion code %d", c.Code)
	}
	return c, d.finish("completion")
}

// AppendTimer appends a timer request.
func AppendTimer(b []byte, d time.Duration) []byte {
	return binary.LittleEndian.AppendUint64(b, uint64(max(d, 0)))
}

// DecodeTimer decodes a timer request.
func DecodeTimer(b []byte) (time.Duration, error) {
	d := decoder{b: b}
	v := d.u64()
	if d.err == nil && v > 1<<62 {
		d.fail("timer of %d ns", v)
	}
	return time.Duration(v), d.finish("timer request")
}

// HTTPRequest is an OpHTTP request. Timeout 0 means the pipeline's default;
// a longer one than the pipeline's is cut to it. Every operation also ends
// at the record's deadline.
type HTTPRequest struct {
	Method  string
	URL     string
	Headers []Header
	Body    []byte
	Timeout time.Duration
}

// AppendHTTPRequest appends the encoding of r.
func AppendHTTPRequest(b []byte, r *HTTPRequest) []byte {
	n := 4*4 + len(r.Method) + len(r.URL) + 4 + len(r.Body) + 4
	for _, h := range r.Headers {
		n += 8 + len(h.Key) + len(h.Value)
	}
	b = slices.Grow(b, n)
	b = appendString(b, r.Method)
	b = appendString(b, r.URL)
	b = appendHeaders(b, r.Headers)
	b = appendBytes(b, r.Body)
	return binary.LittleEndian.AppendUint32(b, uint32(min(max(r.Timeout/time.Millisecond, 0), math.MaxUint32)))
}

// DecodeHTTPRequest decodes an HTTP request. The returned slices alias b.
func DecodeHTTPRequest(b []byte) (HTTPRequest, error) {
	var r HTTPRequest
	d := decoder{b: b}
	r.Method = d.str()
	r.URL = d.str()
	r.Headers = d.headers(MaxHeaders)
	r.Body = d.bytes()
	r.Timeout = time.Duration(d.u32()) * time.Millisecond
	return r, d.finish("http request")
}

// HTTPRequestView is an OpHTTP request decoded without a copy or an
// allocation: its slices alias the encoding, and its headers are read with
// Header. The host reads a guest's request this way, for a plain-HTTP
// request writes it on the wire from here (host/asyncop).
type HTTPRequestView struct {
	Method, URL []byte
	Body        []byte // nil: none
	Timeout     time.Duration
	// NumHeaders is the number of headers; Header(i) reads them in order.
	NumHeaders int
	headers    []byte // their encoding, checked
}

// DecodeHTTPRequestView decodes an HTTP request as DecodeHTTPRequest does,
// into a view of b.
func DecodeHTTPRequestView(b []byte) (HTTPRequestView, error) {
	var v HTTPRequestView
	d := decoder{b: b}
	v.Method = d.key()
	v.URL = d.key()
	n := d.u32()
	if d.err == nil && n > MaxHeaders {
		d.fail("%d headers (at most %d)", n, MaxHeaders)
	}
	start := d.off
	for i := uint32(0); i < n && d.err == nil; i++ {
		d.key()
		d.bytes()
	}
	v.NumHeaders, v.headers = int(n), b[start:d.off]
	v.Body = d.bytes()
	v.Timeout = time.Duration(d.u32()) * time.Millisecond
	if err := d.finish("http request"); err != nil {
		return HTTPRequestView{}, err
	}
	return v, nil
}

// EachHeader calls f with each header's name and value (nil: none), in
// order; the slices alias the encoding.
func (v *HTTPRequestView) EachHeader(f func(name, value []byte)) {
	d := decoder{b: v.headers}
	for range v.NumHeaders {
		k := d.key()
		f(k, d.bytes())
	}
}

// HTTPResponse is the payload of a completed OpHTTP operation. Any status
// the server sent is a completion with code CompletionOK; transport errors,
// refusals and timeouts complete with CompletionError.
type HTTPResponse struct {
	Status  int
	Headers []Header
	Body    []byte
}

// AppendHTTPResponse appends the encoding of r.
func AppendHTTPResponse(b []byte, r *HTTPResponse) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(r.Status))
	b = appendHeaders(b, r.Headers)
	return appendBytes(b, r.Body)
}

// AppendHTTPResponseOf appends the encoding of a response whose headers are
// held as net/http holds them (http.Header): the same bytes as
// AppendHTTPResponse of an HTTPResponse with one Header per value, without
// making one.
func AppendHTTPResponseOf(b []byte, status int, headers map[string][]string, body []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(status))
	n := 0
	for _, vs := range headers {
		n += len(vs)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	for k, vs := range headers {
		for _, v := range vs {
			b = appendString(b, k)
			b = appendString(b, v)
		}
	}
	return appendBytes(b, body)
}

// AppendHTTPResponseStart appends the start of a response's encoding, its
// status and header count: headers AppendHTTPField calls follow, then the
// body (u32 length and bytes). A host writes a response as it reads it this
// way, without holding its headers apart.
func AppendHTTPResponseStart(b []byte, status, headers int) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(status))
	return binary.LittleEndian.AppendUint32(b, uint32(headers))
}

// AppendHTTPField appends one header of a response (AppendHTTPResponseStart).
func AppendHTTPField(b, name, value []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(name)))
	b = append(b, name...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// DecodeHTTPResponse decodes an HTTP response. The returned slices alias b.
func DecodeHTTPResponse(b []byte) (HTTPResponse, error) {
	var r HTTPResponse
	err := DecodeHTTPResponseInto(b, &r)
	return r, err
}

// DecodeHTTPResponseInto is DecodeHTTPResponse into r, its headers in the
// array of r.Headers when it has room. The names of the common response
// headers are this package's strings: a Go guest decodes a response
// without an allocation a header (its every allocation costs it ~0.5 µs).
func DecodeHTTPResponseInto(b []byte, r *HTTPResponse) error {
	d := decoder{b: b}
	r.Status = int(int32(d.u32()))
	r.Headers = d.responseHeaders(r.Headers[:0])
	r.Body = d.bytes()
	return d.finish("http response")
}

// responseHeaders reads an HTTP response's headers into the array of hs
// when it has room, their names interned (httpName).
func (d *decoder) responseHeaders(hs []Header) []Header {
	return d.headerList(hs, math.MaxUint32, true)
}

// httpName reads a header name: one of the package's strings for the
// common response headers (httpHeaderName), a new one otherwise.
func (d *decoder) httpName() string {
	n := d.u32()
	if n > math.MaxInt32 {
		d.fail("string length %d", n)
		return ""
	}
	name := d.take(int(n))
	if d.err != nil {
		return ""
	}
	return httpHeaderName(name)
}

// commonHTTPHeaders are the response headers most services send, in
// net/http's canonical form, as the host writes them.
var commonHTTPHeaders = [...]string{
	"Content-Type", "Content-Length", "Date", "Server", "Connection",
	"Cache-Control", "Etag", "Last-Modified", "Expires", "Vary", "Age",
	"Content-Encoding", "Content-Language", "Accept-Ranges", "Location",
	"Retry-After", "Set-Cookie", "Keep-Alive", "Transfer-Encoding",
	"Strict-Transport-Security", "Access-Control-Allow-Origin",
	"X-Content-Type-Options", "X-Request-Id", "Www-Authenticate", "Link",
}

// httpHeaderName returns name as a string: one of commonHTTPHeaders when it
// is one (no allocation), a new one otherwise.
func httpHeaderName(name []byte) string {
	if h, ok := commonHTTPHeaderSet[string(name)]; ok { // no allocation: the compiler looks up without a copy
		return h
	}
	return string(name)
}

// commonHTTPHeaderSet indexes commonHTTPHeaders (one lookup rather than a
// comparison with each).
var commonHTTPHeaderSet = func() map[string]string {
	m := make(map[string]string, len(commonHTTPHeaders))
	for _, h := range commonHTTPHeaders {
		m[h] = h
	}
	return m
}()

// AppendStateGet appends an OpStateGet request: the key, as a string.
func AppendStateGet(b, key []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(key)))
	return append(b, key...)
}

// DecodeStateGet decodes an OpStateGet request. The key aliases b.
func DecodeStateGet(b []byte) ([]byte, error) {
	d := decoder{b: b}
	key := d.key()
	return key, d.finish("state get request")
}

// AppendStateGetResult appends the payload of a completed OpStateGet: the
// value as nullable bytes, null (nil) when the key has no value.
func AppendStateGetResult(b, value []byte) []byte { return appendBytes(b, value) }

// DecodeStateGetResult decodes the payload of a completed OpStateGet: the
// value (aliasing p) and whether the key has one. An empty value is a
// value.
func DecodeStateGetResult(p []byte) ([]byte, bool, error) {
	d := decoder{b: p}
	v := d.bytes()
	if err := d.finish("state get result"); err != nil {
		return nil, false, err
	}
	if v == nil {
		return nil, false, nil
	}
	return v, true, nil
}

// Bounds of an OpStateScan's batch (StateScanRequest.MaxBytes).
const (
	// StateScanDefaultBytes is a batch's bound when the request says 0.
	StateScanDefaultBytes = 64 << 10
	// StateScanMaxBytes caps a batch's bound: a larger request is cut to
	// it. It caps what one state_scan call writes too, whatever its
	// buf_len.
	StateScanMaxBytes = 1 << 20
)

// StateScanRequest is an OpStateScan request: the entries of the keys with
// Prefix that sort after After (every key with the prefix when After is
// empty), in key order, as many whole ones as fit in MaxBytes (0 means
// StateScanDefaultBytes; more than StateScanMaxBytes is cut to it). The
// first entry comes whole even when it alone is larger, so that a scan
// always advances.
type StateScanRequest struct {
	Prefix   []byte
	After    []byte
	MaxBytes uint32
}

// Limit is the batch bound the host applies for r.MaxBytes.
func (r *StateScanRequest) Limit() int {
	switch {
	case r.MaxBytes == 0:
		return StateScanDefaultBytes
	case r.MaxBytes > StateScanMaxBytes:
		return StateScanMaxBytes
	}
	return int(r.MaxBytes)
}

// AppendStateScan appends the encoding of r: prefix and after as strings,
// then max_bytes u32.
func AppendStateScan(b []byte, r *StateScanRequest) []byte {
	b = AppendStateGet(b, r.Prefix)
	b = AppendStateGet(b, r.After)
	return binary.LittleEndian.AppendUint32(b, r.MaxBytes)
}

// DecodeStateScan decodes an OpStateScan request. The slices alias b.
func DecodeStateScan(b []byte) (StateScanRequest, error) {
	var r StateScanRequest
	d := decoder{b: b}
	r.Prefix = d.key()
	r.After = d.key()
	r.MaxBytes = d.u32()
	return r, d.finish("state scan request")
}
