package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
)

// LocalState is one partition's state in a store of its own, for running a
// module on records outside a pipeline (`wasmstream test`): the state a
// worker gives each attempt, with pc's bounds (state.Local: Begin, Commit,
// Close), and the timers it fires (FireDue).
type LocalState struct{ *state.Local }

// OpenLocalState opens an empty state for pc's records in a new temporary
// directory, which Close removes.
func OpenLocalState(pc *config.Pipeline) (*LocalState, error) {
	l, err := state.OpenLocal(stateLimits(pc))
	if err != nil {
		return nil, err
	}
	return &LocalState{l}, nil
}

// stateLimits are pc's bounds on its state.
func stateLimits(pc *config.Pipeline) state.Limits {
	return state.Limits{MaxValueBytes: pc.State.MaxValueBytes, MaxBytes: pc.State.MaxBytes, Changelog: pc.State.Changelog}
}

// maxLocalFirings bounds one FireDue: a round always ends (a firing
// cannot set a timer at or before its own), but a module setting timers
// without end is stopped with an error rather than left to run.
const maxLocalFirings = 100_000

// FireDue fires the timers due by the state's stream time as a pipeline's
// worker does after a decided record (ABI.md §4.2): one call of the
// module's wasmstream_on_timer on in each, in (at, key) order, on input
// topic's partition 0, attempt 1. A firing that succeeds keeps its writes
// (its timer deleted) and its outputs are returned, in order; one that
// fails has its timer deleted and its writes dropped, and is returned
// among errs (a pipeline dead-letters it).
func (l *LocalState) FireDue(ctx context.Context, in *host.Instance, topic string) (outs []abi.Output, errs []error) {
	for range maxLocalFirings {
		due, t, err := l.Due(1)
		if err != nil {
			return outs, append(errs, err)
		}
		if len(due) == 0 {
			return outs, errs
		}
		tm := due[0]
		st := l.Begin()
		f := abi.TimerFiring{At: tm.At, StreamTime: t, Topic: topic, Attempt: 1, Key: tm.Key}
		res := in.ProcessTimer(ctx, &f, nil, st)
		if res.Status != abi.StatusOK || res.Err != nil {
			errs = append(errs, fmt.Errorf("timer (%q, %d): %s: %v", tm.Key, tm.At, res.Status, res.Err))
			st = l.Begin()
		} else {
			outs = append(outs, res.Outputs...)
		}
		st.(host.Timers).DeleteTimer(tm.Key, tm.At)
		l.CommitAt(st, 0, t)
	}
	return outs, append(errs, fmt.Errorf("more than %d timer firings after one record", maxLocalFirings))
}

// AdvanceTo moves the state's stream time to t (milliseconds) as a decided
// record of timestamp t does (never back), for `wasmstream test`'s
// advance_to; FireDue then fires what that made due. It returns the stream
// time.
func (l *LocalState) AdvanceTo(t int64) int64 {
	l.CommitAt(l.Begin(), 0, t)
	return l.StreamTime()
}

// Idle simulates wall of wall-clock time on a caught-up partition under
// timers.idle_advance step, as the host's idle check does
// (scheduler/internal/partition/idle.go): every step, a partition that
// decided nothing for step moves its stream time by step and fires the
// timers due. A partition that decided no record yet has no stream time
// to move. It returns the firings' outputs and failures, and the rounds
// that moved the stream time. Rounds that make nothing due are one move,
// so a long idle spell costs a step per firing, not per round.
func (l *LocalState) Idle(ctx context.Context, in *host.Instance, topic string, wall, step time.Duration) (outs []abi.Output, errs []error, rounds int64) {
	ms := step.Milliseconds()
	for n := int64(wall / step); n > 0 && ms > 0; {
		t := l.StreamTime()
		if t < 0 {
			return outs, errs, rounds
		}
		k := n // no timer: the rest of the rounds fire nothing
		next, err := l.Timers(1)
		if err != nil {
			return outs, append(errs, err), rounds
		}
		if len(next) > 0 {
			// The first round whose stream time reaches the next timer.
			k = min(n, max(1, (next[0].At-t+ms-1)/ms))
		}
		l.Advance(k * ms)
		n, rounds = n-k, rounds+k
		o, e := l.FireDue(ctx, in, topic)
		outs, errs = append(outs, o...), append(errs, e...)
	}
	return outs, errs, rounds
}
