package config

import (
	"strings"
	"testing"
)

// TestVersionSource: version_source is registry (the default) or config;
// module_label and canary are for config only, and a canary needs a
// module, a share of 1-99 and the fleet registry. Each problem names its
// key.
func TestVersionSource(t *testing.T) {
	pipeline := func(extra string) string {
		return strings.Replace(good, "    limits:\n", extra+"    limits:\n", 1)
	}
	c, err := Load(write(t, good), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Pipelines[0].VersionFromConfig() {
		t.Error("the default version_source is config, want registry")
	}
	c, err = Load(write(t, pipeline("    version_source: config\n    module_label: v1.2.0\n    canary: {module: m.wasm, percent: 10, label: v1.3.0-rc1}\n")), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &c.Pipelines[0]
	if !p.VersionFromConfig() || p.ModuleLabel != "v1.2.0" || p.Canary.Percent != 10 || c.CanaryModulePath(p) != c.ModulePath(p) {
		t.Errorf("version_source: config: %+v, canary module %s", p, c.CanaryModulePath(p))
	}
	for _, tc := range []struct{ extra, set, want string }{
		{"    version_source: git\n", "", "pipelines[0].version_source: \"git\": want registry"},
		{"    module_label: v1\n", "", "pipelines[0].module_label: is for version_source: config"},
		{"    canary: {module: m.wasm, percent: 10}\n", "", "pipelines[0].canary: is for version_source: config"},
		{"    version_source: config\n    module_label: -v1\n", "", "pipelines[0].module_label: label \"-v1\""},
		{"    version_source: config\n    canary: {module: none.wasm, percent: 10}\n", "", "pipelines[0].canary.module: "},
		{"    version_source: config\n    canary: {module: m.wasm, percent: 100}\n", "", "pipelines[0].canary.percent: 100"},
		{"    version_source: config\n    canary: {percent: 5}\n", "", "pipelines[0].canary.module: a module path is required"},
		{"    version_source: config\n    canary: {module: m.wasm, percent: 10}\n", "admin.registry=false", "pipelines[0].canary: a canary runs across the fleet"},
	} {
		var set []string
		if tc.set != "" {
			set = []string{tc.set}
		}
		_, err := Load(write(t, pipeline(tc.extra)), nil, set)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v; want %q", tc.extra, err, tc.want)
		}
	}
}
