package scheduler

import "github.com/wasmstream/wasmstream/scheduler/internal/partition"

// engineDeps makes what p's engines are given. Called by Start, after
// everything the runner sets before it (metrics, the failure observer).
func (p *Pipeline) engineDeps() *partition.Deps {
	return &partition.Deps{
		Config: p.pc, Group: p.group, Log: p.log,
		Budget: p.budget, InstanceBytes: p.instanceBytes, Stats: &p.stats, PartStats: p.partitionStats,
		Role: p.role, Retryable: p.retryable, Sink: p.sink, Ledger: p.ledger, State: p.state,
		Mods: p.mods, Flow: &p.flow, AsyncSize: p.asyncSize, Client: p.cl, Background: &p.bg,
		Hooks: p.hooks,
	}
}
