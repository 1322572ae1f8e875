package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/registry"
)

// With a registry (admin.registry), Kafka is the fleet's source of truth:
// a deploy or rollback taken by any host's API is written to the registry
// topics, and every host, this one included, applies it when it reads it
// (Apply, on the registry's goroutine). The API answers once this host runs
// the new version, or, with ?wait=all, once every live host does.

// applyWait bounds how long a deploy waits for this host (or every live
// host) to run the version written to the registry.
const applyWait = 2 * time.Minute

// PruneStore deletes the stored modules no pipeline runs or ran, and (with
// a registry) no deployment of the fleet names, added more than
// registry.ModuleRetention ago (Store.Prune). Called after each switch and
// at start.
func (a *API) PruneStore() {
	var keep map[string]bool
	if a.fleet != nil {
		keep = a.fleet.Referenced()
	}
	n, bytes, err := a.store.Prune(keep, time.Now().Add(-registry.ModuleRetention))
	if err != nil {
		a.log.Warn("admin: pruning the module store", "err", err)
	} else if n > 0 {
		a.log.Info("admin: pruned modules no pipeline runs or ran", "modules", n, "bytes", bytes)
	}
}

// UseRegistry makes deploys and rollbacks go through the fleet's registry.
func (a *API) UseRegistry(r *registry.Registry) { a.fleet = r }

// Apply makes this host run the deployment d read from the registry: the
// module from the local store, or read from the registry and stored. It
// records in the registry what the host runs, or why it does not.
func (a *API) Apply(ctx context.Context, d registry.Deployment) {
	if !slices.Contains(a.d.PipelineNames(), d.Pipeline) {
		return // a pipeline of other hosts
	}
	unlock := a.locks.lock(d.Pipeline)
	defer unlock()
	failed := d.Digest
	a.keepLabel(d.Digest, d.Label)
	if d.Canary != nil {
		a.keepLabel(d.Canary.Digest, d.Canary.Label)
	}
	err := a.applyCanary(ctx, d)
	if err != nil {
		failed = d.Canary.Digest
	} else if cur, ok := a.store.Active(d.Pipeline); !ok || cur != d.Digest {
		err = a.applyLocked(ctx, d)
	}
	running, _ := a.store.Active(d.Pipeline)
	a.labelRunning(d.Pipeline, running)
	if d.Canary != nil {
		a.labelRunning(d.Pipeline, d.Canary.Digest)
	}
	if err != nil {
		a.log.Error("admin: the fleet's deployment cannot run here; the running version keeps running", "pipeline", d.Pipeline, "deployed", short(failed), "runs", short(running), "err", err)
	}
	a.fleet.Running(ctx, d.Pipeline, running, failed, err)
}

// keepLabel records a deployment's label for digest in the store, if the
// store has the module (Store.Fetch stores it and calls this again).
func (a *API) keepLabel(digest, label string) {
	if err := a.store.SetLabel(digest, label); err != nil && !errors.Is(err, ErrNotFound) {
		a.log.Warn("admin: recording a version's label", "digest", short(digest), "label", label, "err", err)
	}
}

