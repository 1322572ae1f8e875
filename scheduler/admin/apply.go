package admin

import (
	"context"
	"errors"

	"github.com/wasmstream/wasmstream/scheduler/registry"
)

// Applying a deployment (RATIONALE.md, "A deployment is applied stable
// first, then its canary"): a deployment names a stable version and maybe
// a canary beside it, and this host makes them its own in one order,
// stable first, then the canary:
//
//  1. the stable version: a canary running d's stable version is promoted
//     (it becomes the pipeline's version, compiled already); otherwise,
//     unless the host runs it already, it is switched to (switch.go);
//  2. the canary: ended if d has none (aborted: its partitions go back to
//     the stable version), started or replaced if d's differs from the one
//     running.
//
// If the stable version cannot run here, a canary d does not have is still
// ended (that is always safe), but none is started: a host never runs a
// canary beside a stable version other than the one its deployment names,
// which the canary's judgement (rollout.Guard) compares it with.

// applyDeployment makes this host run d, reading the modules it lacks from
// src (Store.Fetch), and reports the version it runs, the version that
// could not run (when err is not nil) and why.
func (a *API) applyDeployment(ctx context.Context, src ModuleSource, d registry.Deployment) (running, failed string, err error) {
	unlock := a.locks.lock(d.Pipeline)
	defer unlock()
	a.keepLabel(d.Digest, d.Label)
	if d.Canary != nil {
		a.keepLabel(d.Canary.Digest, d.Canary.Label)
	}
	failed = d.Digest
	err = a.applyStable(ctx, src, d)
	if err == nil || d.Canary == nil {
		if cerr := a.applyCanary(ctx, src, d); cerr != nil && err == nil && d.Canary != nil {
			err, failed = cerr, d.Canary.Digest
		}
	}
	running, _ = a.store.Active(d.Pipeline)
	a.labelRunning(d.Pipeline, running)
	if d.Canary != nil {
		a.labelRunning(d.Pipeline, d.Canary.Digest)
	}
	if err != nil {
		a.log.Error("admin: the fleet's deployment cannot run here; the running version keeps running", "pipeline", d.Pipeline, "deployed", short(failed), "runs", short(running), "err", err)
	}
	return running, failed, err
}

// applyStable makes d's stable version the one d.Pipeline runs here: by
// promoting the canary if that is the version, else by a switch unless it
// runs already. The caller holds the pipeline's lock.
func (a *API) applyStable(ctx context.Context, src ModuleSource, d registry.Deployment) error {
	if c, ok := a.d.(Canaries); ok {
		if running, _ := c.CanaryDigest(d.Pipeline); running != "" && running == d.Digest {
			c.EndCanary(d.Pipeline, true)
			a.log.Info("admin: canary promoted", "pipeline", d.Pipeline, "digest", short(running))
			return a.store.Activate(d.Pipeline, running)
		}
	}
	if cur, ok := a.store.Active(d.Pipeline); ok && cur == d.Digest {
		return nil
	}
	wasm, err := a.store.Fetch(ctx, src, d.Pipeline, d.Digest, d.Size)
	if err != nil {
		return err
	}
	a.keepLabel(d.Digest, d.Label)
	what := "deploy"
	if d.Rollback {
		what = "rollback"
	}
	_, err = a.switchTo(ctx, d.Pipeline, d.Digest, wasm, what+" (fleet, by "+d.By+")", func() error { return a.store.Activate(d.Pipeline, d.Digest) })
	return err
}

// applyCanary makes this host's canary of d.Pipeline the one d names: none
// (a canary running is aborted), or d.Canary at its share. The caller
// holds the pipeline's lock.
func (a *API) applyCanary(ctx context.Context, src ModuleSource, d registry.Deployment) error {
	c, ok := a.d.(Canaries)
	if !ok {
		return nil
	}
	running, percent := c.CanaryDigest(d.Pipeline)
	switch {
	case d.Canary == nil && running == "":
		return nil
	case d.Canary == nil:
		c.EndCanary(d.Pipeline, false)
		a.log.Warn("admin: canary aborted", "pipeline", d.Pipeline, "digest", short(running), "reason", d.Aborted)
		return nil
	case d.Canary.Digest == running && d.Canary.Percent == percent:
		return nil
	}
	wasm, err := a.store.Fetch(ctx, src, d.Pipeline, d.Canary.Digest, d.Canary.Size)
	if err != nil {
		return err
	}
	a.keepLabel(d.Canary.Digest, d.Canary.Label)
	if _, err := c.SetCanary(ctx, d.Pipeline, wasm, d.Canary.Percent); err != nil {
		return err
	}
	a.log.Info("admin: canary running", "pipeline", d.Pipeline, "digest", short(d.Canary.Digest), "percent", d.Canary.Percent, "by", d.By)
	return nil
}

// keepLabel records a deployment's label for digest in the store, if the
// store has the module (Store.Fetch stores it, then this is called again).
func (a *API) keepLabel(digest, label string) {
	if err := a.store.SetLabel(digest, label); err != nil && !errors.Is(err, ErrNotFound) {
		a.log.Warn("admin: recording a version's label", "digest", short(digest), "label", label, "err", err)
	}
}
