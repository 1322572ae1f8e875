package sizing

import (
	"testing"
	"time"
)

// cpuPool models a task's pool on a machine of cores cores with a backlog:
// records always wait (capped while the pool is at its target), and n
// instances' calls wait for a core (n-cores)/n of their time.
func cpuPool(cores int) func(target int) Sample {
	return func(target int) Sample {
		s := Sample{Capped: 3, Workers: target, Warm: target, Run: 100 * time.Millisecond}
		if target > cores {
			s.Wait = time.Duration(float64(s.Run) * float64(target-cores) / float64(cores))
		}
		return s
	}
}

func runPool(s *Pool, start time.Time, d time.Duration, model func(int) Sample) (sizes []int, end time.Time) {
	now := start
	for ; now.Sub(start) < d; now = now.Add(Window) {
		s.Step(now, model(s.Target))
		sizes = append(sizes, s.Target)
	}
	return sizes, now
}

// Under a CPU-bound backlog on 2 cores the target converges on 2 within
// seconds, probes 3 at most once per poolCeilingHold, and never goes
// elsewhere.
func TestPoolSizerConvergesOnCores(t *testing.T) {
	s := NewPool(1, 64)
	start := time.Unix(1000, 0)
	sizes, _ := runPool(s, start, 2*time.Minute, cpuPool(2))
	changes := 0
	for i, n := range sizes {
		if i > 0 && n != sizes[i-1] {
			changes++
		}
		if i >= 8 && (n < 2 || n > 3) { // after 2 s
			t.Fatalf("window %d: target %d, want 2 (or the probe of 3)", i, n)
		}
	}
	// Up 1→2→3, down to 2, then one probe (up and down) per 30 s.
	if changes > 3+2*4 {
		t.Fatalf("%d changes in 2 minutes: oscillates (%v)", changes, sizes)
	}
	at2 := 0
	for _, n := range sizes[8:] {
		if n == 2 {
			at2++
		}
	}
	if frac := float64(at2) / float64(len(sizes)-8); frac < 0.9 {
		t.Fatalf("target 2 only %.0f%% of the time", frac*100)
	}
	t.Logf("%d changes; last reason %s (%s)", changes, s.Reason, s.Detail)
}

// When calls wait for a core (another pipeline took the cores, or too many
// partitions share them), the target backs off multiplicatively to the
// minimum.
func TestPoolSizerBacksOffOnCoreContention(t *testing.T) {
	s := NewPool(1, 64)
	s.Target = 16
	now := time.Unix(1000, 0)
	steps := 0
	for s.Target > 1 {
		s.Step(now, Sample{Capped: 5, Workers: s.Target, Warm: s.Target, Wait: 60 * time.Millisecond, Run: 40 * time.Millisecond})
		now = now.Add(Window)
		if steps++; steps > 12 {
			t.Fatalf("target %d after %d windows of contention", s.Target, steps)
		}
	}
	if s.Reason != ReasonCores {
		t.Fatalf("reason %s", s.Reason)
	}
	// Queueing without contention grows it again, one per window, up to
	// the bound, not past it.
	s = NewPool(2, 5)
	for i := 0; i < 20; i++ {
		s.Step(now, Sample{Capped: 1, Workers: s.Target, Warm: s.Target, Run: time.Millisecond})
		now = now.Add(Window)
	}
	if s.Target != 5 || s.Reason != ReasonQueueing {
		t.Fatalf("target %d (%s), want the bound 5", s.Target, s.Reason)
	}
}

// The target does not run ahead of the pool (a budget that refuses
// instances), follows it down when instances retire without queueing, and
// never goes below the minimum.
// sharedCores models a task's pool on cores cores beside others instances
// of other tasks, all with a backlog: every instance runs calls, which wait
// for a core when there are more instances than cores; cores beyond the
// instances sit idle.
func sharedCores(cores int, others *int) func(target int) Sample {
	return func(target int) Sample {
		total := target + *others
		s := Sample{Capped: 3, Workers: target, Warm: target, Run: 100 * time.Millisecond}
		if total > cores {
			s.Wait = time.Duration(float64(s.Run) * float64(total-cores) / float64(cores))
		}
		s.IdleCores = float64(max(cores-total, 0))
		return s
	}
}

// A task cut back while another task shared the cores grows again as soon
// as that task drains and a core sits idle, not after poolCeilingHold; with
// the cores busy the ceiling still holds, and the target settles.
func TestPoolSizerGrowsIntoIdleCores(t *testing.T) {
	others := 1
	s := NewPool(1, 64)
	now := time.Unix(1000, 0)
	sizes, now := runPool(s, now, 5*time.Second, sharedCores(2, &others))
	if s.Target != 1 || s.ceiling != 2 {
		t.Fatalf("beside one busy instance on 2 cores: target %d, ceiling %d (%v), want 1 held under 2", s.Target, s.ceiling, sizes)
	}
	others = 0 // the other task drained: a core is idle
	sizes, now = runPool(s, now, Window, sharedCores(2, &others))
	if s.Target != 2 {
		t.Fatalf("a core idle: target %d after a window (%v), want 2", s.Target, sizes)
	}
	// Then as on 2 free cores: 2, with a probe of 3 at most every
	// poolCeilingHold.
	sizes, _ = runPool(s, now, time.Minute, sharedCores(2, &others))
	at2 := 0
	for i, n := range sizes {
		if n < 2 || n > 3 {
			t.Fatalf("window %d: target %d (%v), want 2 (or a probe of 3)", i, n, sizes)
		}
		if n == 2 {
			at2++
		}
	}
	if frac := float64(at2) / float64(len(sizes)); frac < 0.9 {
		t.Fatalf("at 2 for %.0f%% of the minute (%v)", frac*100, sizes)
	}
}

func TestPoolSizerFollowsThePool(t *testing.T) {
	s := NewPool(2, 64)
	now := time.Unix(1000, 0)
	for i := 0; i < 10; i++ {
		s.Step(now, Sample{Capped: 4, Workers: 3, Warm: 3, Run: time.Millisecond}) // the budget holds it at 3
		now = now.Add(Window)
	}
	if s.Target != 4 {
		t.Fatalf("target %d with 3 instances granted, want at most one ahead (4)", s.Target)
	}
	// Nor ahead of the instances being created, nor on a window without a
	// call to tell what the cores are doing.
	s4 := *s
	s4.Step(now, Sample{Capped: 4, Workers: 4, Warm: 3, Run: time.Millisecond})
	s4.Step(now, Sample{Capped: 4, Workers: 4, Warm: 4})
	if s4.Target != 4 {
		t.Fatalf("target %d, want 4 until the fourth instance runs calls", s4.Target)
	}
	s.Step(now, Sample{Workers: 3})
	if s.Target != 3 || s.Reason != ReasonIdle {
		t.Fatalf("target %d (%s) after the queue went", s.Target, s.Reason)
	}
	s.Step(now, Sample{Workers: 0})
	if s.Target != 2 {
		t.Fatalf("target %d, want the minimum", s.Target)
	}
}
