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

// Op is an asynchronous operation whose result is a T.
type Op[T any] struct {
	kind   abi.OpKind
	req    []byte
	decode func(payload []byte) (T, error)
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
	return Op[struct{}]{kind: abi.OpTimer, req: abi.AppendTimer(nil, d),
		decode: func([]byte) (struct{}, error) { return struct{}{}, nil }}
}

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

// HTTP performs req.
func HTTP(req HTTPRequest) Op[*HTTPResponse] {
	ar := abi.HTTPRequest{Method: req.Method, URL: req.URL, Headers: req.Headers, Body: req.Body, Timeout: req.Timeout}
	return Op[*HTTPResponse]{kind: abi.OpHTTP, req: abi.AppendHTTPRequest(nil, &ar), decode: decodeHTTP}
}

// Get performs a GET of url.
func Get(url string) Op[*HTTPResponse] { return HTTP(HTTPRequest{Method: "GET", URL: url}) }

func decodeHTTP(p []byte) (*HTTPResponse, error) {
	r, err := abi.DecodeHTTPResponse(p)
	if err != nil {
		return nil, err
	}
	return &HTTPResponse{Status: r.Status, Headers: r.Headers, Body: r.Body}, nil
}

// Await starts op and returns Pending, which the processing function (or a
// continuation) returns. then is called with op's result when it completes.
// If op cannot be started, Await returns why instead, and then is never
// called; a request the host refuses whatever the attempt (malformed, an
// unknown kind, a state key refused) is a Terminal error.
func Await[T any](op Op[T], then func(T, error) error) error {
	if curHandle == 0 {
		return Terminal(errors.New("guest: Await called outside a record's processing"))
	}
	id, err := startOp(curHandle, op.kind, op.req)
	if err != nil {
		switch {
		case errors.Is(err, abi.ErrnoBadEncoding), errors.Is(err, abi.ErrnoNotSupported),
			errors.Is(err, abi.ErrnoTooLarge), errors.Is(err, abi.ErrnoWrongKey), errors.Is(err, abi.ErrnoNoState):
			// Retrying the same request cannot help.
			err = Terminal(err)
		}
		return fmt.Errorf("guest: start %s operation: %w", op.kind, err)
	}
	pc := calls[curHandle]
	if pc == nil {
		pc = &pendingCall{}
		pc.ops = pc.inline[:0]
		calls[curHandle] = pc
	}
	pc.add(id, func(c abi.Completion) error {
		var v T
		var err error
		if c.Code == abi.CompletionOK {
			v, err = op.decode(c.Payload)
		} else {
			err = &OpError{Op: op.kind.String(), Msg: c.Message, Refused: c.Code == abi.CompletionRefused}
		}
		return then(v, err)
	})
	return Pending
}

type opCallback func(abi.Completion) error

// pendingCall is a record waiting on operations: most wait on one or two,
// so they are a short slice (ABI.md: at most async.max_per_record).
type pendingCall struct {
	ops    []pendingOp
	inline [2]pendingOp
}

type pendingOp struct {
	id uint32
	cb opCallback
}

func (pc *pendingCall) add(id uint32, cb opCallback) {
	pc.ops = append(pc.ops, pendingOp{id, cb})
}

// take removes the continuation of operation id and returns it (nil if the
// record has none).
func (pc *pendingCall) take(id uint32) opCallback {
	for i, o := range pc.ops {
		if o.id == id {
			pc.ops = append(pc.ops[:i], pc.ops[i+1:]...)
			pc.ops[len(pc.ops):cap(pc.ops)][0] = pendingOp{} // drop the reference
			return o.cb
		}
	}
	return nil
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
)

// decide turns what the processor or a continuation returned for handle into
// the status the host gets, and an error message.
func decide(handle uint32, err error) (abi.Status, string) {
	if errors.Is(err, Pending) {
		if pc := calls[handle]; pc != nil && len(pc.ops) > 0 {
			return abi.StatusPending, ""
		}
		err = Terminal(errors.New("guest: returned Pending, but no asynchronous operation is outstanding"))
	}
	if len(calls) > 0 {
		delete(calls, handle) // operations still outstanding are canceled by the host
	}
	if err != nil {
		return status(err), err.Error()
	}
	return abi.StatusOK, ""
}

// complete delivers a result to its continuation.
func complete(handle, op uint32, result []byte) (abi.Status, string) {
	pc := calls[handle]
	var cb opCallback
	if pc != nil {
		cb = pc.take(op)
	}
	c, err := abi.DecodeCompletion(result)
	if cb == nil || (err == nil && c.Code == abi.CompletionCanceled) {
		// A record that already ended: forget it once nothing is outstanding.
		if pc != nil && len(pc.ops) == 0 {
			delete(calls, handle)
		}
		return abi.StatusFail, "guest: completion of an operation of a record that ended"
	}
	if err != nil {
		delete(calls, handle)
		return abi.StatusFail, err.Error()
	}
	curHandle = handle
	err = cb(c)
	curHandle = 0
	return decide(handle, err)
}
