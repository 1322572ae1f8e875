package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/wasmstream/wasmstream/abi"
)

// FaultKind classifies a guest fault. Every fault discards the instance.
type FaultKind string

const (
	FaultTrap       FaultKind = "trap"        // a WebAssembly trap (unreachable, out-of-bounds access, ...)
	FaultExit       FaultKind = "exit"        // the guest exited
	FaultPanic      FaultKind = "panic"       // the guest's language runtime panicked (a Go panic)
	FaultDeadline   FaultKind = "deadline"    // the record deadline interrupted the guest
	FaultOOM        FaultKind = "oom"         // the guest ran out of memory under the page limit
	FaultBadPointer FaultKind = "bad_pointer" // a host function got a pointer/length outside guest memory
	FaultProtocol   FaultKind = "protocol"    // the guest broke the ABI (invalid status, ...)
	FaultCanceled   FaultKind = "canceled"    // the host abandoned the call (shutdown deadline)
)

// Fault is a guest fault. The instance that faulted is dead.
type Fault struct {
	Kind   FaultKind
	Msg    string
	Stderr string // the tail of what the guest wrote to stdout/stderr during the call
}

func (f *Fault) Error() string {
	s := fmt.Sprintf("guest fault (%s): %s", f.Kind, f.Msg)
	if f.Stderr != "" {
		s += "; guest output: " + f.Stderr
	}
	return s
}

// GuestError is a failure the guest reported itself (status retry or fail).
type GuestError struct {
	Status abi.Status
	Msg    string
}

func (e *GuestError) Error() string { return e.Msg }

// Result is the outcome of one call into the guest.
type Result struct {
	Status abi.Status
	// Outputs are what the record emitted, held until now; set only when
	// Status is StatusOK. The caller owns them.
	Outputs []abi.Output
	// Err explains a failure: a *GuestError or a *Fault.
	Err error
}

// Fault returns the fault that ended the call, or nil.
func (r *Result) Fault() *Fault {
	var f *Fault
	if errors.As(r.Err, &f) {
		return f
	}
	return nil
}

// Instance is one instantiation of a module. It is not safe for concurrent
// use: one goroutine at a time calls Process.
type Instance struct {
	m        *Module
	id       uint64
	mod      api.Module
	onRecord api.Function
	stack    []uint64
	ctx      context.Context
	stderr   outputBuffer
	dead     bool

	// The call in progress.
	handle     uint32
	lastHandle uint32
	enc        []byte
	outputs    []abi.Output
	outBytes   int
	errMsg     string
	fault      *Fault
}

type instanceKey struct{}

// ID is unique among the module's instances.
func (in *Instance) ID() uint64 { return in.id }

// Dead reports whether the instance faulted or was closed.
func (in *Instance) Dead() bool { return in.dead }

// MemoryPages is the size of the instance's linear memory in pages.
func (in *Instance) MemoryPages() uint32 {
	if in.dead {
		return 0
	}
	return in.mod.Memory().Size() / 65536
}

// Close releases the instance.
func (in *Instance) Close(ctx context.Context) {
	in.dead = true
	if in.mod != nil {
		in.mod.Close(ctx)
	}
}

