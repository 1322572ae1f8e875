//go:build !wasip1

package guest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

// Result is what Run observed: the outputs a record emitted (as the host
// would hold them) and its outcome.
type Result struct {
	Outputs []abi.Output
	Status  abi.Status
	Err     error
}

type collector struct{ out []abi.Output }

func (c *collector) Emit(o Output) error {
	ao := toABIOutput(&o)
	// Round-trip through the wire encoding, as the host would, so a test sees
	// exactly what the host would produce.
	got, err := abi.DecodeOutput(abi.AppendOutput(nil, &ao))
	if err != nil {
		return err
	}
	c.out = append(c.out, got)
	return nil
}

// Run processes r with the registered processor, on the host, without a
// WASM runtime. The record goes through the ABI encoding first, as it would
// in the host. Asynchronous operations are performed for real, one after
// the other in the order they were started: timers sleep and HTTP requests
// go out with net/http (point them at an httptest server). Use it in a
// processor's unit tests.
func Run(r abi.Record) Result {
	if processor == nil {
		return Result{Status: abi.StatusFail, Err: fmt.Errorf("guest: no processor registered")}
	}
	if r.Attempt == 0 {
		r.Attempt = 1
	}
	ar, err := abi.DecodeRecord(abi.AppendRecord(nil, &r))
	if err != nil {
		return Result{Status: abi.StatusFail, Err: err}
	}
	var rec Record
	fromABIRecord(&ar, &rec)
	c := &collector{}
	lastHandle++
	h := lastHandle
	curHandle = h
	err = processor(&rec, c)
	curHandle = 0
	st, msg := decide(h, err)
	for st == abi.StatusPending {
		op := queued[0]
		queued = queued[1:]
		if calls[h] == nil || !calls[h].has(op.id) {
			continue
		}
		st, msg = complete(h, op.id, perform(op))
	}
	queued = nil
	endState(st)
	res := Result{Status: st}
	if st == abi.StatusOK {
		res.Outputs = c.out
	} else {
		res.Err = fmt.Errorf("%s", msg)
		if err != nil && !isPending(err) {
			res.Err = err
		}
	}
	return res
}

func isPending(err error) bool { return err == Pending }

type queuedOp struct {
	id     uint32
	kind   abi.OpKind
	req    []byte
	result []byte // a state or schema operation's, read at start (state_host.go, schema_host.go)
}

var (
	lastHandle, lastOp uint32
	queued             []queuedOp
)

func startOp(handle uint32, kind abi.OpKind, req []byte) (uint32, error) {
	var result []byte
	switch kind {
	case abi.OpTimer, abi.OpHTTP:
	case abi.OpStateGet, abi.OpStateScan:
		var err error
		if result, err = startStateOp(kind, req); err != nil {
			return 0, err
		}
	case abi.OpSchemaByID, abi.OpSchemaBySubject, abi.OpSchemaRegister:
		var err error
		if result, err = startSchemaOp(kind, req); err != nil {
			return 0, err
		}
	default:
		return 0, abi.ErrnoNotSupported
	}
	lastOp++
	queued = append(queued, queuedOp{id: lastOp, kind: kind, req: bytes.Clone(req), result: result})
	return lastOp, nil
}

// perform runs an operation on the host, the way the wasmstream host would
// (without its allow list).
func perform(op queuedOp) []byte {
	fail := func(err error) []byte {
		return abi.AppendCompletionError(nil, abi.CompletionError, op.kind.String()+": "+err.Error())
	}
	if op.result != nil {
		return op.result
	}
	switch op.kind {
	case abi.OpTimer:
		d, err := abi.DecodeTimer(op.req)
		if err != nil {
			return fail(err)
		}
		time.Sleep(d)
		return abi.AppendCompletionOK(nil, nil)
	default:
		req, err := abi.DecodeHTTPRequest(op.req)
		if err != nil {
			return fail(err)
		}
		if req.Method == "" {
			req.Method = http.MethodGet
		}
		timeout := req.Timeout
		if timeout == 0 {
			timeout = 10 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		hr, err := http.NewRequestWithContext(ctx, req.Method, req.URL, bytes.NewReader(req.Body))
		if err != nil {
			return fail(err)
		}
		for _, h := range req.Headers {
			hr.Header.Add(h.Key, string(h.Value))
		}
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			return fail(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return fail(err)
		}
		out := abi.HTTPResponse{Status: resp.StatusCode, Body: body}
		for k, vs := range resp.Header {
			for _, v := range vs {
				out.Headers = append(out.Headers, abi.Header{Key: k, Value: []byte(v)})
			}
		}
		return abi.AppendHTTPResponse([]byte{abi.CompletionOK}, &out)
	}
}

// Log prints the message on the host (tests).
func Log(level int32, msg string) { fmt.Printf("guest log [%d]: %s\n", level, msg) }
