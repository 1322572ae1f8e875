package admin

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/registry/rollout"
)

// Deploys and rollbacks of one pipeline are serialised by the pipeline's
// lock, held by the API's handlers from choosing the version (for a
// rollback, the manifest's previous one) to answering. Within it, switchTo
// swaps the running version (Deployer.Deploy) and then records the switch in
// the manifest; if recording fails it swaps the earlier version back, so
// that the manifest always names the version that runs and a restart comes
// back on it. The answer says which of these happened.

// pipelineLocks holds one mutex per pipeline name. Safe for concurrent use.
type pipelineLocks struct {
	mu sync.Mutex
	m  map[string]*sync.Mutex
}

// lock locks name's mutex and returns its unlock.
func (l *pipelineLocks) lock(name string) (unlock func()) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*sync.Mutex{}
	}
	m := l.m[name]
	if m == nil {
		m = &sync.Mutex{}
		l.m[name] = m
	}
	l.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// switchError is a deploy or rollback that did not happen (or was undone),
// with the HTTP status that answers it.
type switchError struct {
	code int
	msg  string
}

func (e *switchError) Error() string { return e.msg }

// statusOf is the HTTP status that answers err: a switch's (switchTo, and
// the strategies' refusals) or a deployment's outcome in the fleet
// (rollout.Error).
func statusOf(err error) int {
	switch e := err.(type) {
	case *switchError:
		return e.code
	case *rollout.Error:
		return outcomeStatus[e.Outcome]
	}
	return http.StatusInternalServerError
}

// outcomeStatus answers each outcome of a deployment written to the
// registry that is not "run".
var outcomeStatus = map[rollout.Outcome]int{
	rollout.Refused:    http.StatusUnprocessableEntity, // a host cannot run it
	rollout.Superseded: http.StatusConflict,            // a later deployment replaced it
	rollout.NotYet:     http.StatusGatewayTimeout,      // written, not yet run after rollout.ApplyWait
}

// switchTo makes pipeline name run wasm (digest) and records it with record
// (Store.Activate or Store.Rolled). what is "deploy" or "rollback" for the
// messages. The caller holds name's pipeline lock.
func (a *API) switchTo(ctx context.Context, name, digest string, wasm []byte, what string, record func() error) (host.Info, error) {
	start := time.Now()
	before, hadBefore := a.store.Active(name)
	info, err := a.d.Deploy(ctx, name, wasm)
	if err != nil {
		return info, &switchError{http.StatusUnprocessableEntity, fmt.Sprintf("%s refused; the running version keeps running: %v", what, err)}
	}
	a.labelRunning(name, digest)
	rerr := record()
	if rerr == nil {
		a.log.Info("admin: "+what+" done", "pipeline", name, "digest", short(digest), "took", time.Since(start).Round(time.Millisecond))
		a.PruneStore()
		return info, nil
	}
	// The new version runs but the manifest does not say so: swap back.
	if !hadBefore {
		a.log.Error("admin: "+what+" not recorded", "pipeline", name, "digest", short(digest), "err", rerr)
		return info, &switchError{http.StatusInternalServerError, fmt.Sprintf("%s: %s runs, but recording it in the manifest failed and no earlier version is recorded to go back to (a restart would run the config's module): %v", what, short(digest), rerr)}
	}
	old, err := a.store.Get(before)
	if err == nil {
		_, err = a.d.Deploy(context.WithoutCancel(ctx), name, old)
	}
	if err != nil {
		a.log.Error("admin: "+what+" not recorded and not undone", "pipeline", name, "runs", short(digest), "manifest", short(before), "record_err", rerr, "undo_err", err)
		return info, &switchError{http.StatusInternalServerError, fmt.Sprintf("%s: %s runs, but recording it in the manifest failed (%v) and redeploying %s failed too (%v): the manifest names %s, so a restart would come back on it", what, short(digest), rerr, short(before), err, short(before))}
	}
	a.log.Error("admin: "+what+" undone: recording it failed", "pipeline", name, "digest", short(digest), "runs", short(before), "err", rerr)
	return info, &switchError{http.StatusInternalServerError, fmt.Sprintf("%s undone: recording it in the manifest failed (%v), so %s was deployed again and runs, as the manifest says", what, rerr, short(before))}
}

// short is the first 12 digits of a digest, for messages.
func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
