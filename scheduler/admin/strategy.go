package admin

import (
	"context"
	"fmt"
	"net/http"

	"github.com/wasmstream/wasmstream/scheduler/registry"
)

// A deploy, a rollback or a canary reaches the hosts that run it by one of
// two strategies, chosen once: localStrategy (NewAPI), this host only, a
// switch recorded in the module store (switch.go); or fleetStrategy
// (UseRegistry, fleet.go), written to the registry, which every host, this
// one included, applies (apply.go). The handlers call the API's strategy
// and pick nothing; the answers, their statuses and their words, are the
// strategy's.
type strategy interface {
	// deploy makes pipeline name run digest (wasm: its module, stored);
	// with all, on every live host before it returns.
	deploy(ctx context.Context, name, digest string, wasm []byte, all bool) error
	// rollback makes pipeline name run the version before its current one.
	rollback(ctx context.Context, name string, all bool) error
	// canaries says why canary deploys cannot be taken (nil: they can).
	canaries() error
	// startCanary runs digest (wasm) on percent of pipeline name's
	// partitions; endCanary promotes or aborts the canary.
	startCanary(ctx context.Context, name, digest string, wasm []byte, percent int) error
	endCanary(ctx context.Context, name string, promote bool, reason string) error
	// notDeployed is how an upload's answer says its deploy failed, after
	// "stored as <digest>": this host's switch did not happen (or was
	// undone); the fleet's may have been written, which its error says.
	notDeployed() string
	// view is what the fleet runs of pipeline name (nil: no fleet).
	view(name string) *FleetView

	// What the registry's goroutines call (no-ops without one):
	// referenced names the modules PruneStore keeps for the fleet; apply
	// runs a deployment read from the registry (API.Apply);
	// checkCanaries is the canary auto-abort policy (API.CheckCanaries).
	referenced() map[string]bool
	apply(ctx context.Context, d registry.Deployment)
	checkCanaries(ctx context.Context)
}

// errNoCanaries answers a canary request without the fleet registry.
var errNoCanaries = &switchError{http.StatusConflict, "canary deploys need the fleet registry (admin.registry: true)"}

// localStrategy switches this host only: the module store records what
// runs (switch.go).
type localStrategy struct{ a *API }

func (l localStrategy) deploy(ctx context.Context, name, digest string, wasm []byte, _ bool) error {
	unlock := l.a.locks.lock(name)
	defer unlock()
	_, err := l.a.activate(ctx, name, digest, wasm)
	return err
}

func (l localStrategy) rollback(ctx context.Context, name string, _ bool) error {
	unlock := l.a.locks.lock(name)
	defer unlock()
	prev, ok := l.a.store.Previous(name)
	if !ok {
		return &switchError{http.StatusConflict, fmt.Sprintf("pipeline %q has no earlier version to roll back to", name)}
	}
	wasm, err := l.a.store.Get(prev)
	if err != nil {
		return err
	}
	_, err = l.a.switchTo(ctx, name, prev, wasm, "rollback", func() error { return l.a.store.Rolled(name, prev) })
	return err
}

func (localStrategy) canaries() error { return errNoCanaries }

func (localStrategy) startCanary(context.Context, string, string, []byte, int) error {
	return errNoCanaries
}

func (localStrategy) endCanary(context.Context, string, bool, string) error { return errNoCanaries }

func (localStrategy) notDeployed() string { return ", not deployed" }

func (localStrategy) view(string) *FleetView { return nil }

func (localStrategy) referenced() map[string]bool { return nil }

func (localStrategy) apply(context.Context, registry.Deployment) {}

func (localStrategy) checkCanaries(context.Context) {}
