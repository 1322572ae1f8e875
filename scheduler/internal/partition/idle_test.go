package partition

import (
	"slices"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

// timers.idle_advance: a partition caught up and silent for idle_advance
// has its stream time advanced by the wall clock, in steps of at most
// idle_advance, and the timers that makes due fire with no record to
// trigger them; each advance is counted. Off (0), a quiet partition's
// timers wait for its next record.
func TestTimersIdleAdvance(t *testing.T) {
	for _, idle := range []time.Duration{0, 100 * time.Millisecond} {
		t.Run(idle.String(), func(t *testing.T) {
			g := newTimerGuest(t)
			e := newEngine(t, engineOpts{ordering: config.OrderPartition, min: 1, max: 1, autoAck: true, noStart: true})
			e.d.Config.Timers.IdleAdvance = idle
			timersOnFakes(t, e, g)
			start := time.Now()
			e.t.Enqueue(stamped(0, []string{"set k@1250"}, 1000))
			waitFor(t, "the record done", func() bool { return len(e.ledger.doneOffsets()) == 1 })
			if idle == 0 {
				time.Sleep(500 * time.Millisecond) // what an advance would take: none comes
				if got := g.log(); !slices.Equal(got, []string{"r0"}) || e.d.Stats.TimersIdleRounds.Load() != 0 {
					t.Fatalf("calls %v with idle_advance off", got)
				}
				return
			}
			waitFor(t, "the timer fired on an idle partition", func() bool { return len(g.log()) == 2 })
			if got := g.log(); got[1] != "t:k@1250#1" {
				t.Fatalf("calls %v", got)
			}
			// 250 ms of stream time in steps of 100: at least 3 advances,
			// each after 100 ms of silence.
			if n := e.d.Stats.TimersIdleRounds.Load(); n < 3 || time.Since(start) < 300*time.Millisecond {
				t.Fatalf("%d advances in %v", n, time.Since(start))
			}
			if st := e.t.State.StreamTime(); st < 1250 {
				t.Fatalf("stream time %d after the firing", st)
			}
		})
	}
}
