package scheduler

import (
	"fmt"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// checkTimers refuses a module that sets event-time timers (ABI.md §4.2)
// in a pipeline that cannot fire them by the firing rule, naming the key
// to change: the rule needs one record at a time per partition (ordering:
// partition, a consumer group) and the partition's state, where timers
// are kept (state.enabled). Under ordering key or none, records of one
// partition are decided out of offset order and in parallel, so a round
// could not run "before the partition's next record" without holding
// every lane; a share group has no partition of its own.
func checkTimers(pc *config.Pipeline, info host.Info) error {
	if !info.Timers {
		return nil
	}
	uses := fmt.Sprintf("the module sets event-time timers (imports %s.%s)", abi.HostModule, abi.ImportTimerSet)
	switch {
	case !pc.State.Enabled:
		return fmt.Errorf("pipelines.%s.state.enabled: %s, which are kept in the partition's state: enable state", pc.Name, uses)
	case pc.Consume == config.ConsumeShare:
		return fmt.Errorf("pipelines.%s.consume: %q: %s, which fire in a partition's order: use a consumer group", pc.Name, pc.Consume, uses)
	case pc.Ordering != config.OrderPartition:
		return fmt.Errorf("pipelines.%s.ordering: %q: %s, which fire only under ordering: partition (ABI.md §4.2)", pc.Name, pc.Ordering, uses)
	}
	return nil
}
