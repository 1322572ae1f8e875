package admin

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/registry"
)

// canaryDeployer is a fakeDeployer that runs canaries, logging each step
// ("deploy <digest>", "canary <digest>", "promote", "abort").
type canaryDeployer struct {
	fakeDeployer
	cmu     sync.Mutex
	canary  string
	percent int
	steps   []string
}

func (c *canaryDeployer) step(s string) {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	c.steps = append(c.steps, s)
}

func (c *canaryDeployer) Deploy(ctx context.Context, p string, wasm []byte) (host.Info, error) {
	info, err := c.fakeDeployer.Deploy(ctx, p, wasm)
	if err == nil {
		c.step("deploy " + short(Digest(wasm)))
	}
	return info, err
}

func (c *canaryDeployer) SetCanary(ctx context.Context, p string, wasm []byte, percent int) (host.Info, error) {
	info, err := c.Check(ctx, p, wasm)
	if err != nil {
		return info, err
	}
	c.cmu.Lock()
	c.canary, c.percent = Digest(wasm), percent
	c.cmu.Unlock()
	c.step("canary " + short(Digest(wasm)))
	return info, nil
}

func (c *canaryDeployer) EndCanary(p string, promote bool) bool {
	c.cmu.Lock()
	had := c.canary != ""
	c.canary, c.percent = "", 0
	c.cmu.Unlock()
	c.step(map[bool]string{true: "promote", false: "abort"}[promote])
	return had
}

func (c *canaryDeployer) CanaryDigest(p string) (string, int) {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	return c.canary, c.percent
}

// applyHost is an API on a canaryDeployer whose pipeline p runs stable,
// with the modules named stored.
func applyHost(t *testing.T, stable []byte, stored ...[]byte) (*API, *canaryDeployer) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := OpenStore(t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range append([][]byte{stable}, stored...) {
		if _, err := store.Put("p", "upload", m); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Activate("p", Digest(stable)); err != nil {
		t.Fatal(err)
	}
	d := &canaryDeployer{}
	api, err := NewAPI(testToken, store, d, 1024, log)
	if err != nil {
		t.Fatal(err)
	}
	return api, d
}

// noSource is a ModuleSource with no module: every module the tests apply
// is stored.
var noSource = sourceFunc(func(string) ([]byte, error) { return nil, ErrNotFound })

// TestApplyDeploymentStableFirst: a deployment of a new stable version with
// a canary beside it is applied stable first, then the canary. If the
// stable version cannot run here, the canary is not started (the host
// keeps running the earlier stable version alone), and the version
// reported as failing is the stable one.
func TestApplyDeploymentStableFirst(t *testing.T) {
	v1, v2, canary, bad := module("v1"), module("v2"), module("canary"), []byte("\x00asm\x01\x00\x00\x00 refused")
	api, d := applyHost(t, v1, v2, canary, bad)
	dep := registry.Deployment{Pipeline: "p", Digest: Digest(v2), Canary: &registry.Canary{Digest: Digest(canary), Percent: 10}}
	running, _, err := api.applyDeployment(context.Background(), noSource, dep)
	want := []string{"deploy " + short(Digest(v2)), "canary " + short(Digest(canary))}
	if err != nil || running != Digest(v2) || !slices.Equal(d.steps, want) {
		t.Fatalf("applied: runs %s, err %v, steps %q; want %q", short(running), err, d.steps, want)
	}

	api, d = applyHost(t, v1, canary, bad)
	dep.Digest = Digest(bad)
	running, failed, err := api.applyDeployment(context.Background(), noSource, dep)
	if err == nil || running != Digest(v1) || failed != Digest(bad) || len(d.steps) != 0 {
		t.Fatalf("a stable version refused here: runs %s, failed %s, err %v, steps %q", short(running), short(failed), err, d.steps)
	}
}

// TestApplyDeploymentEndsCanary: a deployment without a canary ends the
// one running even when its stable version cannot run here (the canary's
// partitions go back to the stable version); a deployment whose stable
// version is the canary running promotes it, without compiling it again.
func TestApplyDeploymentEndsCanary(t *testing.T) {
	v1, canary, bad := module("v1"), module("canary"), []byte("\x00asm\x01\x00\x00\x00 refused")
	api, d := applyHost(t, v1, canary, bad)
	d.canary, d.percent = Digest(canary), 10
	running, _, err := api.applyDeployment(context.Background(), noSource, registry.Deployment{Pipeline: "p", Digest: Digest(bad), Aborted: "replaced"})
	if err == nil || running != Digest(v1) || !slices.Equal(d.steps, []string{"abort"}) {
		t.Fatalf("abort beside a refused stable version: runs %s, err %v, steps %q", short(running), err, d.steps)
	}

	api, d = applyHost(t, v1, canary)
	d.canary, d.percent = Digest(canary), 10
	running, _, err = api.applyDeployment(context.Background(), noSource, registry.Deployment{Pipeline: "p", Digest: Digest(canary)})
	if err != nil || running != Digest(canary) || !slices.Equal(d.steps, []string{"promote"}) {
		t.Fatalf("promotion: runs %s, err %v, steps %q", short(running), err, d.steps)
	}
}

// TestApplyAtStart: a host starting applies the fleet's deployment as any
// later one (stable first, then the canary); a stable version that cannot
// run here stops the start, a canary that cannot is left out (its
// partitions run the stable version).
func TestApplyAtStart(t *testing.T) {
	v1, v2, bad := module("v1"), module("v2"), []byte("\x00asm\x01\x00\x00\x00 refused")
	api, d := applyHost(t, v1, v2, bad)
	dep := registry.Deployment{Pipeline: "p", Digest: Digest(v2), Canary: &registry.Canary{Digest: Digest(bad), Percent: 10}}
	if err := api.ApplyAtStart(context.Background(), noSource, dep); err != nil || !slices.Equal(d.steps, []string{"deploy " + short(Digest(v2))}) {
		t.Fatalf("a canary refused at start: err %v, steps %q; want the stable version alone", err, d.steps)
	}
	if running, _ := api.store.Active("p"); running != Digest(v2) {
		t.Fatalf("runs %s, want %s", short(running), short(Digest(v2)))
	}

	api, d = applyHost(t, v1, bad)
	dep = registry.Deployment{Pipeline: "p", Digest: Digest(bad)}
	if err := api.ApplyAtStart(context.Background(), noSource, dep); err == nil || len(d.steps) != 0 {
		t.Fatalf("a stable version refused at start: err %v, steps %q; want an error and nothing run", err, d.steps)
	}
}
