//go:build integration

package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// stateKeys is how many distinct keys the state benchmark's input counts.
const stateKeys = 10000

// BenchmarkStateCount: a running count per key over the same input on the
// same broker, side by side — wasmstream's count example (a state_get and a
// state_put per record: bbolt per partition, a compacted changelog) and
// Kafka Streams' groupByKey().count() (RocksDB, its changelog; tests/peers)
// with its record cache off, so that both emit every update (one output per
// input) and write one changelog record per input; under at_least_once and
// exactly_once. BENCH_RECORDS records (default 300,000) over 10,000 keys,
// 8 partitions.
//
// wasmstream runs in this process (cpu_us/rec is this process's CPU over
// the drain); Kafka Streams in its JVM with 2 stream threads (cpu_s is the
// JVM's whole life, start and restore included). rec/s is the input drained
// per second: for wasmstream from the first record fetched to the last
// record's outcome durable, for Kafka Streams from its first output to its
// n-th (read_committed under exactly_once).
func BenchmarkStateCount(b *testing.B) {
	brokers := kafkatest.RealBrokers(b)
	n := records()
	in := keyedInput(b, brokers, n, stateKeys)
	count := filepath.Join(b.TempDir(), "count.wasm")
	os.WriteFile(count, wt.BuildGoGuest(b, "plugins/examples/count"), 0o644)
	for _, g := range []struct{ ws, streams string }{{"at_least_once", "at_least_once"}, {"exactly_once", "exactly_once_v2"}} {
		b.Run("wasmstream-count/"+g.ws, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r, el := drainHost(b, brokers, count, in, nil, n, "ordering: partition", "guarantee: "+g.ws,
					fmt.Sprintf("state: {enabled: true, dir: %q}", b.TempDir()))
				r.Stop(context.Background())
				b.ReportMetric(float64(n)/el.Seconds(), "rec/s")
			}
		})
		if smoke() && g.ws == "exactly_once" {
			continue // the smoke run checks the harness: Kafka Streams once
		}
		b.Run("kafka-streams-count-2-threads/"+g.ws, func(b *testing.B) {
			cp := streamsClasspath(b)
			for i := 0; i < b.N; i++ {
				outTopic := fmt.Sprintf("%s-streams-count-%d", in, time.Now().UnixNano())
				kafkatest.CreateTopic(b, brokers, partitions, outTopic)
				app := fmt.Sprintf("bench-streams-count-%d", time.Now().UnixNano())
				// its state directory under the benchmark's temporary directory, removed when it ends
				cmd := exec.Command("java", "-Xmx1g", "-Djava.io.tmpdir="+b.TempDir(), "-cp", cp, "wasmstream.peers.StreamsCount", strings.Join(brokers, ","), in, outTopic, app, "2", g.streams, "0")
				logf, _ := os.Create(filepath.Join(b.TempDir(), "streams.log"))
				cmd.Stdout, cmd.Stderr = logf, logf
				if err := cmd.Start(); err != nil {
					b.Fatal(err)
				}
				first, last := consumeCount(b, brokers, outTopic, n, 10*time.Minute, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
				cpu, rss := procStats(cmd.Process.Pid)
				cmd.Process.Signal(os.Interrupt)
				cmd.Wait()
				b.ReportMetric(float64(n)/last.Sub(first).Seconds(), "rec/s")
				b.ReportMetric(cpu.Seconds(), "cpu_s")
				b.ReportMetric(cpu.Seconds()*1e6/float64(n), "cpu_us/rec")
				b.ReportMetric(float64(rss)/(1<<20), "peak_rss_MiB")
			}
		})
	}
}

// keyedInput creates an input topic of n records whose keys cycle over
// keys distinct ones, placed by the default (murmur2) partitioner, as
// Kafka's clients place them: the partition a key's state belongs to.
func keyedInput(b *testing.B, brokers []string, n, keys int) string {
	topic := fmt.Sprintf("bench-keyed-%d", time.Now().UnixNano())
	kafkatest.CreateTopic(b, brokers, partitions, topic)
	cl := kafkatest.Client(b, brokers, kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, 0, 1000)
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "user-%05d", i%keys), Value: []byte("clicked")})
		if len(recs) == cap(recs) || i == n-1 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	return topic
}

// streamsClasspath builds the Java peers (tests/peers) and returns their
// classpath.
func streamsClasspath(b *testing.B) string {
	out, err := exec.Command("bash", filepath.Join(wt.RepoRoot(b), "tests/peers/peers.sh"), "build", "streams").Output()
	if err != nil {
		b.Fatalf("building the Java peers: %v", err)
	}
	return strings.TrimSpace(string(out))
}
