package config

import (
	"strings"
	"testing"
)

// The schema-registry operations' section (async.schema_registry, package
// host/asyncop) loads with its defaults, grants nothing unless told, and
// names its keys: enabled needs schema_registry.url, register_subjects
// needs enabled.
func TestAsyncSchemaRegistrySection(t *testing.T) {
	c, err := Load(write(t, good), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Pipelines[0].Async.SchemaRegistry
	if s.Enabled || len(s.RegisterSubjects) != 0 || s.MaxSchemaBytes != 1<<20 || s.MaxReferences != 64 {
		t.Fatalf("defaults: %+v", s)
	}
	with := func(cfg, async string) string {
		return strings.Replace(cfg, "    module: m.wasm\n", "    module: m.wasm\n    async:\n      schema_registry: "+async+"\n", 1)
	}
	c, err = Load(write(t, with(withSchema, "{enabled: true, register_subjects: [audit-value, 'logs-*'], max_references: 8}")), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Pipelines[0].Async.SchemaRegistry; !s.Enabled || len(s.RegisterSubjects) != 2 || s.MaxReferences != 8 || s.MaxSchemaBytes != 1<<20 {
		t.Fatalf("loaded %+v", s)
	}
	for _, tc := range []struct{ cfg, want string }{
		{with(good, "{enabled: true}"), "pipelines[0].async.schema_registry.enabled: true needs a schema registry: set schema_registry.url"},
		{with(withSchema, "{register_subjects: [a]}"), "pipelines[0].async.schema_registry.register_subjects: is set but pipelines[0].async.schema_registry.enabled is false"},
		{with(withSchema, "{enabled: true, register_subjects: ['a*b']}"), `pipelines[0].async.schema_registry.register_subjects[0]: "a*b": want a subject name, or a prefix ending in "*"`},
		{with(withSchema, "{enabled: true, max_schema_bytes: -1}"), "pipelines[0].async.schema_registry.max_schema_bytes: -1: want 1 to 64 MiB"},
		{with(withSchema, "{enabled: true, registr_subjects: [a]}"), "pipelines[0].async.schema_registry.registr_subjects: unknown key"},
	} {
		_, err := Load(write(t, tc.cfg), nil, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v\nwant %s", err, tc.want)
		}
	}
}
