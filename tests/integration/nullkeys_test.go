//go:build integration

package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestNullKeyOutputsSpread: outputs without a key spread over the output's
// partitions (ABI.md: null keys spread stickily, a batch at a time), on
// the real broker. Before the partitioner forwarded the sticky
// partitioner's new-batch notification, all of them landed on one
// partition for the life of the process.
func TestNullKeyOutputsSpread(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in, dlq)
	const parts = 8
	kafkatest.CreateTopic(t, brokers, parts, out)
	const count = 10000
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := ctxTimeout(2 * time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, count)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: in, Value: []byte(fmt.Sprintf("v-%06d-%0100d", i, i))} // no key
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(writeConfig(t, brokers, n, modules["uppercase"], in, out, dlq, ""), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := scheduler.NewRunner(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	defer r.Stop(ctx)
	rd := kafkatest.NewReader(t, brokers, out)
	rd.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= count })
	per := make([]int, parts)
	for _, rec := range rd.Recs {
		if rec.Key != nil {
			t.Fatalf("output with key %q: the input had none", rec.Key)
		}
		per[rec.Partition]++
	}
	t.Logf("%d null-key outputs per partition: %v", len(rd.Recs), per)
	// Placement moves every 16 KiB (internal/pinpart), biased towards the
	// partitions with less buffered, so the shares are uneven: every
	// partition gets at least a quarter of its share, none more than three
	// times it.
	mean := len(rd.Recs) / parts
	for p, c := range per {
		if c < mean/4 || c > 3*mean {
			t.Fatalf("partition %d got %d of %d null-key outputs (per partition: %v): not spread", p, c, len(rd.Recs), per)
		}
	}
}
