package scheduler

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

type failures struct {
	mu sync.Mutex
	es []FailureEvent
}

func (f *failures) ObserveFailure(e *FailureEvent) {
	f.mu.Lock()
	f.es = append(f.es, *e)
	f.mu.Unlock()
}

func (f *failures) get() []FailureEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]FailureEvent(nil), f.es...)
}

// TestFailureObserverAndView: the observer sees each failed attempt of a
// poison record where it is routed (two retry tiers, then the dead-letter
// topic) with its origin, and View shows the retry tiers and partitions.
func TestFailureObserverAndView(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq", "g.p.retry.300ms", "g.p.retry.600ms")
	kafkatest.Produce(t, brokers, "in", 5, retryInput)
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "enrich"), "in", "out", "dlq",
		"    retry: {max_attempts: 3, backoff: [300ms, 600ms]}", "")
	r, err := NewRunner(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	obs := &failures{}
	if err := r.ObserveFailures(obs); err != nil {
		t.Fatal(err)
	}
	r.Start()
	defer r.Stop(context.Background())
	if err := r.ObserveFailures(obs); err != ErrStarted {
		t.Errorf("ObserveFailures after Start: %v", err)
	}
	var poison []FailureEvent
	kafkatest.Eventually(t, time.Minute, "the poison record's three attempts observed", func() bool {
		poison = poison[:0]
		for _, e := range obs.get() {
			if e.OriginOffset == 0 {
				poison = append(poison, e)
			}
		}
		return len(poison) == 3
	})
	for i, e := range poison {
		wantDest, retry := append(cfg.Pipelines[0].RetryTopics(), "dlq")[i], i < 2
		if e.Attempt != i+1 || e.Dest != wantDest || e.Retry != retry || e.Kind != KindGuestRetry || e.OriginTopic != "in" || e.OriginPartition != 0 {
			t.Errorf("attempt %d observed as %+v", i+1, e)
		}
		if retry && time.Until(e.Due) > time.Second {
			t.Errorf("attempt %d due at %v", i+1, e.Due)
		}
	}
	v := r.View()
	if len(v) != 2 || v[0].Primary != "" || v[1].Primary != "p" || len(v[0].Tiers) != 2 || v[0].Tiers[1].Topic != cfg.Pipelines[0].TierTopic(1) || v[0].Tiers[1].Delay != 600*time.Millisecond {
		t.Fatalf("view: %+v", v)
	}
	if len(v[0].Partitions) != 1 || v[0].Module.Digest == "" {
		t.Errorf("primary view: %+v", v[0])
	}
	// Each attempt carries the record's value (a preview), its own headers
	// only (not the retry copies' wasmstream.* ones) and the version that ran.
	for i, e := range poison {
		if e.ModuleDigest != v[0].Module.Digest || e.Canary || e.ValueSize <= 0 || len(e.Value) != min(e.ValueSize, MaxEventValueBytes) || len(e.Headers) != 0 {
			t.Errorf("attempt %d: digest %q canary %v value %q (%d B) headers %+v", i+1, e.ModuleDigest, e.Canary, e.Value, e.ValueSize, e.Headers)
		}
	}
}
