//go:build integration

package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// BenchmarkExactlyOnce: the uppercase Go guest at at_least_once and at
// exactly_once with transactions of several sizes, beside the passthrough
// reference, over one input on the same broker. An at_least_once record
// counts when its outputs are acknowledged; an exactly_once record when the
// transaction carrying its outputs and offset committed (before that, no
// read_committed consumer sees it), so the exactly_once time runs until the
// group's committed offsets reach the end of the input.
func BenchmarkExactlyOnce(b *testing.B) {
	brokers, n, in, uppercase := uppercaseInput(b)
	var ref float64
	runReference(b, brokers, in, n, &ref)
	report := func(b *testing.B, el time.Duration) {
		rate := float64(n) / el.Seconds()
		b.ReportMetric(rate, "rec/s")
		if ref > 0 {
			b.ReportMetric(rate/ref, "x_ref")
		}
	}
	b.Run("at_least_once", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			report(b, host(b, brokers, uppercase, in, n))
		}
	})
	sizes := []int{100, 1000, 10000}
	if smoke() {
		sizes = []int{1000}
	}
	for _, size := range sizes {
		b.Run(fmt.Sprintf("exactly_once/max_records=%d", size), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				latIn := fmt.Sprintf("%s-lat-%d", in, time.Now().UnixNano())
				kafkatest.CreateTopic(b, brokers, partitions, latIn)
				r, cfg := startHostInputs(b, brokers, uppercase, in, []string{latIn}, "retry: {max_attempts: 1}", "guarantee: exactly_once",
					fmt.Sprintf("transactions: {max_records: %d, interval: 100ms}", size))
				usage := startUsage(b)
				start := waitFetched(b, r)
				adm := kadm.NewClient(kafkatest.Client(b, brokers))
				group := cfg.GroupID(&cfg.Pipelines[0])
				deadline := time.Now().Add(10 * time.Minute)
				for {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					offs, err := adm.FetchOffsets(ctx, group)
					cancel()
					sum := int64(0)
					if err == nil {
						offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
					}
					if sum >= int64(n) {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("timed out: committed %d of %d; %+v", sum, n, r.Snapshots()[0])
					}
					time.Sleep(5 * time.Millisecond)
				}
				el := time.Since(start)
				usage().report(b)
				// The outputs' count, as host's: wait for it a moment
				// (it is what the pipeline's snapshot says, not the
				// broker).
				s := r.Snapshots()[0]
				for wait := time.Now().Add(30 * time.Second); s.Outputs < int64(n) && s.Outputs+s.DeadLetter < int64(n) && time.Now().Before(wait); s = r.Snapshots()[0] {
					time.Sleep(5 * time.Millisecond)
				}
				if s.Outputs != int64(n) || s.TxnAborted != 0 {
					// Every record's outcome is in the snapshot: a record
					// that failed (retry max_attempts 1) is a dead letter.
					b.Fatalf("outputs %d, aborted transactions %d, want %d and 0; the pipeline's counts: %+v", s.Outputs, s.TxnAborted, n, s)
				}
				// Latency as a read_committed consumer sees it: outputs
				// appear when their transaction commits.
				p50, p99 := pacedLatency(b, brokers, latIn, in+"-out", float64(n)/el.Seconds()/2, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
				r.Stop(context.Background())
				b.ReportMetric(float64(p50.Microseconds())/1000, "p50_ms")
				b.ReportMetric(float64(p99.Microseconds())/1000, "p99_ms")
				report(b, el)
				b.ReportMetric(float64(s.TxnCommitted), "transactions")
				// max_records starts a cut; records released while one is
				// being started join the transaction, so it can carry more.
				b.ReportMetric(float64(n)/float64(max(s.TxnCommitted, 1)), "rec/txn")
			}
		})
	}
}
