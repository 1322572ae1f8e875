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

// CanaryMinRecords is how many records the canary must have decided across
// the fleet before its failure rate is judged.
const CanaryMinRecords = 50

// SetCanaryAbortMargin sets how much higher than the stable version's the
// canary's failure rate may be before it is aborted (a share: 0.05 is five
// percentage points).
func (a *API) SetCanaryAbortMargin(m float64) { a.canaryMargin = m }

func (a *API) canaries(w http.ResponseWriter) (Canaries, bool) {
	c, ok := a.d.(Canaries)
	if !ok || a.fleet == nil {
		fail(w, http.StatusConflict, "canary deploys need the fleet registry (admin.registry: true)")
		return nil, false
	}
	return c, true
}

// canaryUpload: POST /v1/pipelines/{name}/modules?canary=10: store wasm
// and run it on 10% of the partitions across the fleet.
func (a *API) startCanary(ctx context.Context, name, digest string, wasm []byte, percent int) error {
	cur, ok := a.fleet.Deployment(name)
	if !ok {
		active, has := a.store.Active(name)
		if !has {
			return &switchError{http.StatusConflict, "no stable version recorded to run beside the canary"}
		}
		cur = registry.Deployment{Pipeline: name, Digest: active}
		if err := a.publishLocal(ctx, active); err != nil {
			return err
		}
	}
	if cur.Digest == digest {
		return &switchError{http.StatusConflict, fmt.Sprintf("%s is already the deployed version", short(digest))}
	}
	cur.Canary = &registry.Canary{Digest: digest, Label: a.store.Label(digest), Size: len(wasm), Percent: percent, At: time.Now().UTC()}
	cur.Aborted, cur.AbortedCanary, cur.Rollback = "", nil, false
	return a.write(ctx, cur, wasm, func() (bool, error) { return a.canaryApplied(name, digest) })
}

// endCanary promotes or aborts the pipeline's canary across the fleet.
func (a *API) endCanary(ctx context.Context, name string, promote bool, reason string) error {
	cur, ok := a.fleet.Deployment(name)
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
	return a.write(ctx, next, nil, func() (bool, error) { return a.applied(name, next.Digest, false) })
}

// write publishes d and waits for done (await).
func (a *API) write(ctx context.Context, d registry.Deployment, wasm []byte, done func() (bool, error)) error {
	off, err := a.fleet.Publish(ctx, d, wasm)
	if err != nil {
		return &switchError{http.StatusServiceUnavailable, fmt.Sprintf("the registry did not take it; nothing changed: %v", err)}
	}
	return a.await(ctx, d.Pipeline, off, "this host", done)
}

// canaryApplied reports whether this host runs digest as its canary.
func (a *API) canaryApplied(name, digest string) (bool, error) {
	c, _ := a.d.(Canaries)
	for _, h := range a.fleet.HostsStatus() {
		if f, ok := h.Failed[name]; ok && f.Digest == digest && h.Live(time.Now()) {
			return false, &switchError{http.StatusUnprocessableEntity, fmt.Sprintf("host %s cannot run the canary %s: %s", h.Host, short(digest), f.Error)}
		}
	}
	d, _ := c.CanaryDigest(name)
	return d == digest, nil
}