func (a *API) applyLocked(ctx context.Context, d registry.Deployment) error {
	wasm, err := a.store.Fetch(ctx, a.fleet, d.Pipeline, d.Digest, d.Size)
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

// publish writes a deployment of digest (wasm: its module, nil if the
// registry has it) for pipeline name to the registry and waits until this
// host, or with all every live host, runs it.
func (a *API) publish(ctx context.Context, name, digest string, wasm []byte, rollback, all bool) error {
	// The module's size, for the hosts that read it from the registry
	// (Publish sets it from wasm when it writes the module).
	d := registry.Deployment{Pipeline: name, Digest: digest, Label: a.store.Label(digest), Size: a.store.Size(digest), Rollback: rollback}
	// A deploy or rollback ends a canary running (it is aborted).
	if cur, ok := a.fleet.Deployment(name); ok {
		if cur.Canary != nil {
			d.Aborted, d.AbortedCanary = "a deploy or rollback replaced it", cur.Canary
		}
		d.History = slices.Clone(cur.History)
		if rollback {
			if n := len(d.History); n > 0 && d.History[n-1] == digest {
				d.History = d.History[:n-1]
			}
		} else if cur.Digest != digest {
			d.History = append(d.History, cur.Digest)
		}
	} else if cur, ok := a.store.Active(name); ok && cur != digest && !rollback {
		d.History = []string{cur}
		if err := a.publishLocal(ctx, cur); err != nil {
			return err
		}
	}
	if len(d.History) > 50 {
		d.History = d.History[len(d.History)-50:]
	}
	off, err := a.fleet.Publish(ctx, d, wasm)
	if err != nil {
		return &switchError{http.StatusServiceUnavailable, fmt.Sprintf("the registry did not take the deploy; nothing changed: %v", err)}
	}
	a.log.Info("admin: deployment written to the registry", "pipeline", name, "digest", short(digest), "rollback", rollback)
	who := map[bool]string{false: "this host", true: "every live host"}[all]
	return a.await(ctx, name, off, who, func() (bool, error) { return a.applied(name, digest, all) })
}

// await waits for the outcome of pipeline name's deployment written at
// offset: done reports it run (by who) or a host's refusal; a deployment
// written after it supersedes it, which is its outcome too (409, naming
// the deployment that replaced it); after applyWait the answer says it is
// written but not yet run (504).
func (a *API) await(ctx context.Context, name string, offset int64, who string, done func() (bool, error)) error {
	wctx, cancel := context.WithTimeout(ctx, applyWait)
	defer cancel()
	for {
		changed := a.fleet.Changed()
		if ok, err := done(); ok || err != nil {
			return err
		}
		if later, ok := a.fleet.Superseded(name, offset); ok {
			return &switchError{http.StatusConflict, fmt.Sprintf("written to the registry, but superseded before %s ran it: %s is now deployed with %s by %s at %s (see GET /v1/pipelines/%s)", who, name, short(later.Digest), later.By, later.At.Format(time.RFC3339), name)}
		}
		select {
		case <-changed:
		case <-time.After(time.Second):
		case <-wctx.Done():
			return &switchError{http.StatusGatewayTimeout, fmt.Sprintf("written to the registry, but not yet run by %s after %s: see GET /v1/pipelines/%s", who, applyWait, name)}
		}
	}
}

// applied reports whether pipeline name runs digest here (and, with all,
// on every live host), or an error a host reported for it.
func (a *API) applied(name, digest string, all bool) (bool, error) {
	now := time.Now()
	done := false
	for _, h := range a.fleet.HostsStatus() {
		if !h.Live(now) {
			continue
		}
		if h.Pipelines[name] == digest {
			if h.Host == a.fleet.HostID() {
				done = true
			}
			continue
		}
		if f, ok := h.Failed[name]; ok && f.Digest == digest {
			return false, &switchError{http.StatusUnprocessableEntity, fmt.Sprintf("host %s cannot run %s (it keeps running %s): %s", h.Host, short(digest), short(h.Pipelines[name]), f.Error)}
		}
		if all {
			if _, runs := h.Pipelines[name]; runs {
				return false, nil
			}
		}
	}
	return done, nil
}

// FleetView is what the registry says of a pipeline.
type FleetView struct {
	Deployed string                      `json:"deployed"`          // the digest the fleet should run
	Label    string                      `json:"label,omitempty"`   // its label (deploy --label)
	History  []string                    `json:"history,omitempty"` // before it, oldest first
	At       time.Time                   `json:"at"`
	By       string                      `json:"by"`
	Canary   *registry.Canary            `json:"canary,omitempty"`
	Aborted  string                      `json:"aborted,omitempty"` // why the last canary was aborted
	Hosts    map[string]string           `json:"hosts"`             // live host -> digest it runs (at most MaxListedHosts)
	Failed   map[string]registry.Failure `json:"failed,omitempty"`  // listed host -> the deployment it could not run
	// LiveHosts counts the live hosts running the pipeline; NotListed, those
	// of them not in Hosts.
	LiveHosts int `json:"live_hosts"`
	NotListed int `json:"hosts_not_listed,omitempty"`
}

// MaxListedHosts bounds the hosts a FleetView lists: whoever may write the
// hosts topic could make the list (and every GET /v1/pipelines and
// `wasmstream processors`) as long as the statuses the registry keeps. The
// hosts that could not run a deployment come first, then those not on the
// deployed version, then the others, each by name.
const MaxListedHosts = 100

func (a *API) fleetView(name string) *FleetView {
	if a.fleet == nil {
		return nil
	}
	v := &FleetView{Hosts: map[string]string{}}
	if d, ok := a.fleet.Deployment(name); ok {
		v.Deployed, v.Label, v.History, v.At, v.By, v.Canary, v.Aborted = d.Digest, d.Label, d.History, d.At, d.By, d.Canary, d.Aborted
	}
	now := time.Now()
	var live []registry.HostStatus
	for _, h := range a.fleet.HostsStatus() {
		if _, ok := h.Pipelines[name]; ok && h.Live(now) {
			live = append(live, h)
		}
	}
	rank := func(h registry.HostStatus) int {
		if _, failed := h.Failed[name]; failed {
			return 0
		}
		if h.Pipelines[name] != v.Deployed {
			return 1
		}
		return 2
	}
	slices.SortFunc(live, func(x, y registry.HostStatus) int {
		if c := cmp.Compare(rank(x), rank(y)); c != 0 {
			return c
		}
		return strings.Compare(x.Host, y.Host)
	})
	v.LiveHosts = len(live)
	if len(live) > MaxListedHosts {
		v.NotListed = len(live) - MaxListedHosts
		live = live[:MaxListedHosts]
	}
	for _, h := range live {
		v.Hosts[h.Host] = h.Pipelines[name]
		if f, ok := h.Failed[name]; ok {
			if v.Failed == nil {
				v.Failed = map[string]registry.Failure{}
			}
			v.Failed[h.Host] = f
		}
	}
	return v
}

// publishLocal puts the module digest, which this host runs from its local
// store, into the registry: the first fleet deploy of a pipeline keeps what
// ran before it as the version to roll back to.
func (a *API) publishLocal(ctx context.Context, digest string) error {
	b, err := a.store.Get(digest)
	if err != nil {
		return &switchError{http.StatusInternalServerError, fmt.Sprintf("reading the running module %s from the local store: %v", short(digest), err)}
	}
	if err := a.fleet.PutModule(ctx, b); err != nil {
		return &switchError{http.StatusServiceUnavailable, err.Error()}
	}
	return nil
}
