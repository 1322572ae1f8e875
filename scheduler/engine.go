package scheduler

import (
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/commit"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
	"github.com/wasmstream/wasmstream/scheduler/internal/source"
)

// engineDeps makes what p's engines are given. Called by Start, after
// everything the runner sets before it (metrics, the failure observer).
func (p *Pipeline) engineDeps() *partition.Deps {
	return &partition.Deps{
		Config: p.pc, Group: p.group, Log: p.log,
		Budget: p.budget, Inst: partition.InstanceDeps{Bytes: p.instanceBytes, AsyncSize: p.asyncSize},
		Stats: &p.stats, PartStats: p.partitionStats,
		Role: p.role, Retryable: p.retryable, Sink: p.sink, Ledger: p.ledger, State: p.state,
		Mods: p.mods, Fetch: partition.FetchControl{Flow: &p.flow, Pauser: source.ClientPauser{Client: p.cl}}, Background: &p.bg,
		Hooks: p.hooks, Schema: p.eng.Schema, InputTimestamps: p.pc.OutputTimestamp == config.OutputTimeInput,
	}
}

// commitDeps makes what p's committer is given (Pipeline.wire, once p's
// client is made). Forget reads p's sink when called: the sink is made
// after the committer (a TxnSink's gate is the committer).
func (p *Pipeline) commitDeps() commit.Deps {
	return commit.Deps{
		Config: p.cfg, Pipeline: p.pc, Group: p.group, Client: p.cl, Log: p.log, Stats: &p.stats,
		Loops: &p.wg, Quit: p.quit, Background: &p.bg, Failed: &p.failed,
		Tasks: p.tasks, Drain: p.drain, Gone: p.gone,
		Forget:      func(parts map[string][]int32) { p.sink.Forget(parts) },
		OnCommitted: p.committed, Fail: p.fail, Broke: p.broke,
	}
}

// sourceDeps makes what p's source is given (Pipeline.wire, once p's client
// is made): its task set among them, whose Dispatch hands a poll's records
// to p's tasks (a share group's: its one pool).
func (p *Pipeline) sourceDeps() source.Deps {
	return source.Deps{
		Config: p.cfg, Pipeline: p.pc, Group: p.group, Client: p.cl, Log: p.log, Stats: &p.stats,
		Budget: p.budget, Flow: &p.flow, Loops: &p.wg, Quit: p.quit, PollDone: p.pollDone,
		Tasks: p.tasks, Opening: p.opening,
	}
}
