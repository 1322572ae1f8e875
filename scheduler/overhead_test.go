package scheduler

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// BenchmarkSchedulingOverhead measures a record's trip through a partition
// task without Kafka: enqueue, ordering, dispatch to a worker, the call into
// a minimal guest that emits nothing (so the record is done at once), and
// the tracker. Subtract BenchmarkProcessMinimal (host package) for the
// scheduler's own cost per record.
func BenchmarkSchedulingOverhead(b *testing.B) {
	for _, tc := range []struct {
		ordering string
		inst     int
	}{{config.OrderPartition, 1}, {config.OrderKey, 2}, {config.OrderNone, 2}} {
		b.Run(tc.ordering, func(b *testing.B) {
			ctx := context.Background()
			e, _ := host.NewEngine("", nil)
			defer e.Close(ctx)
			mod, err := e.Load(ctx, wt.Minimal(wt.I32Const(0)).Bytes(), host.ModuleConfig{Name: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			defer mod.Close(ctx)
			pc := &config.Pipeline{Name: "bench", Ordering: tc.ordering, MaxInFlight: 1 << 30, MaxInFlightBytes: 1 << 40,
				Instances: config.Instances{Min: tc.inst, Max: tc.inst, IdleTimeout: time.Minute}}
			p := &Pipeline{pc: pc, log: slog.New(slog.NewTextHandler(io.Discard, nil)), role: primary{},
				budget: NewBudget(1000, 1<<40, 1<<40), flow: make(chan struct{}, 1)}
			p.commit, p.sink = offsetCommits{p}, &plainSink{p: p}
			p.ver.Store(&modVersion{m: mod})
			sc := make(chan struct{})
			p.swapCh.Store(&sc)
			t := newTask(p, "t", 0, nil)
			t.start()
			defer func() {
				t.stop()
				t.waitWorkers(time.Now().Add(time.Minute))
			}()
			const batch = 1000
			recs := make([]*kgo.Record, batch)
			b.ResetTimer()
			for done := 0; done < b.N; done += batch {
				for i := range recs {
					recs[i] = &kgo.Record{Topic: "t", Offset: int64(done + i), Key: []byte{byte(i % 16)}, Value: []byte("v")}
				}
				t.enqueue(recs)
			}
			for p.stats.Done.Load() < int64((b.N+batch-1)/batch*batch) {
				time.Sleep(50 * time.Microsecond)
			}
		})
	}
}
