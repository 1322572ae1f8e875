package admin

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/registry"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestFromConfig: a host whose config decides pipeline p's version
// (version_source: config) writes the config's module, label and canary
// to the fleet as p's deployment, and another host runs them; a host that
// starts with the same config writes nothing, nor restarts a canary the
// fleet aborted; a config without the canary aborts it. The API of the
// config's host refuses deploys, rollbacks, canaries and promotions of p,
// saying why, and takes an upload that deploys nothing and an abort.
func TestFromConfig(t *testing.T) {
	brokers := kafkatest.Fake(t)
	v1, v2, v3 := module("v1"), module("v2"), module("v3")
	b := newFleetHost(t, brokers, "host-b", v1) // version_source: registry, following the fleet

	// host-a starts with a config naming v2 (label v2.0.0).
	srv, _, store, api := newTestAPIWith(t, &bytes.Buffer{}, nil)
	reg := openRegistry(t, brokers, "host-a")
	api.UseRegistry(reg)
	api.FromConfig("p")
	cv := ConfigVersion{Pipeline: "p", Digest: Digest(v2), Wasm: v2, Label: "v2.0.0"}
	if wrote, err := api.PublishFromConfig(context.Background(), cv); err != nil || !wrote {
		t.Fatalf("PublishFromConfig: %v, %v; want it written", wrote, err)
	}
	kafkatest.Eventually(t, 30*time.Second, "host-b runs the config's v2", func() bool { return bytes.Equal(b.d.running(), v2) })
	if l := b.d.label(Digest(v2)); l != "v2.0.0" {
		t.Errorf("host-b labels v2 %q, want the config's v2.0.0", l)
	}

	// The API refuses what would change p's version, naming the key.
	for _, req := range []struct{ path, ctype string }{
		{"/v1/pipelines/p/modules?deploy=true", "application/wasm"},
		{"/v1/pipelines/p/modules?canary=10", "application/wasm"},
		{"/v1/pipelines/p/deploy", "application/json"},
		{"/v1/pipelines/p/rollback", ""},
		{"/v1/pipelines/p/canary/promote", ""},
	} {
		body := v3
		if req.ctype == "application/json" {
			body = []byte(`{"digest": "` + Digest(v1) + `"}`)
		} else if req.ctype == "" {
			body = nil
		}
		if code, msg := do(t, srv, "POST", req.path, testToken, req.ctype, body); code != 409 || !strings.Contains(msg, "version_source: config") {
			t.Errorf("POST %s: %d %s; want 409 saying version_source: config", req.path, code, msg)
		}
	}
	if code, msg := do(t, srv, "POST", "/v1/pipelines/p/modules", testToken, "application/wasm", v3); code != 201 {
		t.Errorf("an upload that deploys nothing: %d %s", code, msg)
	}
	if _, err := store.Get(Digest(v3)); err != nil {
		t.Errorf("the upload is not stored: %v", err)
	}
	if code, msg := do(t, srv, "POST", "/v1/pipelines/p/canary/abort", testToken, "", nil); strings.Contains(msg, "version_source") {
		t.Errorf("an abort refused for version_source: %d %s", code, msg)
	}

	// A host that starts with the same config finds it deployed: nothing
	// written.
	again := func() *API {
		_, _, _, api := newTestAPIWith(t, &bytes.Buffer{}, nil)
		api.UseRegistry(openRegistry(t, brokers, "host-c"))
		api.FromConfig("p")
		return api
	}
	if wrote, err := again().PublishFromConfig(context.Background(), cv); err != nil || wrote {
		t.Fatalf("the same config again: wrote %v, %v; want nothing written", wrote, err)
	}

	// The config adds a canary, v3 on 25%: host-b runs it beside v2.
	cv.Canary = &ConfigCanary{Digest: Digest(v3), Wasm: v3, Label: "v3.0.0-rc1", Percent: 25}
	if wrote, err := again().PublishFromConfig(context.Background(), cv); err != nil || !wrote {
		t.Fatalf("the config's canary: %v, %v; want it written", wrote, err)
	}
	kafkatest.Eventually(t, 30*time.Second, "the canary in the registry", func() bool {
		d, ok := b.reg.Deployment("p")
		return ok && d.Canary != nil && d.Canary.Digest == Digest(v3) && d.Canary.Percent == 25 && d.Digest == Digest(v2)
	})

	// The fleet aborts it (its own failures): a host that starts with the
	// same config does not start it again.
	d, _ := b.reg.Deployment("p")
	d.Aborted, d.AbortedCanary, d.Canary = "its own failures", d.Canary, nil
	if _, err := b.reg.Publish(context.Background(), d, nil); err != nil {
		t.Fatal(err)
	}
	kafkatest.Eventually(t, 30*time.Second, "the abort in the registry", func() bool {
		d, _ := b.reg.Deployment("p")
		return d.Canary == nil && d.Aborted != ""
	})
	if wrote, err := again().PublishFromConfig(context.Background(), cv); err != nil || wrote {
		t.Fatalf("the aborted canary's config again: wrote %v, %v; want nothing written", wrote, err)
	}

	// Promoted in the config (module v3, no canary): v3 is the deployment,
	// v2 the version before it.
	promoted := ConfigVersion{Pipeline: "p", Digest: Digest(v3), Wasm: v3, Label: "v3.0.0"}
	if wrote, err := again().PublishFromConfig(context.Background(), promoted); err != nil || !wrote {
		t.Fatalf("the promotion: %v, %v", wrote, err)
	}
	kafkatest.Eventually(t, 30*time.Second, "host-b runs v3", func() bool { return bytes.Equal(b.d.running(), v3) })
	var got registry.Deployment
	kafkatest.Eventually(t, 30*time.Second, "v3 in the registry", func() bool { got, _ = b.reg.Deployment("p"); return got.Digest == Digest(v3) })
	if n := len(got.History); n == 0 || got.History[n-1] != Digest(v2) || got.Label != "v3.0.0" {
		t.Errorf("deployment %+v: want v3.0.0, v2 before it", got)
	}
}
