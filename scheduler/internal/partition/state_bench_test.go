package partition

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/background"
	"github.com/wasmstream/wasmstream/scheduler/internal/budget"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
	"github.com/wasmstream/wasmstream/scheduler/internal/version"
)

// countWasm is the count example, built once per test binary.
var countWasm []byte

// BenchmarkStateRuns is the per-record cost of the count example (a get and
// a put per record) on a partition task with state, without a broker:
// ordering partition, 1,000 keys of the partition (of 4), the changelog
// record and the output acknowledged at once (inlineSink), and the store
// flushed every 1,000 records as a commit would. batch=1 runs each record
// alone, batch=64 in runs of batch_records (state.Run). Allocations and
// bytes a record are its figures: CPU on a shared machine is not.
func BenchmarkStateRuns(b *testing.B) {
	if countWasm == nil {
		countWasm = wt.BuildGoGuest(b, "plugins/examples/count")
	}
	const parts = 4
	var keys [][]byte
	for i := 0; len(keys) < 1000; i++ {
		if k := []byte(fmt.Sprintf("user-%05d", i)); state.KeyPartition(k, parts) == 0 {
			keys = append(keys, k)
		}
	}
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			ctx := context.Background()
			e, _ := host.NewEngine("", nil)
			defer e.Close(ctx)
			mod, err := e.Load(ctx, countWasm, host.ModuleConfig{Name: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			defer mod.Close(ctx)
			pc := &config.Pipeline{Name: "bench", Ordering: config.OrderPartition, MaxInFlight: 1 << 30, MaxInFlightBytes: 1 << 40, BatchRecords: batch,
				Instances: config.Instances{Min: 1, Max: 1, IdleTimeout: time.Minute}}
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			var bg background.Group
			flow := NewFlowSignals()
			d := &Deps{Config: pc, Log: log, Role: Primary{}, Mods: &version.Modules{}, Budget: budget.New(1000, 1<<40, 1<<40), Fetch: FetchControl{Flow: &flow},
				Stats: &hooks.Stats{}, PartStats: func(string, int32) *hooks.Stats { return &hooks.Stats{} }, Background: &bg}
			d.Sink = inlineSink{}
			d.Ledger = trackerLedger{ordered: true}
			d.Mods.Ver.Store(&version.Version{M: mod})
			sc := make(chan struct{})
			d.Mods.SwapCh.Store(&sc)
			store, err := statestore.Open(filepath.Join(b.TempDir(), "s.db"), time.Second)
			if err != nil {
				b.Fatal(err)
			}
			defer store.Close()
			t := NewTask(d, "t", 0, nil)
			t.State = state.NewPartition(store, 0, parts, state.Limits{MaxValueBytes: 64 << 10, Changelog: "t.changelog"})
			t.Start()
			defer func() {
				t.Stop()
				t.WaitWorkers(time.Now().Add(time.Minute))
			}()
			const chunk = 1000
			recs := make([]*kgo.Record, chunk)
			b.ReportAllocs()
			b.ResetTimer()
			total := int64((b.N + chunk - 1) / chunk * chunk)
			for done := 0; done < b.N; done += chunk {
				for i := range recs {
					recs[i] = &kgo.Record{Topic: "t", Offset: int64(done + i), Key: keys[(done+i)%len(keys)], Value: []byte("clicked")}
				}
				t.Enqueue(recs)
				// A commit each chunk: the store takes what is done.
				for t.ps.Done.Load() < int64(done) {
					time.Sleep(20 * time.Microsecond)
				}
				if err := t.State.Flush(t.ps.Done.Load()); err != nil {
					b.Fatal(err)
				}
			}
			for t.ps.Done.Load() < total {
				time.Sleep(20 * time.Microsecond)
			}
			b.StopTimer()
			if o := t.ps.Outputs.Load(); o != total {
				b.Fatalf("%d outputs for %d records, want one each", o, total)
			}
		})
	}
}
