package main

// `wasmstream test`'s control lines (conformance/control.go): between
// records, the run's virtual stream time moves (advance_to, advance, idle)
// and fires the timers that makes due, on the records' instance, as a
// pipeline's worker does after a decided record or an idle round; state is
// written (state) and checked (expect_state) in the run's local state.

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/conformance"
	"github.com/wasmstream/wasmstream/internal/termsafe"
)

// maxListedTimers bounds the timers an expect_state reads to compare.
const maxListedTimers = 10_000

// checkControls refuses, before anything runs, the control lines the
// pipeline cannot serve: any without state, idle without
// timers.idle_advance. The error names the line (file:line).
func (s *testSession) checkControls(file string, cases []conformance.Case) error {
	for i := range cases {
		ctl := cases[i].Control
		if ctl == nil {
			continue
		}
		where := fmt.Sprintf("%s:%d: %s", file, cases[i].Line, ctl.Kind)
		if s.ls == nil {
			return fmt.Errorf("%s: pipeline %s keeps no state (state.enabled is false): stream time, timers and state need it", where, s.pc.Name)
		}
		if ctl.Kind == "idle" && s.pc.Timers.IdleAdvance <= 0 {
			return fmt.Errorf("%s: pipeline %s has no timers.idle_advance, so an idle partition's stream time never moves: set timers.idle_advance (e.g. 30s) to simulate idle time, or use advance/advance_to", where, s.pc.Name)
		}
	}
	return nil
}

// runControl runs control line c: it moves the stream time and fires what
// is due, writes the state or checks it.
func (s *testSession) runControl(ctx context.Context, ci int, c *conformance.Case) (testResult, error) {
	ctl := c.Control
	r := testResult{c: c, res: conformance.CaseResult{Decision: conformance.Decision{Outcome: conformance.OutcomeDrop}}}
	switch ctl.Kind {
	case "state":
		if err := s.writeState(ctl); err != nil {
			return r, fmt.Errorf("line %d: %w", c.Line, err)
		}
	case "expect_state":
		r.checked = true
		r.diff = s.checkState(ctl.ExpectState)
		r.stateCheck = true
	default:
		if err := s.moveTime(ctx, c, &r); err != nil {
			return r, err
		}
		if c.Expect != nil {
			r.checked = true
			d := r.res.Decision
			d.Outputs = slices.Clone(r.outs)
			var own []string
			if s.fr != nil {
				own = s.fr.checkOwn(ctx, ci, d.Outputs)
			}
			r.diff = append(c.Expect.Check(d), own...)
		}
	}
	r.streamTime = s.ls.StreamTime()
	return r, nil
}

// moveTime moves the stream time as c says and fires the timers due, on
// the instance the next record would run on; their outputs are r's.
func (s *testSession) moveTime(ctx context.Context, c *conformance.Case, r *testResult) error {
	ctl := c.Control
	in, renewed, err := s.runner.Instance(ctx)
	if err != nil {
		return fmt.Errorf("line %d: %w", c.Line, err)
	}
	r.res.NewInstance = renewed
	var outs []abi.Output
	var errs []error
	switch ctl.Kind {
	case "advance_to":
		s.ls.AdvanceTo(ctl.AdvanceTo)
		outs, errs = s.ls.FireDue(ctx, in, c.Record.Topic)
	case "advance":
		s.ls.AdvanceTo(max(s.ls.StreamTime(), 0) + ctl.Duration.Milliseconds())
		outs, errs = s.ls.FireDue(ctx, in, c.Record.Topic)
	case "idle":
		outs, errs, r.rounds = s.ls.Idle(ctx, in, c.Record.Topic, ctl.Duration, s.pc.Timers.IdleAdvance)
	}
	r.res.Outputs, r.outs = outs, outs
	if len(outs) > 0 {
		r.res.Outcome = conformance.OutcomeOK
	}
	for _, err := range errs {
		r.res.TimerErrors = append(r.res.TimerErrors, err.Error())
	}
	if s.fr != nil && len(outs) > 0 {
		if r.outs, r.outFP, err = s.fr.outputs(ctx, outs); err != nil {
			r.kind = schemaFailed(&r.res, err)
		}
	}
	return nil
}

// writeState writes a state line's puts, then its deletes, as one
// committed write that does not move the stream time.
func (s *testSession) writeState(ctl *conformance.Control) error {
	st := s.ls.Begin()
	for i, e := range ctl.Put {
		if errno := putEntry(st, &e); errno != 0 {
			return fmt.Errorf("state.put[%d]: %s: %w", i, e.Name(), errno)
		}
	}
	for i, e := range ctl.Delete {
		if errno := deleteEntry(st, &e); errno != 0 {
			return fmt.Errorf("state.delete[%d]: %s: %w", i, e.Name(), errno)
		}
	}
	for i, t := range ctl.Timers {
		if errno := st.(host.Timers).SetTimer(t.Key, t.At); errno != 0 {
			return fmt.Errorf("state.timers[%d]: (%q, %d): %w", i, t.Key, t.At, errno)
		}
	}
	s.ls.Commit(st, 0)
	return nil
}

func putEntry(st host.State, e *conformance.StateEntry) abi.Errno {
	if e.Two {
		return st.(host.State2).Put2(e.Key, e.Sub, e.ValueText())
	}
	return st.Put(e.Key, e.ValueText())
}

