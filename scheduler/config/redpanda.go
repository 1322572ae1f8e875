package config

// Redpanda is how a pipeline runs a Redpanda Data Transform (a module that
// imports redpanda_transform, run unmodified: docs/REDPANDA-TRANSFORMS.md);
// a wasmstream module ignores it.
type Redpanda struct {
	// Strict keeps Redpanda's own limits: 2 MiB of memory (32 pages,
	// whatever limits.memory_pages says) and at most 8 output topics (the
	// output and allowed_outputs).
	Strict bool `koanf:"strict"`
}

// redpandaStrictOutputs is Redpanda's bound on a transform's output topics.
const redpandaStrictOutputs = 8

// checkRedpanda checks a pipeline's redpanda section.
func checkRedpanda(add addFunc, key keyFunc, p *Pipeline) {
	if n := 1 + len(p.AllowedOutputs); p.Redpanda.Strict && n > redpandaStrictOutputs {
		add(key("redpanda.strict"), "true: Redpanda allows a transform %d output topics, the pipeline has %d (output and allowed_outputs)", redpandaStrictOutputs, n)
	}
}
