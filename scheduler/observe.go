package scheduler

import (
	"errors"
)

// ErrStarted is returned by settings that must precede Runner.Start.
var ErrStarted = errors.New("the runner has started")

// ObserveFailures makes o see every failed attempt of every pipeline. It
// must be called before Start (tasks read the observer without a lock).
func (r *Runner) ObserveFailures(o FailureObserver) error {
	if r.started.Load() {
		return ErrStarted
	}
	r.hooks.Failures = o
	for _, p := range r.pipes() {
		p.shared.hooks.Failures = o
	}
	return nil
}