func deleteEntry(st host.State, e *conformance.StateEntry) abi.Errno {
	if e.Two {
		return st.(host.State2).Delete2(e.Key, e.Sub)
	}
	return st.Delete(e.Key)
}

// checkState compares the state with e, field by field.
func (s *testSession) checkState(e *conformance.ExpectState) []string {
	st := s.ls.Begin()
	get := func(x *conformance.StateEntry) ([]byte, bool, error) {
		var v []byte
		var errno abi.Errno
		if x.Two {
			v, errno = st.(host.State2).Get2(x.Key, x.Sub)
		} else {
			v, errno = st.Get(x.Key)
		}
		switch errno {
		case 0:
			return slices.Clone(v), true, nil
		case abi.ErrnoNotFound:
			return nil, false, nil
		}
		return nil, false, errno
	}
	var timers []conformance.TimerAt
	if e.HasTimers {
		ts, err := s.ls.Timers(maxListedTimers + 1)
		if err != nil {
			return []string{fmt.Sprintf("timers: %v", err)}
		}
		if len(ts) > maxListedTimers {
			return []string{fmt.Sprintf("timers: more than %d set", maxListedTimers)}
		}
		for _, t := range ts {
			timers = append(timers, conformance.TimerAt{Key: t.Key, At: t.At})
		}
	}
	return e.Check(get, timers)
}

// controlText is what a control line did, for the text report.
func controlText(r *testResult) string {
	ctl := r.c.Control
	switch ctl.Kind {
	case "advance_to":
		return fmt.Sprintf("advance_to %d", ctl.AdvanceTo)
	case "advance", "idle":
		return ctl.Kind + " " + ctl.Duration.String()
	case "state":
		return fmt.Sprintf("state: %d put, %d delete, %d timer(s)", len(ctl.Put), len(ctl.Delete), len(ctl.Timers))
	}
	return "expect_state"
}

// writeTestControl prints a control line's run: what it did, the stream
// time after it, the firings' outputs and failures, and its check.
func writeTestControl(w io.Writer, r *testResult, writeOutputs func()) {
	c := r.c
	where := ""
	if c.Name != fmt.Sprintf("line %d", c.Line) {
		where = fmt.Sprintf(" (line %d)", c.Line)
	}
	fmt.Fprintf(w, "── %s%s: %s → stream time %d", termsafe.Line(c.Name), where, controlText(r), r.streamTime)
	if c.Control.Kind == "idle" {
		fmt.Fprintf(w, " (%d idle round(s))", r.rounds)
	}
	fmt.Fprintln(w)
	switch c.Control.Kind {
	case "advance_to", "advance", "idle":
		fmt.Fprintf(w, "  timers fired: %d output(s)\n", len(r.outs))
		writeOutputs()
	case "state":
		for _, e := range c.Control.Put {
			fmt.Fprintf(w, "  state: %s = %s\n", termsafe.Line(e.Name()), show(e.ValueText()))
		}
		for _, e := range c.Control.Delete {
			fmt.Fprintf(w, "  state: %s deleted\n", termsafe.Line(e.Name()))
		}
		for _, t := range c.Control.Timers {
			fmt.Fprintf(w, "  timer: %s at %d\n", show(t.Key), t.At)
		}
	}
	for _, e := range r.res.TimerErrors {
		fmt.Fprintf(w, "  timer failed: %s\n", termsafe.Line(e))
	}
}

// jsonControl puts a control line's run in m: "control" (its kind),
// "stream_time", the idle rounds, and for an expect_state "state_check".
func jsonControl(m map[string]any, r *testResult) {
	ctl := r.c.Control
	m["control"] = ctl.Kind
	m["stream_time"] = r.streamTime
	switch ctl.Kind {
	case "advance_to":
		m["advance_to"] = ctl.AdvanceTo
	case "advance", "idle":
		m[ctl.Kind] = ctl.Duration.String()
	}
	if ctl.Kind == "idle" {
		m["idle_rounds"] = r.rounds
	}
	if ctl.Kind == "state" || ctl.Kind == "expect_state" {
		delete(m, "outcome") // fires nothing
		delete(m, "outputs")
	}
	if r.stateCheck {
		m["state_check"] = map[string]any{"pass": len(r.diff) == 0, "diff": append([]string{}, r.diff...)}
	}
	if ctl.Kind == "state" {
		var st []map[string]any
		for _, e := range ctl.Put {
			sm := map[string]any{}
			jsonBytes(sm, "key", e.Key)
			if e.Two {
				jsonBytes(sm, "sub", e.Sub)
			}
			jsonBytes(sm, "value", e.ValueText())
			st = append(st, sm)
		}
		for _, e := range ctl.Delete {
			sm := map[string]any{"deleted": true}
			jsonBytes(sm, "key", e.Key)
			if e.Two {
				jsonBytes(sm, "sub", e.Sub)
			}
			st = append(st, sm)
		}
		m["state_written"] = st
		var ts []map[string]any
		for _, t := range ctl.Timers {
			tm := map[string]any{"at": t.At}
			jsonBytes(tm, "key", t.Key)
			ts = append(ts, tm)
		}
		if len(ts) > 0 {
			m["timers_set"] = ts
		}
	}
}
