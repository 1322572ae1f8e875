package scheduler

import (
	"time"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// PipelineView is a pipeline at one moment, in more detail than Snapshot:
// each partition task with its lag and its instances by state. The live
// dashboard (scheduler/dashboard) samples it once a second.
type PipelineView struct {
	Snapshot
	// Primary names the pipeline a retry tier belongs to ("" for a
	// primary pipeline).
	Primary string
	// Module is the version the pipeline runs; Label, its label (deploy
	// --label, "" for none).
	Module host.Info
	Label  string
	// Tiers are a primary's retry tiers (retry.mode: topics), in attempt
	// order, each topic once.
	Tiers      []TierView
	Partitions []PartitionView
}

// TierView is one retry tier: its topic and the delay its records wait.
type TierView struct {
	Topic string
	Delay time.Duration
}

// PartitionView is one partition task.
type PartitionView struct {
	Topic     string
	Partition int32
	Lag       int64
	Committed int64 // -1: nothing committed by this owner yet
	InFlight  int
	Queued    int
	Paused    bool
	// Canary: the pipeline's canary runs this partition's records.
	Canary bool
	// Instances by state; Borrowed are those above instances.min, taken
	// from the host budget because records waited.
	Idle, Busy, Awaiting, Borrowed int
}

// View returns every pipeline's view, retry tiers after their primary.
// It takes each task's lock briefly, like Snapshots.
func (r *Runner) View() []PipelineView {
	pipes := r.pipes()
	out := make([]PipelineView, 0, len(pipes))
	for _, p := range pipes {
		v := p.view()
		if p.role.IsRetry() {
			v.Primary = primaryName(p)
		} else if _, rp := pairOf(pipes, p.pc.Name); rp != nil {
			seen := map[string]bool{}
			for a := 2; a <= p.pc.Retry.MaxAttempts; a++ {
				d, tier := p.pc.Delay(a)
				if t := p.pc.TierTopic(tier); !seen[t] {
					seen[t] = true
					v.Tiers = append(v.Tiers, TierView{t, d})
				}
			}
		}
		out = append(out, v)
	}
	return out
}

func (p *Pipeline) view() PipelineView {
	cur := p.mods.Current()
	v := PipelineView{Snapshot: p.Snapshot(), Module: cur.M.Info(), Label: labelText(cur)}
	min := p.pc.Instances.Min
	c := p.mods.Canary.Load()
	for _, g := range p.taskGauges(false) {
		pv := PartitionView{Topic: g.Topic, Partition: g.Partition, Lag: g.Lag, Committed: g.Committed, InFlight: g.InFlight, Queued: g.Queued, Paused: g.Paused,
			Idle: int(g.States[partition.WorkerIdle]), Busy: int(g.States[partition.WorkerBusy]), Awaiting: int(g.States[partition.WorkerAwaiting])}
		// The task's own test of whether it runs the canary.
		pv.Canary = c != nil && c.In(p.pc.Name, g.Topic, g.Partition)
		pv.Borrowed = max(0, g.Workers-min)
		v.Partitions = append(v.Partitions, pv)
	}
	return v
}
