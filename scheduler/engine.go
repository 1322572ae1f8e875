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
		Config: p.pc, Group: p.member.group, Log: p.log,
		Budget: p.shared.budget, Inst: partition.InstanceDeps{Bytes: p.shared.instanceBytes, AsyncSize: p.shared.asyncSize},
		Stats: &p.counters.stats, PartStats: p.counters.partitionStats,
		Role: p.role, Retryable: p.shared.retryable, Sink: p.sink, Ledger: p.ledger, State: p.subs.state,
		Mods: p.mods, Fetch: partition.FetchControl{Flow: &p.flow, Pauser: source.ClientPauser{Client: p.member.cl}}, Background: &p.life.bg,
		Hooks: p.shared.hooks, Schema: p.eng.Schema, InputTimestamps: p.pc.OutputTimestamp == config.OutputTimeInput,
	}
}

// commitDeps makes what p's committer is given (Pipeline.wire, once p's
// client is made). Forget reads p's sink when called: the sink is made
// after the committer (a TxnSink's gate is the committer).
func (p *Pipeline) commitDeps() commit.Deps {
	return commit.Deps{
		Config: p.cfg, Pipeline: p.pc, Group: p.member.group, Client: p.member.cl, Log: p.log, Stats: &p.counters.stats,
		Loops: &p.life.wg, Quit: p.life.quit, Background: &p.life.bg, Failed: &p.life.failed,
		Tasks: p.tasks, Drain: p.drain, Gone: p.subs.gone,
		Forget:      func(parts map[string][]int32) { p.sink.Forget(parts) },
		OnCommitted: p.subs.committed, Fail: p.fail, Broke: p.broke,
	}
}

// sourceDeps makes what p's source is given (Pipeline.wire, once p's client
// is made): its task set among them, whose Dispatch hands a poll's records
// to p's tasks (a share group's: its one pool).
func (p *Pipeline) sourceDeps() source.Deps {
	return source.Deps{
		Config: p.cfg, Pipeline: p.pc, Group: p.member.group, Client: p.member.cl, Log: p.log, Stats: &p.counters.stats,
		Budget: p.shared.budget, Flow: &p.flow, Loops: &p.life.wg, Quit: p.life.quit, PollDone: p.life.pollDone,
		Tasks: p.tasks, Opening: p.opening,
	}
}
