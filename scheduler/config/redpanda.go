package config

// Redpanda is how a pipeline runs a Redpanda Data Transform (a module that
// imports redpanda_transform, run unmodified: docs/REDPANDA-TRANSFORMS.md);
// a wasmstream module ignores it.
type Redpanda struct {
	// Strict keeps Redpanda's own limits: 2 MiB of memory (32 pages,
	// whatever limits.memory_pages says) and at most 8 output topics (the
	// output and allowed_outputs).
	Strict bool `koanf:"strict"`
	// OutputPartitioning is how the transform's outputs are partitioned:
	// key (Kafka's default partitioner: the key's hash, records without a
	// key spread) or same_as_input (Redpanda's: the input record's
	// partition, modulo the output topic's partition count).
	OutputPartitioning string `koanf:"output_partitioning"`
}

// The redpanda.output_partitioning values.
const (
	RedpandaPartitionKey         = "key"
	RedpandaPartitionSameAsInput = "same_as_input"
)

// redpandaStrictOutputs is Redpanda's bound on a transform's output topics.
const redpandaStrictOutputs = 8

// checkRedpanda checks a pipeline's redpanda section.
func checkRedpanda(add addFunc, key keyFunc, p *Pipeline) {
	switch p.Redpanda.OutputPartitioning {
	case RedpandaPartitionKey, RedpandaPartitionSameAsInput:
	default:
		add(key("redpanda.output_partitioning"), "%q: want %s (the key's hash, Kafka's default) or %s (the input record's partition, Redpanda's)", p.Redpanda.OutputPartitioning, RedpandaPartitionKey, RedpandaPartitionSameAsInput)
	}
	if n := 1 + len(p.AllowedOutputs); p.Redpanda.Strict && n > redpandaStrictOutputs {
		add(key("redpanda.strict"), "true: Redpanda allows a transform %d output topics, the pipeline has %d (output and allowed_outputs)", redpandaStrictOutputs, n)
	}
}
