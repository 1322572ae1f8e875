// Package config is wasmstream's one configuration path: the YAML file,
// overridden by WASMSTREAM_* environment variables, overridden by flags, into
// one typed Config, checked by one Validate that lists every problem with the
// key it concerns. Unknown keys are errors. The commented config.yaml at the
// repository root is the reference for every key.
//
// Where to look:
//
//   - types.go: Config and its sections, one Go field per key (the koanf
//     tag is the key), and the helpers that derive names from them
//     (GroupID, RetryTopics, ModulePath, ...).
//   - defaults.go: every default, in one table (Defaults and
//     PipelineDefaults), and applyDefaults, which fills unset keys from it;
//     the async section's defaults and checks are stated beside each
//     operation (package host/asyncop), which the table takes whole.
//     config.yaml states the same values; a test fails if the two drift.
//   - load.go: Load (file, then environment, then --set flags; unknown keys;
//     the "auto" values), then defaults, then Validate.
//   - validate.go: Validate, one small function per section, each problem
//     naming its key; topology.go: checks across pipelines (cycles, shared
//     topics, groups, transactional ids); numbers.go: strict integers.
package config
