package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestEnsureTopics: with kafka.create_topics off, each topic a pipeline
// names that the brokers lack is a problem under the config key naming it
// first, and nothing is created; once the user's topics exist, the host
// creates its own (a retry tier with its input's partitions, the state
// changelog with as many). With kafka.create_topics on, the missing input
// is created with kafka.topic_partitions and the retry tier takes that.
func TestEnsureTopics(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	module := filepath.Join(t.TempDir(), "m.wasm")
	os.WriteFile(module, []byte("\x00asm"), 0o644)
	load := func(y string) *config.Config {
		return configFromYAML(t, y)
	}
	// p retries through a topic; s keeps state (not both in one pipeline).
	y := fmt.Sprintf(`
kafka: {brokers: [%q], group: g}
pipelines:
  - name: p
    module: %s
    inputs: [in]
    output: out
    dead_letter_topic: dlq
    allowed_outputs: [out, side]
    retry: {max_attempts: 3, backoff: [1s], topic_prefix: rt}
  - name: s
    module: %s
    inputs: [in]
    output: out
    dead_letter_topic: dlq
    retry: {max_attempts: 1}
    state: {enabled: true, dir: %q, changelog: cl}
`, brokers[0], module, module, t.TempDir())
	ensure := func(cfg *config.Config) error {
		r := &Runner{cfg: cfg, log: testLogger(t), brokers: cfg.Kafka.Brokers}
		return r.ensureTopics(context.Background())
	}
	partitions := func(topics ...string) map[string]int {
		details, err := kadm.NewClient(kafkatest.Client(t, brokers)).ListTopics(context.Background(), topics...)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]int{}
		for _, d := range details {
			if d.Err == nil {
				out[d.Topic] = len(d.Partitions)
			}
		}
		return out
	}

	kafkatest.CreateTopic(t, brokers, 3, "in")
	cfg := load(y)
	err := ensure(cfg)
	var probs config.Problems
	if !errors.As(err, &probs) {
		t.Fatalf("ensureTopics = %v, want config.Problems", err)
	}
	want := []string{
		`pipelines[0].dead_letter_topic: topic "dlq" does not exist (create it, or set kafka.create_topics: true)`,
		`pipelines[0].output: topic "out" does not exist (create it, or set kafka.create_topics: true)`,
		`pipelines[0].allowed_outputs[1]: topic "side" does not exist (create it, or set kafka.create_topics: true)`,
	}
	if !slices.Equal([]string(probs), want) {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(probs, "\n"), strings.Join(want, "\n"))
	}
	if got := partitions("rt.1s", "cl"); len(got) != 0 {
		t.Fatalf("created before the problems were fixed: %v", got)
	}

	kafkatest.CreateTopic(t, brokers, 1, "out", "dlq", "side")
	if err := ensure(cfg); err != nil {
		t.Fatal(err)
	}
	if got, want := partitions("rt.1s", "cl"), map[string]int{"rt.1s": 3, "cl": 3}; !maps.Equal(got, want) {
		t.Fatalf("the host's own topics: %v, want %v", got, want)
	}

	cfg = load(fmt.Sprintf(`
kafka: {brokers: [%q], group: g2, create_topics: true, topic_partitions: 2}
pipelines:
  - name: p
    module: %s
    inputs: [in2]
    output: out
    dead_letter_topic: dlq
    retry: {max_attempts: 2, backoff: [2s], topic_prefix: rt2}
`, brokers[0], module))
	if err := ensure(cfg); err != nil {
		t.Fatal(err)
	}
	if got, want := partitions("in2", "rt2.2s"), map[string]int{"in2": 2, "rt2.2s": 2}; !maps.Equal(got, want) {
		t.Fatalf("created with kafka.create_topics: %v, want %v", got, want)
	}
}

// TestAwaitTopics: ensureTopics returns only once the brokers' metadata
// lists what it created. awaitTopics returns at once for a topic that is
// there, asks again while one is not, and names what is still missing
// when its deadline ends.
func TestAwaitTopics(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "here")
	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	if err := awaitTopics(context.Background(), adm, "here"); err != nil {
		t.Fatalf("a topic that exists: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := awaitTopics(ctx, adm, "here", "nowhere")
	if err == nil || !strings.Contains(err.Error(), "nowhere") || strings.Contains(err.Error(), "here,") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a topic that never comes: %v; want an error naming it alone, ending on the deadline", err)
	}
	// A topic that appears while awaitTopics asks.
	done := make(chan error, 1)
	go func() { done <- awaitTopics(context.Background(), adm, "later") }()
	time.Sleep(200 * time.Millisecond)
	kafkatest.CreateTopic(t, brokers, 1, "later")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a topic created while waiting: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("awaitTopics did not see a topic created while it waited")
	}
}

// TestAwaitTopicsNotCached: a topic described as missing just before it
// is created (as ensureTopics describes every topic first) is seen as
// soon as the broker lists it. The client's cached metadata (kept for
// kgo.MetadataMinAge, 5 s) said it was missing: awaitTopics asked the
// cache, and every start with a topic to create waited out those 5 s.
func TestAwaitTopicsNotCached(t *testing.T) {
	t.Parallel() // owns its in-process broker
	brokers := kafkatest.Fake(t)
	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	if d, err := adm.ListTopics(context.Background(), "fresh"); err != nil || d["fresh"].Err == nil {
		t.Fatalf("before its creation: %v %+v", err, d)
	}
	kafkatest.CreateTopic(t, brokers, 1, "fresh")
	// Well under the 5 s the cache keeps the topic's absence.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := awaitTopics(ctx, adm, "fresh"); err != nil {
		t.Fatalf("a topic created after it was described as missing: %v", err)
	}
}
