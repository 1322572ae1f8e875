package admin

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/registry"
	"github.com/wasmstream/wasmstream/scheduler/registry/rollout"
)

// With a registry (admin.registry), Kafka is the fleet's source of truth:
// a deploy or rollback taken by any host's API is written to the registry
// topics, and every host, this one included, applies it when it reads it
// (Apply, on the registry's goroutine). The API answers once this host runs
// the new version, or, with ?wait=all, once every live host does
// (rollout.Await).

// PruneStore deletes the stored modules no pipeline runs or ran, and (with
// a registry) no deployment of the fleet names, added more than
// registry.ModuleRetention ago (Store.Prune). Called after each switch and
// at start.
func (a *API) PruneStore() {
	n, bytes, err := a.store.Prune(a.strategy.referenced(), time.Now().Add(-registry.ModuleRetention))
	if err != nil {
		a.log.Warn("admin: pruning the module store", "err", err)
	} else if n > 0 {
		a.log.Info("admin: pruned modules no pipeline runs or ran", "modules", n, "bytes", bytes)
	}
}

// UseRegistry makes deploys, rollbacks and canaries go through the fleet's
// registry: the API's strategy becomes the fleet's.
func (a *API) UseRegistry(r *registry.Registry) {
	a.strategy = &fleetStrategy{a: a, reg: r, guard: rollout.NewGuard(r, a.log)}
}

// Apply makes this host run the deployment d read from the registry
// (applyDeployment) and records in the registry what the host runs, or why
// it does not. The registry calls it (Registry.OnDeploy).
func (a *API) Apply(ctx context.Context, d registry.Deployment) { a.strategy.apply(ctx, d) }

// ApplyAtStart makes this host, as it starts, run the deployment d read
// from the registry, reading the modules it lacks from src (the registry),
// as every later deployment is applied
// (applyDeployment: the stable version first, then the canary), except
// that a stable version that cannot run here is an error the host does
// not start with: it would run a version the fleet does not. A canary that
// cannot run here is logged, and its partitions run the stable version.
func (a *API) ApplyAtStart(ctx context.Context, src ModuleSource, d registry.Deployment) error {
	if _, failed, err := a.applyDeployment(ctx, src, d); err != nil && failed == d.Digest {
		return err
	}
	return nil
}

// fleetStrategy writes deploys, rollbacks and canaries to the registry and
// waits for the hosts to run them (rollout).
type fleetStrategy struct {
	a     *API
	reg   *registry.Registry
	guard *rollout.Guard // the canary auto-abort policy
}

func (f *fleetStrategy) apply(ctx context.Context, d registry.Deployment) {
	if !slices.Contains(f.a.d.PipelineNames(), d.Pipeline) {
		return // a pipeline of other hosts
	}
	running, failed, err := f.a.applyDeployment(ctx, f.reg, d)
	f.reg.Running(ctx, d.Pipeline, running, failed, err)
}

func (f *fleetStrategy) referenced() map[string]bool { return f.reg.Referenced() }

func (f *fleetStrategy) notDeployed() string { return "" }

func (f *fleetStrategy) deploy(ctx context.Context, name, digest string, wasm []byte, all bool) error {
	return f.publish(ctx, name, digest, wasm, false, all)
}

func (f *fleetStrategy) rollback(ctx context.Context, name string, all bool) error {
	d, ok := f.reg.Deployment(name)
	if !ok || len(d.History) == 0 {
		return &switchError{http.StatusConflict, fmt.Sprintf("pipeline %q has no earlier version deployed to the fleet to roll back to", name)}
	}
	return f.publish(ctx, name, d.History[len(d.History)-1], nil, true, all)
}

// publish writes a deployment of digest (wasm: its module, nil if the
// registry has it) for pipeline name to the registry and waits until this
// host, or with all every live host, runs it.
func (f *fleetStrategy) publish(ctx context.Context, name, digest string, wasm []byte, rollback, all bool) error {
	// The module's size, for the hosts that read it from the registry
	// (Publish sets it from wasm when it writes the module).
	d := registry.Deployment{Pipeline: name, Digest: digest, Label: f.a.store.Label(digest), Size: f.a.store.Size(digest), Rollback: rollback}
	if err := f.succeed(ctx, &d); err != nil {
		return err
	}
	off, err := f.reg.Publish(ctx, d, wasm)
	if err != nil {
		return &switchError{http.StatusServiceUnavailable, fmt.Sprintf("the registry did not take the deploy; nothing changed: %v", err)}
	}
	f.a.log.Info("admin: deployment written to the registry", "pipeline", name, "digest", short(digest), "rollback", rollback)
	who := map[bool]string{false: "this host", true: "every live host"}[all]
	return rollout.Await(ctx, f.reg, name, off, who, func() (bool, error) { return rollout.Applied(f.reg, name, digest, all) })
}

// succeed makes d (a deploy or a rollback) follow the pipeline's
// deployment in the registry: its history, and the canary it ends (a
// deploy or rollback aborts a canary running). The first fleet deploy of
// a pipeline keeps what ran on this host before it as the version to roll
// back to, and puts its module into the registry.
func (f *fleetStrategy) succeed(ctx context.Context, d *registry.Deployment) error {
	if cur, ok := f.reg.Deployment(d.Pipeline); ok {
		if cur.Canary != nil {
			d.Aborted, d.AbortedCanary = "a deploy or rollback replaced it", cur.Canary
		}
		d.History = slices.Clone(cur.History)
		if d.Rollback {
			if n := len(d.History); n > 0 && d.History[n-1] == d.Digest {
				d.History = d.History[:n-1]
			}
		} else if cur.Digest != d.Digest {
			d.History = append(d.History, cur.Digest)
		}
	} else if cur, ok := f.a.store.Active(d.Pipeline); ok && cur != d.Digest && !d.Rollback {
		d.History = []string{cur}
		if err := f.publishLocal(ctx, cur); err != nil {
			return err
		}
	}
	if len(d.History) > 50 {
		d.History = d.History[len(d.History)-50:]
	}
	return nil
}

// write publishes d and waits for done (rollout.Await).
func (f *fleetStrategy) write(ctx context.Context, d registry.Deployment, wasm []byte, done func() (bool, error)) error {
	off, err := f.reg.Publish(ctx, d, wasm)
	if err != nil {
		return &switchError{http.StatusServiceUnavailable, fmt.Sprintf("the registry did not take it; nothing changed: %v", err)}
	}
	return rollout.Await(ctx, f.reg, d.Pipeline, off, "this host", done)
}

// publishLocal puts the module digest, which this host runs from its local
// store, into the registry: the first fleet deploy of a pipeline keeps what
// ran before it as the version to roll back to.
func (f *fleetStrategy) publishLocal(ctx context.Context, digest string) error {
	b, err := f.a.store.Get(digest)
	if err != nil {
		return &switchError{http.StatusInternalServerError, fmt.Sprintf("reading the running module %s from the local store: %v", short(digest), err)}
	}
	if err := f.reg.PutModule(ctx, b); err != nil {
		return &switchError{http.StatusServiceUnavailable, err.Error()}
	}
	return nil
}
