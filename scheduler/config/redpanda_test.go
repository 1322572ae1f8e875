package config

import (
	"strings"
	"testing"
)

// redpanda.strict loads, and refuses more output topics than Redpanda's 8,
// naming the key.
func TestRedpandaStrict(t *testing.T) {
	strict := strings.Replace(good, "    dead_letter_topic: demo-in.dlq\n", "    dead_letter_topic: demo-in.dlq\n    redpanda: {strict: true}\n", 1)
	c, err := Load(write(t, strict), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Pipelines[0].Redpanda.Strict {
		t.Fatal("redpanda.strict not read")
	}
	if c, err := Load(write(t, good), nil, nil); err != nil || c.Pipelines[0].Redpanda.Strict {
		t.Fatalf("default: %v %v", err, c)
	}
	nine := strings.Replace(strict, "    output: demo-out\n", "    output: demo-out\n    allowed_outputs: [o1, o2, o3, o4, o5, o6, o7, o8]\n", 1)
	_, err = Load(write(t, nine), nil, nil)
	if want := "pipelines[0].redpanda.strict: true: Redpanda allows a transform 8 output topics, the pipeline has 9"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("%v, want %q", err, want)
	}
}

func TestRedpandaOutputPartitioning(t *testing.T) {
	c, err := Load(write(t, good), nil, nil)
	if err != nil || c.Pipelines[0].Redpanda.OutputPartitioning != RedpandaPartitionKey {
		t.Fatalf("default: %v %+v", err, c.Pipelines[0].Redpanda)
	}
	same := strings.Replace(good, "    dead_letter_topic: demo-in.dlq\n", "    dead_letter_topic: demo-in.dlq\n    redpanda: {output_partitioning: same_as_input}\n", 1)
	if c, err := Load(write(t, same), nil, nil); err != nil || c.Pipelines[0].Redpanda.OutputPartitioning != RedpandaPartitionSameAsInput {
		t.Fatalf("same_as_input: %v", err)
	}
	bad := strings.Replace(same, "same_as_input", "round_robin", 1)
	_, err = Load(write(t, bad), nil, nil)
	if want := `pipelines[0].redpanda.output_partitioning: "round_robin": want key`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("%v, want %q", err, want)
	}
}
