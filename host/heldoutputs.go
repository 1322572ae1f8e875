package host

import (
	"sync/atomic"
	"time"
)

// outputOverhead is what one held output costs besides its encoded bytes:
// the decoded abi.Output and its slice headers.
const outputOverhead = 128

// headerOverhead is what one header of an output costs besides its encoded
// bytes: the decoded abi.Header (40 bytes) and the kgo.RecordHeader it
// becomes (40). An empty header encodes in 8 bytes, so counting the bytes
// alone let 16 MiB of them cost ten times that.
const headerOverhead = 80

// outputCost is what an output of raw encoded bytes and the given number of
// headers counts against limits.max_output_bytes: its bytes and what its
// headers cost once decoded.
func outputCost(raw, headers int) int { return raw + headers*headerOverhead }

// heldOutputs is the engine's account of the bytes of emitted outputs the
// host holds: outputs of records still running or waiting on asynchronous
// operations (recState.outputs), and outputs handed to the caller in a
// Result until it calls Engine.ReleaseOutputs (the scheduler does once the
// broker acknowledged them). emit refuses an output that would take it over
// the bound, so this memory stays bounded whatever the guests do. Safe for
// concurrent use.
type heldOutputs struct {
	max     atomic.Int64 // 0: not accounted
	held    atomic.Int64
	lastLog atomic.Int64 // unix nanoseconds of the last refusal logged
}

// take counts n more bytes, unless that would go over the bound.
func (h *heldOutputs) take(n int64) bool {
	max := h.max.Load()
	if max <= 0 {
		return true
	}
	for {
		cur := h.held.Load()
		if cur+n > max {
			return false
		}
		if h.held.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (h *heldOutputs) release(n int64) {
	if n != 0 {
		h.held.Add(-n)
	}
}

// LimitHeldOutputs bounds the bytes of emitted outputs held across every
// module of the engine (host.max_held_output_bytes); 0 turns accounting off.
// Call it before loading modules: callers then release what Results hand
// them with ReleaseOutputs.
func (e *Engine) LimitHeldOutputs(max int64) { e.held.max.Store(max) }

// HeldOutputBytes is the bytes of outputs held now and the bound.
func (e *Engine) HeldOutputBytes() (held, max int64) { return e.held.held.Load(), e.held.max.Load() }

// ReleaseOutputs gives back a Result's HeldBytes once its outputs are
// acknowledged or dropped.
func (e *Engine) ReleaseOutputs(n int64) { e.held.release(n) }

// holdOutput counts an output emitted by st, of cost bytes (outputCost),
// against the engine's bound; false means the bound is reached and emit
// refuses it. Called by emit on the instance's goroutine.
func (in *Instance) holdOutput(st *recState, cost int) bool {
	return in.hold(st, int64(cost)+outputOverhead, "output refused", cost)
}

// hold counts n more bytes held for st (n < 0 gives bytes back, and always
// succeeds); false means the engine's bound is reached: what refused is
// logged (at most every 5 s) with the bytes asked for.
func (in *Instance) hold(st *recState, n int64, refused string, asked int) bool {
	h := in.m.held
	if h.take(n) {
		if h.max.Load() > 0 {
			st.held += n
		}
		return true
	}
	if now := time.Now().UnixNano(); now-h.lastLog.Load() > int64(5*time.Second) {
		h.lastLog.Store(now)
		held, max := h.held.Load(), h.max.Load()
		in.m.log.Warn(refused+": the host holds its maximum of emitted outputs (host.max_held_output_bytes); the guest's call returns a limit error",
			"held_bytes", held, "max_bytes", max, "bytes", asked)
	}
	return false
}
