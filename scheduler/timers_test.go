package scheduler

import (
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// A module that sets timers is refused where the firing rule cannot hold
// (ABI.md §4.2), naming the key: without state (state.enabled), in a share
// group (consume), under ordering key or none (ordering). A module
// without timers loads under any of them.
func TestTimersRefusedWhereTheyCannotFire(t *testing.T) {
	t.Parallel()
	ok := func() *config.Pipeline {
		pc := &config.Pipeline{Name: "w", Ordering: config.OrderPartition, Consume: config.ConsumeGroup}
		pc.State.Enabled = true
		return pc
	}
	if err := checkTimers(ok(), host.Info{Timers: true}); err != nil {
		t.Fatalf("ordering partition with state: %v", err)
	}
	for _, tc := range []struct {
		key  string
		edit func(*config.Pipeline)
	}{
		{"pipelines.w.state.enabled", func(pc *config.Pipeline) { pc.State.Enabled = false }},
		{"pipelines.w.consume", func(pc *config.Pipeline) { pc.Consume = config.ConsumeShare }},
		{"pipelines.w.ordering", func(pc *config.Pipeline) { pc.Ordering = config.OrderKey }},
		{"pipelines.w.ordering", func(pc *config.Pipeline) { pc.Ordering = config.OrderNone }},
	} {
		pc := ok()
		tc.edit(pc)
		err := checkTimers(pc, host.Info{Timers: true})
		if err == nil || !strings.HasPrefix(err.Error(), tc.key+":") || !strings.Contains(err.Error(), "timer_set") {
			t.Errorf("%s: %v", tc.key, err)
		}
		if err := checkTimers(pc, host.Info{}); err != nil {
			t.Errorf("a module without timers refused: %v", err)
		}
	}
}
