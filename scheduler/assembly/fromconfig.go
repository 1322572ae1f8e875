package assembly

import (
	"context"
	"fmt"
	"os"

	"github.com/wasmstream/wasmstream/scheduler/admin"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// fromConfig names the pipelines whose config decides their version
// (version_source: config): no deployed version overrides their module at
// start (deployedModules), and the admin API refuses to deploy them
// (API.FromConfig).
func fromConfig(cfg *config.Config) []string {
	var names []string
	for i := range cfg.Pipelines {
		if cfg.Pipelines[i].VersionFromConfig() {
			names = append(names, cfg.Pipelines[i].Name)
		}
	}
	return names
}

// resumeFromConfig makes pipeline pc, whose config decides its version,
// run the config's module (running already: deployedModules leaves it to
// the runner) and records it in the store as the active version, with
// module_label. With the fleet registry it writes the module, and the
// config's canary (checked to load here first), to the fleet as the
// pipeline's deployment (API.PublishFromConfig), which every host then
// switches to; when the registry has that deployment already, it applies
// it as at any start (the canary beside the module).
func (h *Host) resumeFromConfig(ctx context.Context, store *admin.Store, api *admin.API, i int) error {
	cfg := h.cfg
	pc := &cfg.Pipelines[i]
	key := func(sub string) string { return fmt.Sprintf("pipelines[%d].%s", i, sub) }
	wasm, err := os.ReadFile(cfg.ModulePath(pc))
	if err != nil {
		return fmt.Errorf("%s: %w", key("module"), err)
	}
	d, err := store.Put(pc.Name, "config", wasm)
	if err == nil {
		err = store.SetLabel(d, pc.ModuleLabel)
	}
	if err == nil {
		err = store.Activate(pc.Name, d)
	}
	if err != nil {
		return fmt.Errorf("admin.store_dir: %w", err)
	}
	if h.reg == nil {
		return nil
	}
	v := admin.ConfigVersion{Pipeline: pc.Name, Digest: d, Wasm: wasm, Label: pc.ModuleLabel}
	if c := pc.Canary; c.Module != "" {
		cw, err := os.ReadFile(cfg.CanaryModulePath(pc))
		if err != nil {
			return fmt.Errorf("%s: %w", key("canary.module"), err)
		}
		// A canary that does not load here would load on no host: it is
		// not written to the fleet, and the host does not start.
		if _, err := h.r.Check(ctx, pc.Name, cw); err != nil {
			return fmt.Errorf("%s: %s: %w", key("canary.module"), cfg.CanaryModulePath(pc), err)
		}
		v.Canary = &admin.ConfigCanary{Digest: admin.Digest(cw), Wasm: cw, Label: c.Label, Percent: c.Percent}
	}
	wrote, err := api.PublishFromConfig(ctx, v)
	if err != nil {
		return fmt.Errorf("admin.registry: %s: version_source: config: %w", key("module"), err)
	}
	if wrote {
		h.log.Info("the config's version deployed to the fleet", "pipeline", pc.Name, "digest", short(d), "label", pc.ModuleLabel,
			"canary", short(cfg.CanaryModulePath(pc)), "registry", h.reg.Deploys)
		return nil
	}
	return h.applyFleet(ctx, api, pc.Name, false)
}
