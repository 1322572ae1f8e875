package scheduler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// holdRecord describes input i of TestHeldOutputsBounded: how many bytes it
// emits (in 64 KiB outputs) before waiting, and whether it then fails.
func holdRecord(i int) (bytes, outputs int, fail bool) {
	switch {
	case i%8 == 0: // light, succeeds
		return 1024, 1, false
	case i%8 == 1: // heavy, succeeds: its outputs are held until acknowledged
		return 15 << 16, 15, false
	}
	return 15 << 16, 15, true // heavy, fails after its wait: its outputs are dropped
}

// TestHeldOutputsBounded: records emit up to their maximum (960 KiB of 1
// MiB) and then wait 500 ms on a timer, on one instance that may keep 256
// records waiting. Without a host-wide bound every waiting record held its
// outputs: 128 such records took the heap up by ~120 MiB (and 256 records
// of 16 MiB, the default limits.max_output_bytes, by 3.9 GiB). With
// host.max_held_output_bytes 8 MiB the held bytes never pass it, the heap
// stays within a few times it, every input ends in its outputs or on the
// dead-letter topic, and every held byte is given back.
func TestHeldOutputsBounded(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	const n = 128
	const bound = 8 << 20
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(5*time.Millisecond))
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		b, _, fail := holdRecord(i)
		hs := []kgo.RecordHeader{{Key: "hold.bytes", Value: []byte(strconv.Itoa(b))}, {Key: "hold.wait", Value: []byte("500ms")}}
		if fail {
			hs = append(hs, kgo.RecordHeader{Key: "hold.fail"})
		}
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte(fmt.Sprint(i)), Value: []byte("x"), Headers: hs})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	wasm := filepath.Join(t.TempDir(), "holdout.wasm")
	if err := os.WriteFile(wasm, wt.BuildGoGuest(t, "host/testdata/holdout"), 0o644); err != nil {
		t.Fatal(err)
	}
	y := fmt.Sprintf(`
kafka:
  brokers: [%q]
  group: g
  commit_interval: 100ms
pipelines:
  - name: p
    module: %s
    inputs: [in]
    output: out
    dead_letter_topic: dlq
    retry: {max_attempts: 1}
    async: {max_in_flight: 256}
    limits: {record_timeout: 30s, memory_pages: 256, max_output_bytes: 1048576}
host:
  max_held_output_bytes: %d
shutdown:
  drain_timeout: 5s
`, strings.Join(brokers, ","), wasm, bound)
	cfg := configFromYAML(t, y)

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())

	// Sample the held bytes and the heap until every record is done.
	var peakHeld int64
	var peakHeap uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if held, _ := r.engine.HeldOutputBytes(); held > peakHeld {
				peakHeld = held
			}
			if i%10 == 0 { // the live heap, every 200 ms
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				peakHeap = max(peakHeap, ms.HeapAlloc)
			}
		}
	}()
	kafkatest.Eventually(t, 3*time.Minute, "every record done", func() bool { return r.Snapshots()[0].Done == n })
	close(stop)
	wg.Wait()

	growth := int64(peakHeap) - int64(base)
	t.Logf("peak held outputs %d KiB (bound %d KiB); live heap grew by %d MiB at most", peakHeld>>10, bound>>10, growth>>20)
	if peakHeld > bound {
		t.Fatalf("held outputs peaked at %d bytes, over host.max_held_output_bytes %d", peakHeld, bound)
	}
	if peakHeld < bound/4 {
		t.Fatalf("held outputs peaked at %d bytes: the records never held much at once, the test proves nothing", peakHeld)
	}
	if growth > 48<<20 {
		t.Fatalf("live heap grew by %d MiB with at most %d MiB of outputs held", growth>>20, bound>>20)
	}

	// Nothing lost: each input is on the dead-letter topic or has every
	// output acknowledged; the ones asked to fail are all dead-lettered.
	dl := kafkatest.NewReader(t, brokers, "dlq")
	s := r.Snapshots()[0]
	dl.ReadUntil(t, 30*time.Second, "dead letters", func(rs []*kgo.Record) bool { return int64(len(rs)) >= s.DeadLetter })
	dead := map[int]bool{}
	refused := 0
	for _, rec := range dl.Recs {
		i, _ := strconv.Atoi(string(rec.Key))
		dead[i] = true
		if strings.Contains(kafkatest.Header(rec, HeaderError), "limit") {
			refused++
		}
	}
	wantOutputs := int64(0)
	for i := 0; i < n; i++ {
		_, outs, fail := holdRecord(i)
		if fail && !dead[i] {
			t.Fatalf("record %d should have failed", i)
		}
		if !dead[i] {
			wantOutputs += int64(outs)
		}
	}
	if s.Outputs != wantOutputs || s.Done != n || int64(len(dead)) != s.DeadLetter {
		t.Fatalf("outputs %d (want %d for the %d records not dead-lettered), done %d of %d, %d dead letters", s.Outputs, wantOutputs, n-len(dead), s.Done, n, len(dead))
	}
	t.Logf("%d records dead-lettered (%d of them for an output refused at the bound)", len(dead), refused)
	// Every byte comes back once the outputs are acknowledged or dropped.
	kafkatest.Eventually(t, 10*time.Second, "held outputs given back", func() bool {
		held, _ := r.engine.HeldOutputBytes()
		return held == 0
	})
}
