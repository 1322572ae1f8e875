package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/registry"
	"github.com/wasmstream/wasmstream/scheduler/registry/rollout"
)

// Canary deploys need the fleet registry: the canary is part of the
// pipeline's deployment there, every host runs it on the same partitions
// (scheduler/canary.go), and every host's heartbeat carries what each
// version decided, so any host can see the canary fail more often than the
// stable version and abort it.

// Canaries is what a Deployer needs for canary deploys: the scheduler's
// Runner.
type Canaries interface {
	SetCanary(ctx context.Context, pipeline string, wasm []byte, percent int) (host.Info, error)
	EndCanary(pipeline string, promote bool) bool
	CanaryDigest(pipeline string) (digest string, percent int)
}

// SetCanaryAbortMargin sets how much higher than the stable version's the
// canary's failure rate may be before it is aborted (a share: 0.05 is five
// percentage points).
func (a *API) SetCanaryAbortMargin(m float64) { a.canaryMargin = m }

// canaries says why canary deploys cannot be taken: the runner runs no
// canaries (nil: it does).
func (f *fleetStrategy) canaries() error {
	if _, ok := f.a.d.(Canaries); !ok {
		return errNoCanaries
	}
	return nil
}

// startCanary: POST /v1/pipelines/{name}/modules?canary=10: run wasm
// (stored) on 10% of the partitions across the fleet.
func (f *fleetStrategy) startCanary(ctx context.Context, name, digest string, wasm []byte, percent int) error {
	cur, ok := f.reg.Deployment(name)
	if !ok {
		active, has := f.a.store.Active(name)
		if !has {
			return &switchError{http.StatusConflict, "no stable version recorded to run beside the canary"}
		}
		cur = registry.Deployment{Pipeline: name, Digest: active}
		if err := f.publishLocal(ctx, active); err != nil {
			return err
		}
	}
	if cur.Digest == digest {
		return &switchError{http.StatusConflict, fmt.Sprintf("%s is already the deployed version", short(digest))}
	}
	cur.Canary = &registry.Canary{Digest: digest, Label: f.a.store.Label(digest), Size: len(wasm), Percent: percent, At: time.Now().UTC()}
	cur.Aborted, cur.AbortedCanary, cur.Rollback = "", nil, false
	running := func() string {
		d, _ := f.a.d.(Canaries).CanaryDigest(name)
		return d
	}
	return f.write(ctx, cur, wasm, func() (bool, error) { return rollout.CanaryApplied(f.reg, name, digest, running) })
}

// endCanary promotes or aborts the pipeline's canary across the fleet.
func (f *fleetStrategy) endCanary(ctx context.Context, name string, promote bool, reason string) error {
	cur, ok := f.reg.Deployment(name)
	if !ok || cur.Canary == nil {
		return &switchError{http.StatusConflict, fmt.Sprintf("pipeline %q has no canary running", name)}
	}
	next := cur
	next.Canary, next.Rollback = nil, false
	if promote {
		next.History = append(slices.Clone(cur.History), cur.Digest)
		next.Digest, next.Size, next.Label = cur.Canary.Digest, cur.Canary.Size, cur.Canary.Label
		next.Aborted = ""
		next.AbortedCanary = nil
	} else {
		next.Aborted, next.AbortedCanary = reason, cur.Canary
	}
	return f.write(ctx, next, nil, func() (bool, error) { return rollout.Applied(f.reg, name, next.Digest, false) })
}

// CheckCanaries aborts a canary of this host's pipelines that fails on
// its own (rollout.Guard), with the margin of SetCanaryAbortMargin. The
// registry calls it on each heartbeat; without one it does nothing.
func (a *API) CheckCanaries(ctx context.Context) { a.strategy.checkCanaries(ctx) }

func (f *fleetStrategy) checkCanaries(ctx context.Context) {
	f.guard.Check(ctx, f.a.d.PipelineNames(), f.a.canaryMargin)
}

// canaryReq is the body of POST .../canary/promote and .../canary/abort
// (optional).
type canaryReq struct {
	Reason string `json:"reason"`
}

func (a *API) canaryEnd(promote bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		// Aborting a canary the config declares is taken: it is always
		// safe, and it lasts (a host that starts with the same config does
		// not start that canary again, PublishFromConfig).
		if !a.known(w, name) || (promote && a.refuseFromConfig(w, name, "promoting its canary")) {
			return
		}
		if err := a.strategy.canaries(); err != nil {
			fail(w, statusOf(err), "%v", err)
			return
		}
		var req canaryReq
		if r.ContentLength != 0 {
			dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&req); err != nil {
				fail(w, http.StatusBadRequest, "body: want {\"reason\": \"...\"} or none: %v", err)
				return
			}
		}
		reason := strings.TrimSpace(req.Reason)
		if reason == "" {
			reason = "aborted through the admin API"
		}
		if err := a.strategy.endCanary(r.Context(), name, promote, reason); err != nil {
			fail(w, statusOf(err), "%v", err)
			return
		}
		reply(w, http.StatusOK, a.view(name))
	}
}

// parsePercent parses a canary share: "10" or "10%", 1 to 99.
func parsePercent(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil || n < 1 || n > 99 {
		return 0, fmt.Errorf("canary=%q: want a share of the partitions from 1 to 99 (percent)", s)
	}
	return n, nil
}
