package config

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/wasmstream/wasmstream/internal/verlabel"
)

// A pipeline's version_source says what decides the module version it
// runs (README, "GitOps"; RATIONALE.md, "Declarative versions"):
//
//   - registry (the default): the version deployed through the admin API —
//     the fleet registry's deployment, else the module store's — beats the
//     config's module, at every start ("CONFIG OVERRIDDEN"). The config's
//     module is the first version only.
//   - config: the config's module is the version. At start the host runs
//     it and, with the fleet registry, writes it to the fleet as the
//     pipeline's deployment (with module_label, and canary's module beside
//     it), unless the registry has that deployment already; every host of
//     the group switches to it. The admin API refuses deploys, rollbacks
//     and canaries of the pipeline, saying why: a change goes through the
//     config (Git, then Argo CD or Flux), or a host's next start would undo
//     it.
const (
	VersionSourceRegistry = "registry"
	VersionSourceConfig   = "config"
)

// ConfigCanary is a canary the config declares (version_source: config):
// Module runs on Percent of the pipeline's partitions on every host, beside
// the pipeline's module. Promoting it is a config change (module: its
// module, no canary); so is aborting it (no canary).
type ConfigCanary struct {
	Module  string `koanf:"module"`
	Percent int    `koanf:"percent"`
	Label   string `koanf:"label"`
}

// VersionFromConfig reports whether p's config decides its version
// (version_source: config).
func (p *Pipeline) VersionFromConfig() bool { return p.VersionSource == VersionSourceConfig }

// CanaryModulePath is the path of p's canary module (canary.module),
// resolved against the config's directory as module is; "" for none.
func (c *Config) CanaryModulePath(p *Pipeline) string {
	if p.Canary.Module == "" || filepath.IsAbs(p.Canary.Module) || c.Dir == "" {
		return p.Canary.Module
	}
	return filepath.Join(c.Dir, p.Canary.Module)
}

// checkVersionSource checks version_source and the keys only it allows
// (module_label, canary).
func (c *Config) checkVersionSource(add addFunc, key keyFunc, p *Pipeline) {
	switch p.VersionSource {
	case "", VersionSourceRegistry:
		if p.ModuleLabel != "" {
			add(key("module_label"), "is for version_source: config (with the registry, a deploy names its version: deploy --label)")
		}
		if p.Canary != (ConfigCanary{}) {
			add(key("canary"), "is for version_source: config (with the registry, start a canary with deploy --canary)")
		}
		return
	case VersionSourceConfig:
	default:
		add(key("version_source"), "%q: want registry (deploys through the admin API win) or config (the config's module wins)", p.VersionSource)
		return
	}
	if err := verlabel.Check(p.ModuleLabel); err != nil {
		add(key("module_label"), "%v", err)
	}
	if p.Canary == (ConfigCanary{}) {
		return
	}
	cn := &p.Canary
	if !*c.Admin.Enabled || !*c.Admin.Registry {
		add(key("canary"), "a canary runs across the fleet through its registry: want admin.enabled and admin.registry")
	}
	if path := c.CanaryModulePath(p); cn.Module == "" {
		add(key("canary.module"), "a module path is required")
	} else if st, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		add(key("canary.module"), "%s does not exist", path)
	} else if err != nil {
		add(key("canary.module"), "%v", errors.Unwrap(err))
	} else if st.IsDir() {
		add(key("canary.module"), "%s is a directory, want a .wasm file", path)
	}
	if cn.Percent < 1 || cn.Percent > 99 {
		add(key("canary.percent"), "%d: want the share of the partitions it runs on, 1 to 99", cn.Percent)
	}
	if err := verlabel.Check(cn.Label); err != nil {
		add(key("canary.label"), "%v", err)
	}
}