// applyCanary makes this host's canary of d.Pipeline what d says; the
// caller holds the pipeline's lock. It runs before the stable version is
// applied: a promotion ends the canary by making its version the
// pipeline's.
func (a *API) applyCanary(ctx context.Context, d registry.Deployment) error {
	c, ok := a.d.(Canaries)
	if !ok {
		return nil
	}
	running, percent := c.CanaryDigest(d.Pipeline)
	switch {
	case d.Canary == nil && running == "":
		return nil
	case d.Canary == nil:
		promote := running == d.Digest
		c.EndCanary(d.Pipeline, promote)
		if promote {
			a.log.Info("admin: canary promoted", "pipeline", d.Pipeline, "digest", short(running))
			return a.store.Activate(d.Pipeline, running)
		}
		a.log.Warn("admin: canary aborted", "pipeline", d.Pipeline, "digest", short(running), "reason", d.Aborted)
		return nil
	case d.Canary.Digest == running && d.Canary.Percent == percent:
		return nil
	}
	wasm, err := a.store.Fetch(ctx, a.fleet, d.Pipeline, d.Canary.Digest, d.Canary.Size)
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

// CheckCanaries aborts a canary whose own failures (verdict.go: the ones
// the stable version does not have on the same records) exceed the
// margin, once it decided CanaryMinRecords. It judges this host's own
// counts first, which need no trust in what others write to the hosts
// topic, then the counts of every live host: forged successes in another
// status cannot keep a canary that fails here alive. Run on each
// heartbeat; several hosts may abort the same canary, to the same effect.
func (a *API) CheckCanaries(ctx context.Context) {
	if a.canaryMargin <= 0 {
		return
	}
	now := time.Now()
	self := a.fleet.HostID()
	own := a.fleet.OwnStatus()
	for _, name := range a.d.PipelineNames() {
		d, ok := a.fleet.Deployment(name)
		if !ok || d.Canary == nil {
			continue
		}
		var ownStable, ownCanary, stable, canary evidence
		ownStable.add(self, own.Versions[name][d.Digest])
		ownCanary.add(self, own.Versions[name][d.Canary.Digest])
		stable.add(self, own.Versions[name][d.Digest])
		canary.add(self, own.Versions[name][d.Canary.Digest])
		hosts := 1
		for _, h := range a.fleet.HostsStatus() {
			if h.Host == self || !h.Live(now) {
				continue // this host's own counts are taken from itself
			}
			stable.add(h.Host, h.Versions[name][d.Digest])
			canary.add(h.Host, h.Versions[name][d.Canary.Digest])
			hosts++
		}
		v, c, where := judge(ownStable, ownCanary, a.canaryMargin), ownCanary, fmt.Sprintf("on this host (%.64q)", self)
		if !v.abort {
			v, c, where = judge(stable, canary, a.canaryMargin), canary, fmt.Sprintf("on %d live hosts", hosts)
		}
		if !v.abort {
			a.noteSharedFailures(name, d, stable, canary, v)
			continue
		}
		reason := fmt.Sprintf("automatic: %s the canary failed %d of %d records, an estimated %.0f (%.1f%%) of them ones the stable version does not have on the same records, over the margin of %.1f points: %s",
			where, c.failed, c.records, v.own, 100*v.own/float64(c.records), 100*a.canaryMargin, v.detail)
		a.log.Warn("admin: aborting the canary", "pipeline", name, "digest", short(d.Canary.Digest), "reason", reason)
		next := d
		next.Canary, next.Aborted, next.Rollback = nil, reason, false
		if _, err := a.fleet.Publish(ctx, next, nil); err != nil {
			a.log.Error("admin: aborting the canary", "pipeline", name, "err", err)
		}
	}
}

// noteSharedFailures logs, once per canary, a canary that fails more often
// than the stable version by the margin but is not aborted: its failures
// are ones the stable version has on the same records (its input's, not
// its code's), or their checks are still to come.
func (a *API) noteSharedFailures(name string, d registry.Deployment, stable, canary evidence, v verdict) {
	if canary.records < CanaryMinRecords || v.pending {
		return
	}
	cr := float64(canary.failed) / float64(canary.records)
	sr := 0.0
	if stable.records > 0 {
		sr = float64(stable.failed) / float64(stable.records)
	}
	if cr <= sr+a.canaryMargin {
		return
	}
	key := name + "/" + d.Canary.Digest + "/" + d.Canary.At.String()
	a.notedMu.Lock()
	seen := a.noted[key]
	if a.noted == nil {
		a.noted = map[string]bool{}
	}
	a.noted[key] = true
	a.notedMu.Unlock()
	if seen {
		return
	}
	a.log.Warn("admin: the canary fails more often than the stable version, on records the stable version fails too (its input, not its code): not aborted",
		"pipeline", name, "digest", short(d.Canary.Digest), "canary_failed", canary.failed, "canary_records", canary.records,
		"stable_failed", stable.failed, "stable_records", stable.records, "detail", v.detail)
}

// canaryReq is the body of POST .../canary/promote and .../canary/abort
// (optional).
type canaryReq struct {
	Reason string `json:"reason"`
}

func (a *API) canaryEnd(promote bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if !a.known(w, name) {
			return
		}
		if _, ok := a.canaries(w); !ok {
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
		if err := a.endCanary(r.Context(), name, promote, reason); err != nil {
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
