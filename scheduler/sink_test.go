package scheduler

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestOutputProduceFailureDeadLettered: at_least_once, the broker refuses
// one produce of outputs (INVALID_RECORD, not retried by the client): the
// records whose outputs it carried take their failure path (the sink's
// undeliverable: a dead letter of kind produce, produced from the
// background), every other record's output arrives, records produced
// after it have their outputs, and the committed offset passes every
// record once each is in one or the other.
func TestOutputProduceFailureDeadLettered(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	brokers := c.ListenAddrs()
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 20
	kafkatest.Produce(t, brokers, "in", n, strconv.Itoa)
	var refused atomic.Bool
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		// The inputs were produced before: the first produce is of
		// outputs (newer requests name topics by ID only).
		pr := req.(*kmsg.ProduceRequest)
		if !refused.CompareAndSwap(false, true) {
			return nil, nil, false
		}
		c.KeepControl() // later produces pass (handled: false)
		resp := pr.ResponseKind().(*kmsg.ProduceResponse)
		for _, rt := range pr.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.InvalidRecord.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	cfg := testConfig(t, brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	out, dl := kafkatest.NewReader(t, brokers, "out"), kafkatest.NewReader(t, brokers, "dlq")
	kafkatest.Eventually(t, time.Minute, "every record in the output or dead-lettered", func() bool {
		out.ReadFor(100 * time.Millisecond)
		dl.ReadFor(100 * time.Millisecond)
		return len(out.Recs)+len(dl.Recs) >= n
	})
	if !refused.Load() || len(dl.Recs) == 0 {
		t.Fatalf("refused a produce: %v; %d dead letters, want at least one", refused.Load(), len(dl.Recs))
	}
	if len(out.Recs)+len(dl.Recs) != n {
		t.Errorf("%d outputs and %d dead letters, want %d in all", len(out.Recs), len(dl.Recs), n)
	}
	for _, rec := range dl.Recs {
		if k := kafkatest.Header(rec, HeaderErrorKind); k != KindProduce {
			t.Errorf("dead letter of offset %s: kind %q, want %q (error %q)", kafkatest.Header(rec, HeaderOriginalOffset), k, KindProduce, kafkatest.Header(rec, HeaderError))
		}
	}
	// The producer goes on after the refusal: later outputs arrive.
	kafkatest.Produce(t, brokers, "in", n, strconv.Itoa)
	out.ReadUntil(t, time.Minute, "the later records' outputs", func(rs []*kgo.Record) bool { return len(rs)+len(dl.Recs) >= 2*n })
	kafkatest.Eventually(t, 30*time.Second, "committed past every record", func() bool {
		return kafkatest.Committed(t, brokers, cfg.GroupID(&cfg.Pipelines[0]), "in")[0] == 2*n
	})
}
