// Package rollout is how a deployment written to the fleet's registry
// (scheduler/registry) plays out across the hosts: waiting until this host,
// or every live host, runs it, or a host reports it cannot, or a later
// deployment supersedes it (wait.go); and the canary auto-abort policy,
// which judges a canary on the counts every host's heartbeat carries and
// writes its abort to the registry (guard.go, verdict.go). It knows the
// registry, not the admin API that calls it nor the runner that runs the
// versions.
package rollout

import (
	"context"
	"fmt"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/registry"
)

// ApplyWait bounds how long a deploy waits for this host (or every live
// host) to run the version written to the registry.
const ApplyWait = 2 * time.Minute

// Outcome is how a deployment written to the registry did not (yet) end as
// asked.
type Outcome int

const (
	// Refused: a live host reported it cannot run the version.
	Refused Outcome = iota + 1
	// Superseded: a deployment written after it replaced it.
	Superseded
	// NotYet: ApplyWait passed before the hosts ran it.
	NotYet
)

// Error is a deployment's outcome other than run; the admin API answers
// each Outcome with its own HTTP status.
type Error struct {
	Outcome Outcome
	Msg     string
}

func (e *Error) Error() string { return e.Msg }

// Await waits for the outcome of pipeline name's deployment written at
// offset: done reports it run (by who) or a host's refusal; a deployment
// written after it supersedes it, which is its outcome too (Superseded,
// naming the deployment that replaced it); after ApplyWait the answer says
// it is written but not yet run (NotYet).
func Await(ctx context.Context, reg *registry.Registry, name string, offset int64, who string, done func() (bool, error)) error {
	wctx, cancel := context.WithTimeout(ctx, ApplyWait)
	defer cancel()
	for {
		changed := reg.Changed()
		if ok, err := done(); ok || err != nil {
			return err
		}
		if later, ok := reg.Superseded(name, offset); ok {
			return &Error{Superseded, fmt.Sprintf("written to the registry, but superseded before %s ran it: %s is now deployed with %s by %s at %s (see GET /v1/pipelines/%s)", who, name, short(later.Digest), later.By, later.At.Format(time.RFC3339), name)}
		}
		select {
		case <-changed:
		case <-time.After(time.Second):
		case <-wctx.Done():
			return &Error{NotYet, fmt.Sprintf("written to the registry, but not yet run by %s after %s: see GET /v1/pipelines/%s", who, ApplyWait, name)}
		}
	}
}

// Applied reports whether pipeline name runs digest on this host (and,
// with all, on every live host), or the error a live host reported for it.
func Applied(reg *registry.Registry, name, digest string, all bool) (bool, error) {
	now := time.Now()
	done := false
	for _, h := range reg.HostsStatus() {
		if !h.Live(now) {
			continue
		}
		if h.Pipelines[name] == digest {
			if h.Host == reg.HostID() {
				done = true
			}
			continue
		}
		if f, ok := h.Failed[name]; ok && f.Digest == digest {
			return false, &Error{Refused, fmt.Sprintf("host %s cannot run %s (it keeps running %s): %s", h.Host, short(digest), short(h.Pipelines[name]), f.Error)}
		}
		if all {
			if _, runs := h.Pipelines[name]; runs {
				return false, nil
			}
		}
	}
	return done, nil
}

// CanaryApplied reports whether this host runs digest as pipeline name's
// canary (running: the canary it runs), or the error a live host reported
// for it.
func CanaryApplied(reg *registry.Registry, name, digest string, running func() string) (bool, error) {
	for _, h := range reg.HostsStatus() {
		if f, ok := h.Failed[name]; ok && f.Digest == digest && h.Live(time.Now()) {
			return false, &Error{Refused, fmt.Sprintf("host %s cannot run the canary %s: %s", h.Host, short(digest), f.Error)}
		}
	}
	return running() == digest, nil
}

// short is the first 12 digits of a digest, for messages.
func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
