//go:build integration

// Package bench measures wasmstream on the real broker beside a reference
// measured in the same run: plain franz-go consume→produce passthrough with
// at-least-once commits, no WebAssembly. Figures are reported as records/s
// and as a ratio to the reference ("x_ref").
//
//	bash tests/run.sh bench                 # full run (BENCH_RECORDS, default 300000)
//	BENCH_RECORDS=5000 go test -tags integration -run '^$' -bench . -benchtime 1x ./tests/bench/   # smoke
package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

const partitions = 8

func records() int {
	if s := os.Getenv("BENCH_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err == nil && n > 0 {
			return n
		}
	}
	return 300000
}

// input creates an input topic holding n random 100-byte records.
func input(b *testing.B, brokers []string, n int) string {
	topic := fmt.Sprintf("bench-in-%d", time.Now().UnixNano())
	kafkatest.CreateTopic(b, brokers, partitions, topic)
	val := strings.Repeat("abcdefghij", 10)
	kafkatest.Produce(b, brokers, topic, n, func(int) string { return val })
	return topic
}

// passthrough is the reference: consume, produce each record to out, mark it
// for commit when the produce is acknowledged. It returns the time from the
// first fetched record to the last acknowledgement.
func passthrough(b *testing.B, brokers []string, in, out string, n int) time.Duration {
	cl := kafkatest.Client(b, brokers,
		kgo.ConsumerGroup(fmt.Sprintf("bench-ref-%d", time.Now().UnixNano())),
		kgo.ConsumeTopics(in),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.AutoCommitMarks(),
		kgo.AutoCommitInterval(time.Second),
	)
	var acked atomic.Int64
	done := make(chan struct{})
	var start time.Time
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	fetched := 0
	for fetched < n {
		fs := cl.PollRecords(ctx, 10000)
		if ctx.Err() != nil {
			b.Fatal("reference timed out")
		}
		fs.EachRecord(func(r *kgo.Record) {
			if start.IsZero() {
				start = time.Now()
			}
			fetched++
			cl.Produce(ctx, &kgo.Record{Topic: out, Key: r.Key, Value: r.Value}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
				cl.MarkCommitRecords(r)
				if acked.Add(1) == int64(n) {
					close(done)
				}
			})
		})
	}
	<-done
	return time.Since(start)
}

// host runs one wasmstream pipeline over in and returns the time from its
// first fetched record to every record being done.
func host(b *testing.B, brokers []string, module, in string, n int) time.Duration {
	dir := b.TempDir()
	y := fmt.Sprintf(`kafka: {brokers: [%q], group: bench-ws-%d}
pipelines:
  - {name: p, module: %s, inputs: [%s], output: %s-out, dead_letter_topic: %s-dlq}
`, strings.Join(brokers, ","), time.Now().UnixNano(), module, in, in, in)
	p := filepath.Join(dir, "c.yaml")
	os.WriteFile(p, []byte(y), 0o644)
	cfg, err := config.Load(p, nil, []string{"kafka.create_topics=true", fmt.Sprintf("kafka.topic_partitions=%d", partitions)})
	if err != nil {
		b.Fatal(err)
	}
	r, err := scheduler.NewRunner(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	r.Start()
	defer r.Stop(context.Background())
	deadline := time.Now().Add(10 * time.Minute)
	for r.Snapshots()[0].Fetched == 0 {
		if time.Now().After(deadline) {
			b.Fatal("nothing fetched")
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	for r.Snapshots()[0].Done < int64(n) {
		if time.Now().After(deadline) {
			b.Fatalf("timed out: %+v", r.Snapshots()[0])
		}
		time.Sleep(time.Millisecond)
	}
	el := time.Since(start)
	if s := r.Snapshots()[0]; s.Outputs != int64(n) || s.DeadLetter != 0 {
		b.Fatalf("outputs %d, dead letters %d, want %d and 0", s.Outputs, s.DeadLetter, n)
	}
	return el
}

// BenchmarkThroughput: the reference and wasmstream with the uppercase Go
// guest, over the same input on the same broker, one after the other.
func BenchmarkThroughput(b *testing.B) {
	brokers := kafkatest.RealBrokers(b)
	n := records()
	in := input(b, brokers, n)
	kafkatest.CreateTopic(b, brokers, partitions, in+"-ref")
	uppercase := filepath.Join(b.TempDir(), "uppercase.wasm")
	os.WriteFile(uppercase, wt.BuildGoGuest(b, "plugins/examples/uppercase"), 0o644)
	var ref float64
	b.Run("reference-franz-go-passthrough", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			el := passthrough(b, brokers, in, in+"-ref", n)
			ref = float64(n) / el.Seconds()
			b.ReportMetric(ref, "rec/s")
			b.ReportMetric(1, "x_ref")
		}
	})
	b.Run("wasmstream-uppercase-go-guest", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			el := host(b, brokers, uppercase, in, n)
			rate := float64(n) / el.Seconds()
			b.ReportMetric(rate, "rec/s")
			if ref > 0 {
				b.ReportMetric(rate/ref, "x_ref")
			}
		}
	})
}
