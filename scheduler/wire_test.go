package scheduler

import (
	"context"
	"fmt"
	"testing"

	"github.com/wasmstream/wasmstream/scheduler/internal/source"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestWiringTable: each row of the wiring table (Pipeline.wire; DESIGN.md,
// "Seams: source, ledger, sink, committer") gives a pipeline the source,
// ledger, sink and committer the table names, and a consumer group's poll
// loop is paced by the pipeline's own committer.
func TestWiringTable(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	for _, c := range []struct {
		name, keys                string
		src, ledger, sink, commit string
	}{
		{"group × at_least_once", "", "*source.Group", "ledger.Offsets", "*partition.PlainSink", "*commit.Offsets"},
		{"group × exactly_once", "    guarantee: exactly_once", "*source.Group", "ledger.Txn", "*partition.TxnSink", "*commit.Transactions"},
		{"share × at_least_once", "    consume: share\n    ordering: none", "*source.Share", "ledger.Share", "*partition.PlainSink", "*commit.ShareAcks"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfigWith(t, brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq", c.keys, "")
			r, err := NewRunner(context.Background(), cfg, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Stop(context.Background())
			p := r.pipelines[0]
			got := fmt.Sprintf("%T %T %T %T", p.src, p.ledger, p.sink, p.commit)
			if want := fmt.Sprintf("%s %s %s %s", c.src, c.ledger, c.sink, c.commit); got != want {
				t.Fatalf("source, ledger, sink, committer: %s, want %s", got, want)
			}
			if g, ok := p.src.(*source.Group); ok && g.Pacer() != p.commit.(source.Pacer) {
				t.Fatalf("the poll loop is paced by %T, not by the pipeline's committer %T", g.Pacer(), p.commit)
			}
		})
	}
}