// Process calls the guest with rec and returns its outcome. ctx bounds the
// call besides the record deadline: when ctx ends, the guest is interrupted.
func (in *Instance) Process(ctx context.Context, rec *abi.Record) Result {
	if in.dead {
		return Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultProtocol, Msg: "instance is closed"}}
	}
	in.lastHandle++
	if in.lastHandle == 0 {
		in.lastHandle = 1
	}
	in.handle = in.lastHandle
	in.enc = abi.AppendRecord(in.enc[:0], rec)
	in.outputs, in.outBytes, in.errMsg, in.fault = nil, 0, "", nil
	in.stderr.reset()

	// Wait for a core before the deadline starts: with more instances than
	// cores, the Go scheduler cannot preempt a goroutine inside guest code,
	// and calls left runnable would be starved for seconds and time out for
	// no fault of theirs.
	select {
	case in.m.running <- struct{}{}:
	case <-ctx.Done():
		return Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultCanceled, Msg: "call abandoned by the host before it started: " + ctx.Err().Error()}}
	}
	defer func() { <-in.m.running }()
	cctx, cancel := context.WithTimeout(ctx, in.m.limits.RecordTimeout)
	cctx = context.WithValue(cctx, instanceKey{}, in)
	in.stack[0], in.stack[1] = uint64(in.handle), uint64(len(in.enc))
	err := in.onRecord.CallWithStack(cctx, in.stack)
	cerr := cctx.Err()
	cancel()
	in.handle = 0
	if err != nil {
		f := in.classify(err, cerr, ctx.Err())
		in.Close(context.Background())
		return Result{Status: abi.StatusRetry, Err: f}
	}
	st := abi.Status(int32(in.stack[0]))
	switch st {
	case abi.StatusOK:
		out := in.outputs
		in.outputs = nil
		return Result{Status: st, Outputs: out}
	case abi.StatusRetry, abi.StatusFail:
		msg := in.errMsg
		if msg == "" {
			msg = fmt.Sprintf("guest returned %s without an error message", st)
		}
		return Result{Status: st, Err: &GuestError{Status: st, Msg: msg}}
	case abi.StatusPending:
		in.Close(context.Background())
		return Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultProtocol, Msg: "guest returned pending, but it started no asynchronous operation"}}
	default:
		in.Close(context.Background())
		return Result{Status: abi.StatusRetry, Err: &Fault{Kind: FaultProtocol, Msg: fmt.Sprintf("guest returned invalid status %d", int32(st))}}
	}
}

func (in *Instance) classify(err, callCtxErr, parentErr error) *Fault {
	tail := in.stderr.String()
	switch {
	case in.fault != nil:
		in.fault.Stderr = tail
		return in.fault
	case parentErr != nil:
		return &Fault{Kind: FaultCanceled, Msg: "call abandoned by the host: " + parentErr.Error(), Stderr: tail}
	case errors.Is(callCtxErr, context.DeadlineExceeded):
		return &Fault{Kind: FaultDeadline, Msg: fmt.Sprintf("record deadline of %s exceeded; the guest was interrupted (limits.record_timeout)", in.m.limits.RecordTimeout), Stderr: tail}
	case strings.Contains(tail, "out of memory"):
		return &Fault{Kind: FaultOOM, Msg: fmt.Sprintf("guest ran out of memory (limit %d pages = %d MiB, limits.memory_pages)", in.m.limits.MemoryPages, in.m.limits.MemoryPages/16), Stderr: tail}
	case strings.HasPrefix(tail, "panic: ") || strings.Contains(tail, "\npanic: "):
		line := tail[strings.Index(tail, "panic: "):]
		if i := strings.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		return &Fault{Kind: FaultPanic, Msg: "guest " + line, Stderr: tail}
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		return &Fault{Kind: FaultExit, Msg: fmt.Sprintf("guest exited with code %d", exit.ExitCode()), Stderr: tail}
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return &Fault{Kind: FaultTrap, Msg: msg, Stderr: tail}
}

// outputBuffer keeps the first max bytes a guest writes to stdout/stderr
// during a call (where a panic or "out of memory" message starts) and counts
// the rest.
type outputBuffer struct {
	buf     []byte
	max     int
	dropped int
}

func (t *outputBuffer) Write(p []byte) (int, error) {
	n := len(p)
	if room := t.max - len(t.buf); room < len(p) {
		t.dropped += len(p) - max(room, 0)
		p = p[:max(room, 0)]
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

func (t *outputBuffer) reset() { t.buf, t.dropped = t.buf[:0], 0 }

func (t *outputBuffer) String() string {
	s := string(bytes.TrimSpace(bytes.ToValidUTF8(t.buf, []byte("?"))))
	if t.dropped > 0 {
		s += fmt.Sprintf(" …(%d more bytes)", t.dropped)
	}
	return s
}

func (t *outputBuffer) suffix() string {
	if s := t.String(); s != "" {
		return "; guest output: " + s
	}
	return ""
}
