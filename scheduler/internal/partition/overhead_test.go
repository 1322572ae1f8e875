package partition

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/background"
	"github.com/wasmstream/wasmstream/scheduler/internal/budget"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/scheduler/internal/version"
)

// BenchmarkSchedulingOverhead measures a record's trip through a partition
// task without Kafka: enqueue, ordering, dispatch to a worker, the call into
// a minimal guest that emits nothing (so the record is done at once), and
// the tracker. Subtract BenchmarkProcessMinimal (host package) for the
// scheduler's own cost per record. outputs: ordering partition, a guest
// that emits one output per record, delivered through a sink that answers
// it at once (inlineSink): the release and sink steps without a broker.
// Each again as _runs: taken in runs of batch_records.
func BenchmarkSchedulingOverhead(b *testing.B) {
	cases := []struct {
		name, ordering string
		inst           int
		emit           bool
		batch          int
	}{{config.OrderPartition, config.OrderPartition, 1, false, 1}, {config.OrderKey, config.OrderKey, 2, false, 1},
		{config.OrderNone, config.OrderNone, 2, false, 1}, {"outputs", config.OrderPartition, 1, true, 1}}
	for _, tc := range cases[:len(cases):len(cases)] {
		// The same, taken in runs of up to 64 records (batch_records; the
		// guest has no batch entry, so this is the scheduler's side).
		tc.name, tc.batch = tc.name+"_runs", config.DefaultBatchRecords
		cases = append(cases, tc)
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			e, _ := host.NewEngine("", nil)
			defer e.Close(ctx)
			guest := wt.Minimal(wt.I32Const(0))
			if tc.emit {
				guest = emitOne()
			}
			mod, err := e.Load(ctx, guest.Bytes(), host.ModuleConfig{Name: "bench"})
			if err != nil {
				b.Fatal(err)
			}
			defer mod.Close(ctx)
			pc := &config.Pipeline{Name: "bench", Ordering: tc.ordering, MaxInFlight: 1 << 30, MaxInFlightBytes: 1 << 40, BatchRecords: tc.batch,
				Instances: config.Instances{Min: tc.inst, Max: tc.inst, IdleTimeout: time.Minute}}
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			var bg background.Group
			var stopped atomic.Bool
			flow := NewFlowSignals()
			d := &Deps{Config: pc, Log: log, Role: Primary{}, Mods: &version.Modules{}, Budget: budget.New(1000, 1<<40, 1<<40), Fetch: FetchControl{Flow: &flow},
				Stats: &hooks.Stats{}, PartStats: func(string, int32) *hooks.Stats { return &hooks.Stats{} }, Background: &bg}
			d.Sink = &PlainSink{Producer: Producer{Config: pc, Log: log, Background: &bg, Quit: make(chan struct{}), Stopped: &stopped}}
			if tc.emit {
				d.Sink = inlineSink{}
			}
			d.Ledger = trackerLedger{ordered: tc.ordering == config.OrderPartition}
			d.Mods.Ver.Store(&version.Version{M: mod})
			sc := make(chan struct{})
			d.Mods.SwapCh.Store(&sc)
			t := NewTask(d, "t", 0, nil)
			t.Start()
			defer func() {
				t.Stop()
				t.WaitWorkers(time.Now().Add(time.Minute))
			}()
			const batch = 1000
			recs := make([]*kgo.Record, batch)
			b.ResetTimer()
			for done := 0; done < b.N; done += batch {
				for i := range recs {
					recs[i] = &kgo.Record{Topic: "t", Offset: int64(done + i), Key: []byte{byte(i % 16)}, Value: []byte("v")}
				}
				t.Enqueue(recs)
			}
			for t.ps.Done.Load() < int64((b.N+batch-1)/batch*batch) {
				time.Sleep(50 * time.Microsecond)
			}
			if tc.emit && t.ps.Outputs.Load() != t.ps.Done.Load() {
				b.Fatalf("%d outputs for %d records, want one each", t.ps.Outputs.Load(), t.ps.Done.Load())
			}
		})
	}
}

// emitOne is a guest that emits one output per record (value "ok", to the
// pipeline's output topic), copied from a passive data segment.
func emitOne() wt.Module {
	output := abi.AppendOutput(nil, &abi.Output{Partition: -1, Value: []byte("ok")})
	var body []byte
	body = append(body, wt.I32Const(0)...)
	body = append(body, wt.I32Const(0)...)
	body = append(body, wt.I32Const(int32(len(output)))...)
	body = append(body, 0xfc, 8, 0, 0) // memory.init 0
	body = append(body, wt.LocalGet(0)...)
	body = append(body, wt.I32Const(0)...)
	body = append(body, wt.I32Const(int32(len(output)))...)
	body = append(body, wt.Call(0)...) // emit
	body = append(body, wt.Drop...)
	body = append(body, wt.I32Const(0)...)
	m := wt.Minimal(body, wt.Import{Module: abi.HostModule, Name: abi.ImportEmit, Params: []byte{wt.I32, wt.I32, wt.I32}, Results: []byte{wt.I32}})
	m.Data = [][]byte{output}
	return m
}

// inlineSink is a sink whose broker answers every output at once, inline:
// the outputs are made as a plainSink makes them, acknowledged
// (job.acked), and the record finished.
type inlineSink struct{}

func (inlineSink) refuses(*kgo.Record, []abi.Output, []state.Write) string { return "" }
func (inlineSink) Forget(map[string][]int32)                               {}
func (inlineSink) deliver(run []*job) {
	for _, j := range run {
		switch j.release.verdict {
		case verdictDone:
			j.t.filtered(j)
		case verdictOutputs:
			j.prepareOutputs("out", time.Now())
			for i := range j.outcome.outs {
				j.acked(j.outputRecord(i), nil)
			}
			j.t.d.Budget.ReleaseOutputs(j.outcome.held)
			j.t.Finish(j.r)
			j.tr.End("ok", "", "")
		}
	}
}
