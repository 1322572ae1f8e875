package admin

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/registry"
)

// A pipeline whose config decides its version (version_source: config;
// scheduler/config/versionsource.go) is deployed by its config: at start
// the host runs the config's module and writes it to the fleet
// (PublishFromConfig); the API refuses to deploy, roll back, start a
// canary of it or promote one, saying why (refuseFromConfig). Aborting its
// canary is taken: that is always safe, and a host that starts with the
// same config does not start an aborted canary again. A version the API
// deployed would be undone by the next host that starts with the config,
// and the config in Git would no longer say what runs.

// FromConfig marks the pipelines whose config decides their version. Call
// it before Handler serves: the handlers read the set without a lock.
func (a *API) FromConfig(names ...string) {
	if a.fromConfig == nil {
		a.fromConfig = map[string]bool{}
	}
	for _, n := range names {
		a.fromConfig[n] = true
	}
}

// refuseFromConfig answers 409 to a request that would change the version
// of a pipeline its config decides, and reports whether it did.
func (a *API) refuseFromConfig(w http.ResponseWriter, name, what string) bool {
	if !a.fromConfig[name] {
		return false
	}
	fail(w, http.StatusConflict, "pipeline %q has version_source: config: its version is the config's module (and canary), deployed to the fleet when a host starts with that config; %s it here would be undone by the next host that starts. Change the config (in Git: module, module_label, canary) and roll the hosts, or set version_source: registry to deploy through this API", name, what)
	return true
}

// ConfigVersion is what a pipeline's config says it runs: its module
// (digest, bytes, label) and maybe a canary beside it.
type ConfigVersion struct {
	Pipeline string
	Digest   string
	Wasm     []byte
	Label    string
	Canary   *ConfigCanary // nil: none
}

// ConfigCanary is a canary a config declares.
type ConfigCanary struct {
	Digest  string
	Wasm    []byte
	Label   string
	Percent int
}

// PublishFromConfig writes v to the fleet registry as its pipeline's
// deployment, unless the registry has that deployment already (the same
// module, label and canary), and reports whether it wrote it; without a
// registry it does nothing. It does not wait for the hosts: it runs as the
// host starts, before this host follows the registry (which then applies
// it here too; the others apply it as they read it).
//
// The deployment written keeps the pipeline's history (the version it
// replaces is the one to roll back to); a canary running that v does not
// name is aborted ("the config no longer names it"). A canary that the
// fleet aborted (the hosts' own judgement, rollout.Guard) beside the same
// module is not started again by a host that restarts with the same
// config: that would undo the abort at every restart. It is logged, and
// stays aborted until the config names another canary or none.
func (a *API) PublishFromConfig(ctx context.Context, v ConfigVersion) (bool, error) {
	f, ok := a.strategy.(*fleetStrategy)
	if !ok {
		return false, nil
	}
	cur, has := f.reg.Deployment(v.Pipeline)
	if has && cur.Digest == v.Digest && cur.Label == v.Label {
		switch {
		case sameCanary(cur.Canary, v.Canary):
			return false, nil
		case cur.Canary == nil && v.Canary != nil && cur.AbortedCanary != nil && cur.AbortedCanary.Digest == v.Canary.Digest:
			a.log.Warn("the config's canary was aborted across the fleet: not started again (name another canary, or none, in the config)",
				"pipeline", v.Pipeline, "canary", short(v.Canary.Digest), "label", v.Canary.Label, "aborted", cur.Aborted)
			return false, nil
		}
	}
	d := registry.Deployment{Pipeline: v.Pipeline, Digest: v.Digest, Label: v.Label}
	if has {
		d.History = slices.Clone(cur.History)
		if cur.Digest != v.Digest {
			d.History = append(d.History, cur.Digest)
		}
		if len(d.History) > 50 {
			d.History = d.History[len(d.History)-50:]
		}
		if cur.Canary != nil && !sameCanary(cur.Canary, v.Canary) {
			d.Aborted, d.AbortedCanary = "the config no longer names it", cur.Canary
		}
	}
	if c := v.Canary; c != nil {
		if err := f.reg.PutModule(ctx, c.Wasm); err != nil {
			return false, err
		}
		d.Canary = &registry.Canary{Digest: c.Digest, Label: c.Label, Size: len(c.Wasm), Percent: c.Percent, At: time.Now().UTC()}
	}
	if _, err := f.reg.Publish(ctx, d, v.Wasm); err != nil {
		return false, fmt.Errorf("writing the config's version of pipeline %s to the fleet: %w", v.Pipeline, err)
	}
	a.log.Info("admin: the config's version written to the fleet", "pipeline", v.Pipeline, "digest", short(v.Digest), "label", v.Label, "canary", d.Canary != nil)
	return true, nil
}

// sameCanary reports whether the running canary r is the config's c.
func sameCanary(r *registry.Canary, c *ConfigCanary) bool {
	if r == nil || c == nil {
		return r == nil && c == nil
	}
	return r.Digest == c.Digest && r.Percent == c.Percent && r.Label == c.Label
}
