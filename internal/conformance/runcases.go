package conformance

import (
	"context"
	"fmt"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
)

// CaseRunner runs records on a module one at a time, as a pipeline's
// worker would: on one instance (a new one after a fault discards it),
// each record in full — its asynchronous operations answered and its
// continuations delivered — before the next. Not safe for concurrent use.
type CaseRunner struct {
	Engine *host.Engine // the module's: a record's held outputs are given back to it
	Module *host.Module
	// Fake answers the module's HTTP requests from each record's Case.HTTP
	// (a request past them is refused, with why); it must be the module's
	// OpHTTP operation (AsyncConfig.Operations). Nil: the module's own HTTP
	// operation answers (real requests, as the config allows).
	Fake *FakeHTTP
	// State, when set, gives each record's attempt its state (nil: the
	// state_* functions return no_state); keep is called with a succeeded
	// record's state and returns the changelog records its writes make.
	State func() host.State
	Keep  func(st host.State, offset, timestamp int64) []abi.Output
	// Fire, when set, fires the timers a succeeded record made due (ABI.md
	// §4.2) on the record's instance, as a pipeline does before its next
	// record: their outputs join the record's, and a firing that fails is
	// one of its TimerErrors.
	Fire func(ctx context.Context, in *host.Instance, topic string) ([]abi.Output, []error)

	in *host.Instance
}

// NoAnswer is the fake's answer to a request the record's vectors do not
// answer: a refusal that says what to do.
const NoAnswer = "no answer for this request: give the record's answers in its \"http\" list, or grant the host in the config (async.http.allow_hosts) to call a real service"

// CaseResult is how one record ended.
type CaseResult struct {
	Decision
	// Changelog are the state writes of a succeeded record, as changelog
	// records.
	Changelog []abi.Output
	// TimerErrors are the failures of the timer firings the record made
	// due (their outputs are among the record's; Fire).
	TimerErrors []string
	// Requests are the HTTP requests the record started ("GET url"),
	// answered by the fake.
	Requests []string
	// NewInstance: the record ran on a new instance (the previous one
	// faulted); Instance is its id.
	NewInstance bool
	Instance    uint64
}

// Run runs one record to its decision. tag identifies it to the module's
// Observer. The error is for an instance that cannot be made.
func (r *CaseRunner) Run(ctx context.Context, c *Case, tag any) (CaseResult, error) {
	var res CaseResult
	var err error
	if _, res.NewInstance, err = r.Instance(ctx); err != nil {
		return res, err
	}
	res.Instance = r.in.ID()
	var st host.State
	if r.State != nil {
		st = r.State()
	}
	rec := c.Record
	out := r.in.ProcessState(ctx, &rec, tag, st)
	answers := c.HTTP
	for out.Status == abi.StatusPending {
		if r.Fake != nil {
			for _, op := range r.Fake.Take() {
				res.Requests = append(res.Requests, op.Method()+" "+op.Req.URL)
				if len(answers) == 0 {
					op.Complete(abi.AppendCompletionError(nil, abi.CompletionRefused, NoAnswer))
					continue
				}
				op.Complete(answers[0].Result())
				answers = answers[1:]
			}
		}
		wait := time.Until(r.in.NextDeadline())
		if wait <= 0 || wait > 50*time.Millisecond {
			wait = 50 * time.Millisecond // the fake's requests started in continuations are answered in the next round
		}
		t := time.NewTimer(wait)
		select {
		case <-r.in.Ready():
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return res, fmt.Errorf("record %s: %w", c.Name, ctx.Err())
		}
		for _, d := range r.in.Poll(ctx, time.Now()) {
			if d.Tag == tag {
				out = d.Result
			}
		}
	}
	r.Engine.ReleaseOutputs(out.HeldBytes)
	res.Decision = DecisionOf(out)
	if out.Status == abi.StatusOK && st != nil && r.Keep != nil {
		res.Changelog = r.Keep(st, rec.Offset, rec.Timestamp)
	}
	if out.Status == abi.StatusOK && r.Fire != nil {
		r.fire(ctx, &res, rec.Topic)
	}
	return res, nil
}

// fire fires the timers the record of res made due: their outputs after
// the record's (a record that emitted nothing but closed a window is ok,
// not dropped), their failures in TimerErrors.
func (r *CaseRunner) fire(ctx context.Context, res *CaseResult, topic string) {
	outs, errs := r.Fire(ctx, r.in, topic)
	if len(outs) > 0 {
		res.Outputs = append(res.Outputs, outs...)
		res.Outcome = OutcomeOK
	}
	for _, err := range errs {
		res.TimerErrors = append(res.TimerErrors, err.Error())
	}
}

// Instance is the instance the next record runs on: a new one when there
// is none or the last one faulted (renewed: it replaced one). The error is
// for an instance that cannot be made. A control line of `wasmstream
// test` fires timers on it.
func (r *CaseRunner) Instance(ctx context.Context) (in *host.Instance, renewed bool, err error) {
	if r.in != nil && !r.in.Dead() {
		return r.in, false, nil
	}
	if r.in != nil {
		r.in.Close(ctx)
		renewed = true
	}
	if r.in, err = r.Module.NewInstance(ctx); err != nil {
		r.in = nil
		return nil, renewed, err
	}
	return r.in, renewed, nil
}

// Close closes the instance.
func (r *CaseRunner) Close(ctx context.Context) {
	if r.in != nil {
		r.in.Close(ctx)
		r.in = nil
	}
}
