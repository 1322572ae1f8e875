package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestOutputTimestamp: outputs carry the release's clock by default, and
// with output_timestamp: input their input record's own timestamp (as
// Kafka Streams and Redpanda transforms give), under ordering partition
// with runs and ordering none alike.
func TestOutputTimestamp(t *testing.T) {
	t.Parallel() // owns its in-process brokers; asserts no timing
	for _, tc := range []struct {
		name, keys string
		input      bool
	}{
		{"default", "", false},
		{"input", "    output_timestamp: input\n    batch_records: 16", true},
		{"input_none", "    output_timestamp: input\n    ordering: none\n    instances: {min: 2, max: 2}", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			brokers := kafkatest.Fake(t)
			kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
			const n = 50
			base := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
			cl := kafkatest.Client(t, brokers)
			for i := range n {
				r := &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("v", i)), Timestamp: base.Add(time.Duration(i) * time.Second)}
				if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			cfg := testConfigWith(t, brokers, "g", guestPath(t, "uppercase"), "in", "out", "dlq", tc.keys, "")
			started := time.Now().Add(-time.Second)
			r := startRunner(t, cfg)
			defer r.Stop(context.Background())
			out := kafkatest.NewReader(t, brokers, "out")
			out.ReadUntil(t, time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n })
			read := time.Now()
			for _, o := range out.Recs {
				var i int
				if _, err := fmt.Sscanf(string(o.Value), "V%d", &i); err != nil {
					t.Fatalf("output %q: %v", o.Value, err)
				}
				want := base.Add(time.Duration(i) * time.Second)
				switch {
				case tc.input && !o.Timestamp.Equal(want):
					t.Fatalf("output %q at %v, want its input's timestamp %v", o.Value, o.Timestamp, want)
				case !tc.input && (o.Timestamp.Equal(want) || o.Timestamp.Before(started) || o.Timestamp.After(read)):
					// The inputs are years old: the release's clock is
					// none of theirs, and it falls while the pipeline ran.
					t.Fatalf("output %q at %v (its input's %v), want the release's clock, between %v and %v", o.Value, o.Timestamp, want, started, read)
				}
			}
		})
	}
}
