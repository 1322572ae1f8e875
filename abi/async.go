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
)

func (k OpKind) String() string {
	switch k {
	case OpTimer:
		return "timer"
	case OpHTTP:
		return "http"
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
	r.Headers = d.headers()
	r.Body = d.bytes()
	r.Timeout = time.Duration(d.u32()) * time.Millisecond
	return r, d.finish("http request")
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

// DecodeHTTPResponse decodes an HTTP response. The returned slices alias b.
func DecodeHTTPResponse(b []byte) (HTTPResponse, error) {
	var r HTTPResponse
	d := decoder{b: b}
	r.Status = int(int32(d.u32()))
	r.Headers = d.headers()
	r.Body = d.bytes()
	return r, d.finish("http response")
}
