package scheduler

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestDeployWhileRunning hot-swaps the module over and over while records
// flow (run it with -race: a deploy writes pipeline state that the workers
// read). Every record comes out exactly once, processed, and nothing is
// dead-lettered.
func TestDeployWhileRunning(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq")
	path := guestPath(t, "uppercase")
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfigWith(t, brokers, "g", path, "in", "out", "dlq", "    ordering: key\n    instances: {min: 1, max: 3}", "")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())

	// Records flow the whole time: a producer writes small batches until the
	// deploys are over.
	stop := make(chan struct{})
	produced := make(chan int)
	cl := kafkatest.Client(t, brokers)
	go func() {
		n := 0
		defer func() { produced <- n }()
		for {
			var recs []*kgo.Record
			for i := 0; i < 20; i++ {
				recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint(n + i)), Value: []byte(fmt.Sprintf("rec-%06d", n+i))})
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			n += len(recs)
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	const deploys = 5
	for k := 0; k < deploys; k++ {
		if _, err := r.Deploy(context.Background(), "p", wasm); err != nil {
			t.Fatalf("deploy %d: %v", k, err)
		}
	}
	close(stop)
	n := <-produced
	rd := kafkatest.NewReader(t, brokers, "out")
	rd.ReadUntil(t, 2*time.Minute, "every output", func(rs []*kgo.Record) bool { return len(rs) >= n })
	rd.ReadFor(300 * time.Millisecond)
	if len(rd.Recs) != n {
		t.Fatalf("%d outputs for %d inputs", len(rd.Recs), n)
	}
	for _, rec := range rd.Recs {
		if !strings.HasPrefix(string(rec.Value), "REC-") {
			t.Fatalf("output %q not processed", rec.Value)
		}
	}
	if s := r.Snapshots()[0]; s.DeadLetter != 0 || s.Faults != 0 {
		t.Fatalf("swaps cost records: %+v", s)
	}
	t.Logf("%d deploys while %d records flowed", deploys, n)
}
