package scheduler

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// withCustomSection appends a custom section to a module: the same code
// under another digest (a canary identical to the stable version).
func withCustomSection(wasm []byte, name string) []byte {
	payload := append(append([]byte{byte(len(name))}, name...), "same code"...)
	return append(append(append([]byte{}, wasm...), 0, byte(len(payload))), payload...)
}

// TestCanaryChecksTellPoisonFromFaults: the enrich example on 4 partitions
// with a canary on 25% (one partition). Poison (values that are not JSON)
// produced to the canary's partition only fails there; each failure is run
// again on the stable version, which fails it too: checked and shared. A
// canary that traps on every record fails good records the stable version
// runs fine: checked, none shared. The partition failing is counted.
func TestCanaryChecksTellPoisonFromFaults(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 4, "in", "out", "dlq")
	enrich := guestPath(t, "enrich")
	cfg := testConfig(t, brokers, "g", enrich, "in", "out", "dlq")
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	stableWasm, err := os.ReadFile(enrich)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := r.SetCanary(ctx, "p", withCustomSection(stableWasm, "canary"), 25); err != nil {
		t.Fatal(err)
	}
	p, _ := r.pipelineByName("p")
	var cp int32 = -1
	for part := range int32(4) {
		if p.mods.Canary.Load().In("p", "in", part) {
			cp = part
		}
	}
	cl := kafkatest.Client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	send := func(part int32, v string, n int) {
		t.Helper()
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Partition: part, Key: []byte(fmt.Sprint(i)), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	for part := range int32(4) {
		send(part, `{"ok":true}`, 50)
	}
	send(cp, "poison: not a JSON object", 30)
	canaryStats := func() VersionStats {
		for _, v := range r.Versions("p") {
			if v.Canary {
				return v
			}
		}
		t.Fatal("no canary")
		return VersionStats{}
	}
	kafkatest.Eventually(t, 60*time.Second, "the poison failed and checked", func() bool {
		k := canaryStats().Kinds["guest.fail"]
		return k.Failed == 30 && k.Checked >= 5
	})
	s := canaryStats()
	k := s.Kinds["guest.fail"]
	t.Logf("poison on the canary's partition %d: %d of %d failed (guest.fail); %d checked on the stable version, %d failed there too; partitions %v", cp, s.Failed, s.Records, k.Checked, k.Shared, s.Partitions)
	if !s.Checks || k.Shared != k.Checked || len(s.Kinds) != 1 || s.Partitions[fmt.Sprintf("in/%d", cp)] != 30 {
		t.Fatalf("canary stats %+v", s)
	}
	if st := r.Versions("p")[0]; st.Failed != 0 {
		t.Fatalf("the stable version failed %d records", st.Failed)
	}

	// A canary that traps on every record.
	if _, err := r.SetCanary(ctx, "p", wt.Minimal(wt.Unreachable).Bytes(), 25); err != nil {
		t.Fatal(err)
	}
	send(cp, `{"ok":true}`, 30)
	kafkatest.Eventually(t, 60*time.Second, "the trapping canary's failures checked", func() bool {
		k := canaryStats().Kinds["fault.trap"]
		return k.Failed == 30 && k.Checked >= 5
	})
	s = canaryStats()
	k = s.Kinds["fault.trap"]
	t.Logf("a trapping canary: %d of %d failed (fault.trap); %d checked on the stable version, %d failed there too", s.Failed, s.Records, k.Checked, k.Shared)
	if k.Shared != 0 {
		t.Fatalf("the stable version failed good records the canary trapped on: %+v", s)
	}
}
