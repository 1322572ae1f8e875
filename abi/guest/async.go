package guest

import (
	"errors"
	"fmt"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

// Asynchronous operations.
//
// A processor that needs I/O does not block (a Go guest cannot block inside
// an export while the host waits): it starts the operation with Await and
// returns what Await returned. The host performs the operation while the
// instance takes other records, and calls the continuation, on the same
// instance, with the result:
//
//	guest.Process(func(r *guest.Record, out guest.Emitter) error {
//		return guest.Await(guest.Get("http://users.internal/users/"+string(r.Key)),
//			func(resp *guest.HTTPResponse, err error) error {
//				if err != nil {
//					return err // retried
//				}
//				return out.Emit(guest.Output{Key: r.Key, Value: resp.Body})
//			})
//	})
//
// The continuation decides the record as the processing function would: nil
// succeeds, an error fails, and another Await keeps it waiting (chaining). r
// and out stay valid until the record is decided. The record fails at its
// deadline (limits.record_timeout) if it is not decided by then.
//
// To run several operations at once, call Await for each and return Pending
// from every continuation but the one that decides; the record is decided by
// the first continuation that returns something other than Pending, and the
// operations still outstanding then are canceled.

// Pending is returned by Await: the record waits on an operation. A
// continuation may return it to keep waiting on other operations it started.
var Pending = errors.New("guest: the record waits on an asynchronous operation")

// Op is an asynchronous operation whose result is a T. It holds what it
// was made from (an HTTP request's URL, headers and body) until Await,
// which encodes and hands it over.
type Op[T any] struct {
	kind abi.OpKind
	req  []byte        // the request, encoded: the state operations
	http HTTPRequest   // OpHTTP's request, encoded by Await
	d    time.Duration // OpTimer's duration
}

// OpError is the failure of an operation, as the host reported it: refused
// (a host not on the allow list), timed out, or failed in transport.
type OpError struct {
	Op  string // "http", "timer"
	Msg string
	// Refused: the host refused the operation by policy (a host not on the
	// allow list, a body over a limit). Retrying will not help.
	Refused bool
}

func (e *OpError) Error() string { return e.Msg }

// IsRefused reports whether err is an operation the host refused by policy.
func IsRefused(err error) bool {
	var oe *OpError
	return errors.As(err, &oe) && oe.Refused
}

// Timer completes after d.
func Timer(d time.Duration) Op[struct{}] {
	return Op[struct{}]{kind: abi.OpTimer, d: d}
}

func decodeTimer([]byte) (struct{}, error) { return struct{}{}, nil }

// HTTPRequest is an HTTP request. Only hosts the pipeline's configuration
// allows (async.http.allow_hosts) can be reached; the refusal of any other
// arrives as the operation's error.
type HTTPRequest struct {
	Method  string // "" is GET
	URL     string
	Headers []Header
	Body    []byte
	// Timeout, when set, shortens the pipeline's request timeout.
	Timeout time.Duration
}

// HTTPResponse is a response, whatever its status code: check Status.
type HTTPResponse struct {
	Status  int
	Headers []Header
	Body    []byte
}

// Header returns the first value of the response header named key
// (canonical form, e.g. "Content-Type").
func (r *HTTPResponse) Header(key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// HTTP performs req. The request's headers and body are read when the
// operation is awaited: Await copies them, and they may be reused once it
// returns.
func HTTP(req HTTPRequest) Op[*HTTPResponse] {
	return Op[*HTTPResponse]{kind: abi.OpHTTP, http: req}
}

// Get performs a GET of url.
func Get(url string) Op[*HTTPResponse] { return HTTP(HTTPRequest{Method: "GET", URL: url}) }

// decodedResponse is a response and room for its headers, made in one
// allocation (every allocation costs a Go guest ~0.5 µs).
type decodedResponse struct {
	r    HTTPResponse
	hdrs [8]Header
}

func decodeHTTP(p []byte) (*HTTPResponse, error) {
	d := new(decodedResponse)
	ar := abi.HTTPResponse{Headers: d.hdrs[:0]}
	if err := abi.DecodeHTTPResponseInto(p, &ar); err != nil {
		return nil, err
	}
	d.r = HTTPResponse{Status: ar.Status, Headers: ar.Headers, Body: ar.Body}
	return &d.r, nil
}

// Await starts op and returns Pending, which the processing function (or a
// continuation) returns. then is called with op's result when it completes.
// If op cannot be started, Await returns why instead, and then is never
// called; a request the host refuses whatever the attempt (malformed, an
// unknown kind, a state key refused) is a Terminal error. The request is
// copied: what op was made from may be reused once Await returns.
func Await[T any](op Op[T], then func(T, error) error) error {
	if curHandle == 0 {
		return Terminal(errors.New("guest: Await called outside a record's processing"))
	}
	req := op.req
	switch op.kind {
	case abi.OpHTTP:
		ar := abi.HTTPRequest{Method: op.http.Method, URL: op.http.URL, Headers: op.http.Headers, Body: op.http.Body, Timeout: op.http.Timeout}
		opBuf = abi.AppendHTTPRequest(opBuf[:0], &ar)
		req = opBuf
	case abi.OpTimer:
		opBuf = abi.AppendTimer(opBuf[:0], op.d)
		req = opBuf
	}
	id, err := startOp(curHandle, op.kind, req)
	if err != nil {
		switch {
		case errors.Is(err, abi.ErrnoBadEncoding), errors.Is(err, abi.ErrnoNotSupported),
			errors.Is(err, abi.ErrnoTooLarge), errors.Is(err, abi.ErrnoWrongKey), errors.Is(err, abi.ErrnoNoState):
			// Retrying the same request cannot help.
			err = Terminal(err)
		}
		return fmt.Errorf("guest: start %s operation: %w", op.kind, err)
	}
	pc := pendingOf(curHandle)
	if pc == nil {
		pc = newPendingCall()
		calls[curHandle] = pc
		seenHandle, seenCall = curHandle, pc
	}
	// then is kept as it is (a func value goes into an interface without an
	// allocation) and called by deliver, which knows each kind's T.
	pc.ops = append(pc.ops, pendingOp{id: id, kind: op.kind, then: then})
	return Pending
}

// opBuf is where Await encodes a request: the host copies it at
// async_start.
var opBuf []byte

// deliver calls the continuation of o with the result c. An operation's
// kind fixes its result type (the constructors above are the only way to
// make an Op), so o.then is a func(T, error) error of that kind's T.
func deliver(o pendingOp, c abi.Completion) error {
	switch o.kind {
	case abi.OpHTTP:
		return settle(o, c, decodeHTTP)
	case abi.OpTimer:
		return settle(o, c, decodeTimer)
	case abi.OpStateGet:
		return settle(o, c, decodeStateValue)
	case abi.OpStateScan:
		return settle(o, c, decodeStateBatch)
	case abi.OpSchemaByID:
		return settle(o, c, decodeSchema)
	case abi.OpSchemaBySubject:
		return settle(o, c, decodeSubjectSchema)
	case abi.OpSchemaRegister:
		return settle(o, c, decodeRegistered)
	}
	return Terminal(fmt.Errorf("guest: completion of an operation of kind %s", o.kind))
}

func settle[T any](o pendingOp, c abi.Completion, decode func([]byte) (T, error)) error {
	var v T
	var err error
	if c.Code == abi.CompletionOK {
		v, err = decode(c.Payload)
	} else {
		err = &OpError{Op: o.kind.String(), Msg: c.Message, Refused: c.Code == abi.CompletionRefused}
	}
	return o.then.(func(T, error) error)(v, err)
}

// pendingCall is a record waiting on operations: most wait on one or two,
// so they are a short slice (ABI.md: at most async.max_per_record). It
// also holds what the record keeps while it waits (kept: its buffer and
// decoded form, in a Wasm guest), which go back to be reused, with the
// pendingCall, once the record is decided (recycle).
type pendingCall struct {
	ops    []pendingOp
	inline [2]pendingOp
	kept   kit
}

type pendingOp struct {
	id   uint32
	kind abi.OpKind
	then any // func(T, error) error
}

// kit is what a record is decoded into: its buffer, the Record and its
// headers' array.
type kit struct {
	buf  []byte
	rec  *Record
	hdrs []Header
}

// spareCalls and spareKits are those of decided records, reused by the
// next records that wait: as many as were ever waiting at once.
var (
	spareCalls []*pendingCall
	spareKits  []kit
)

func newPendingCall() *pendingCall {
	if n := len(spareCalls); n > 0 {
		pc := spareCalls[n-1]
		spareCalls[n-1] = nil
		spareCalls = spareCalls[:n-1]
		return pc
	}
	pc := &pendingCall{}
	pc.ops = pc.inline[:0]
	return pc
}

// forget drops the record handle's pendingCall, once the record is
// decided, and keeps it and the record's kit for reuse: the record's r
// and its slices were the processor's only until then.
func forget(handle uint32) {
	pc := pendingOf(handle)
	if pc == nil {
		return
	}
	delete(calls, handle)
	seenCall = nil
	if pc.kept.rec != nil {
		spareKits = append(spareKits, pc.kept)
	}
	clear(pc.inline[:])
	*pc = pendingCall{}
	pc.ops = pc.inline[:0]
	spareCalls = append(spareCalls, pc)
}

// take removes operation id and returns it (ok false if the record has
// none).
func (pc *pendingCall) take(id uint32) (pendingOp, bool) {
	for i, o := range pc.ops {
		if o.id == id {
			pc.ops = append(pc.ops[:i], pc.ops[i+1:]...)
			pc.ops[len(pc.ops):cap(pc.ops)][0] = pendingOp{} // drop the reference
			return o, true
		}
	}
	return pendingOp{}, false
}

// has reports whether operation id is outstanding.
func (pc *pendingCall) has(id uint32) bool {
	for _, o := range pc.ops {
		if o.id == id {
			return true
		}
	}
	return false
}

var (
	curHandle uint32 // the record of the call in progress; 0 outside calls
	calls     = map[uint32]*pendingCall{}
	// seenHandle's entry in calls, when seenCall is set: a record's entry
	// is asked for several times in a row (by Await, decide and the end
	// of its call; by a completion and the decision after it), and a map
	// operation costs a Go guest ~0.3 µs.
	seenHandle uint32
	seenCall   *pendingCall
)

// pendingOf returns the entry of handle in calls, nil if it has none.
func pendingOf(handle uint32) *pendingCall {
	if seenCall != nil && handle == seenHandle {
		return seenCall
	}
	pc := calls[handle]
	if pc != nil {
		seenHandle, seenCall = handle, pc
	}
	return pc
}

// decide turns what the processor or a continuation returned for handle into
// the status the host gets, and an error message.
func decide(handle uint32, err error) (abi.Status, string) {
	if errors.Is(err, Pending) {
		if pc := pendingOf(handle); pc != nil && len(pc.ops) > 0 {
			return abi.StatusPending, ""
		}
		err = Terminal(errors.New("guest: returned Pending, but no asynchronous operation is outstanding"))
	}
	if len(calls) > 0 {
		forget(handle) // operations still outstanding are canceled by the host
	}
	if err != nil {
		return status(err), err.Error()
	}
	return abi.StatusOK, ""
}

// complete delivers a result to its continuation.
func complete(handle, op uint32, result []byte) (abi.Status, string) {
	pc := pendingOf(handle)
	var o pendingOp
	var ok bool
	if pc != nil {
		o, ok = pc.take(op)
	}
	c, err := abi.DecodeCompletion(result)
	if !ok || (err == nil && c.Code == abi.CompletionCanceled) {
		// A record that already ended: forget it once nothing is outstanding.
		if pc != nil && len(pc.ops) == 0 {
			forget(handle)
		}
		return abi.StatusFail, "guest: completion of an operation of a record that ended"
	}
	if err != nil {
		forget(handle)
		return abi.StatusFail, err.Error()
	}
	curHandle = handle
	err = deliver(o, c)
	curHandle = 0
	return decide(handle, err)
}
