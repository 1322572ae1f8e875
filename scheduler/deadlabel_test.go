package scheduler

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestDeadLetterNamesVersionLabel: a dead letter carries the label of the
// version that failed it beside its digest (wasmstream.module.label), so
// that `dlq list --version` and `dlq redrive --version` select it by
// either.
func TestDeadLetterNamesVersionLabel(t *testing.T) {
	t.Parallel()
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "enrich"), "in", "out", "dlq", "", "")
	r, err := NewRunner(context.Background(), cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	digest := r.View()[0].Module.Digest
	r.SetLabel("p", digest, "v7-label")
	r.Start()
	defer r.Stop(context.Background())
	if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), &kgo.Record{Topic: "in", Key: []byte("k"), Value: []byte(`{"fault":"fail"}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dl := kafkatest.NewReader(t, brokers, "dlq")
	dl.ReadUntil(t, time.Minute, "the dead letter", func(rs []*kgo.Record) bool { return len(rs) == 1 })
	if d, l := kafkatest.Header(dl.Recs[0], HeaderModuleDigest), kafkatest.Header(dl.Recs[0], HeaderModuleLabel); d != digest || l != "v7-label" {
		t.Errorf("dead letter: digest %q label %q, want %q and v7-label", d, l, digest)
	}
}
