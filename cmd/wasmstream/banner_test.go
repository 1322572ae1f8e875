package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler/admin"
	"github.com/wasmstream/wasmstream/scheduler/assembly"
)

// A version deployed before a restart replaces the config's module: the
// host says so loudly (Overrides, the banner) and does not compile the
// config's module first — here it is not even a module, and the host
// starts; with --compile-config-module it is compiled and the start fails
// naming it. The banner names the pipelines, brokers, dashboard and admin
// API.
func TestRunDeployedVersionOverridesConfigLoudly(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("WASMSTREAM_ADMIN_TOKEN", testAdminToken)
	cfgModule := writeFile(t, dir, "config.wasm", []byte("not a module: compiling it would fail"))
	store, err := admin.OpenStore(filepath.Join(dir, "store"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	deployed := wt.Minimal(wt.I32Const(0)).Bytes()
	d, err := store.Put("p", "upload", deployed)
	if err == nil {
		err = store.SetLabel(d, "v7")
	}
	if err == nil {
		err = store.Activate("p", d)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg := adminHostConfig(t, dir, "banner", cfgModule, "127.0.0.1:0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, err := assembly.StartWith(ctx, cfg, log, assembly.Options{CompileConfigModules: true}); err == nil || !strings.Contains(err.Error(), "pipelines[0].module") {
		t.Fatalf("--compile-config-module with a broken config module: %v", err)
	}
	h, err := assembly.StartWith(ctx, cfg, log, assembly.Options{})
	if err != nil {
		t.Fatalf("the deployed version should run without the config's module compiled: %v", err)
	}
	defer h.Shutdown()
	ov := h.Overrides()
	if len(ov) != 1 || ov[0].Digest != d || ov[0].Label != "v7" || ov[0].ConfigModule != cfgModule || !strings.Contains(ov[0].From, "module store") {
		t.Fatalf("overrides %+v", ov)
	}
	if v := h.Runner().View()[0]; v.Module.Digest != d || v.Label != "v7" {
		t.Fatalf("runs %s (%q)", v.Module.Digest, v.Label)
	}
	b := banner(cfg, h.Runner().Brokers(), h.DashboardURL(), h.AdminURL(), ov)
	for _, want := range []string{"running 1 pipeline", "p ", "in -> out", "brokers     127.0.0.1:", "dashboard   http://127.0.0.1:", "/dashboard", "admin API   http://127.0.0.1:",
		"CONFIG OVERRIDDEN: pipeline p runs " + d[:12] + " (v7) from the module store", "NOT the config's module " + cfgModule} {
		if !strings.Contains(b, want) {
			t.Errorf("banner lacks %q:\n%s", want, b)
		}
	}
	// Without a deployed version nothing is said to be overridden.
	if b := banner(cfg, []string{"k:9092"}, "", "", nil); strings.Contains(b, "OVERRIDDEN") || !strings.Contains(b, "dashboard   off") {
		t.Errorf("plain banner:\n%s", b)
	}
}
