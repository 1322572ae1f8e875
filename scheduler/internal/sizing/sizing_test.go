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

// latencyModel is a lookup service behind instances of a host that can do
// at most capacity records/s: up to the knee the latency is the service's
// own; past it records queue and the latency grows with the limit.
type latencyModel func(limit int) time.Duration

func cpuKnee(service time.Duration, capacity float64) latencyModel {
	return func(limit int) time.Duration {
		knee := capacity * service.Seconds()
		if float64(limit) <= knee {
			return service
		}
		return time.Duration(float64(service) * float64(limit) / knee)
	}
}

// runLimit feeds l one record's latency every millisecond for d; it returns
// the limit after each window.
func runLimit(l *latencyLimit, now time.Time, d time.Duration, m latencyModel, limited bool) (limits []int, end time.Time) {
	for end = now.Add(d); now.Before(end); now = now.Add(time.Millisecond) {
		if l.observe(now, m(l.current()), limited) || now.Sub(l.winStart) == 0 {
			if l.probing == 0 && l.Reason != ReasonProbe {
				limits = append(limits, l.current()) // not while it probes the baseline
			}
		}
	}
	return limits, now
}

// With a fast service the limit rises from its start to the knee within
// seconds, settles inside the dead band and stays there.
func TestLatencyLimitConverges(t *testing.T) {
	l := newLatencyLimit(1, 1024, 4)
	m := cpuKnee(10*time.Millisecond, 4000) // knee: 40 in flight
	now := time.Unix(1000, 0)
	limits, now := runLimit(l, now, 3*time.Second, m, true)
	if c := l.current(); c < 40 || c > 64 {
		t.Fatalf("limit %d after 3 s, want 40..64 (the knee at 40, the dead band to 1.6×): %v", c, limits)
	}
	limits, _ = runLimit(l, now, 30*time.Second, m, true)
	lo, hi := 1<<30, 0
	for _, v := range limits {
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo < 40 || hi > 64 {
		t.Fatalf("limit %d..%d over 30 s, want it to stay in 40..64", lo, hi)
	}
	t.Logf("settled at %d..%d; %s (%s)", lo, hi, l.Reason, l.Detail)
}

// When the service becomes overloaded (its latency grows with the requests
// in flight), the limit falls to a few within a second or two; when the
// service becomes slower for good, the limit falls, then the baseline is
// re-learnt and it rises again.
func TestLatencyLimitBacksOff(t *testing.T) {
	l := newLatencyLimit(1, 1024, 4)
	now := time.Unix(1000, 0)
	_, now = runLimit(l, now, 3*time.Second, cpuKnee(10*time.Millisecond, 4000), true)
	before := l.current()
	overloaded := func(limit int) time.Duration { return 5 * time.Millisecond * time.Duration(limit) }
	_, now = runLimit(l, now, 2*time.Second, overloaded, true)
	if c := l.current(); c > 4 || l.Reason != ReasonLatencyRise {
		t.Fatalf("limit %d (%s) 2 s after the service overloaded (from %d), want at most 4", c, l.Reason, before)
	}
	_, now = runLimit(l, now, 20*time.Second, overloaded, true)
	if c := l.current(); c > 4 {
		t.Fatalf("limit %d 20 s into the overload, want it to stay low", c)
	}

	// Slower for good: 10 ms → 50 ms whatever the load, the host's knee
	// still at 4000 records/s (200 in flight at 50 ms).
	l = newLatencyLimit(1, 1024, 4)
	_, now = runLimit(l, now, 3*time.Second, cpuKnee(10*time.Millisecond, 4000), true)
	slow := cpuKnee(50*time.Millisecond, 4000)
	_, now = runLimit(l, now, time.Second, slow, true)
	if c := l.current(); c >= before {
		t.Fatalf("limit %d a second after the latency rose 5×, want it below %d", c, before)
	}
	_, _ = runLimit(l, now, 20*time.Second, slow, true)
	if c := l.current(); c < 200 || c > 320 {
		t.Fatalf("limit %d 20 s after the service slowed for good, want the new knee 200..320", c)
	}
}

// The limit stays within its bounds, and grows only when instances were
// actually held back by it.
func TestLatencyLimitBounds(t *testing.T) {
	flat := func(int) time.Duration { return 10 * time.Millisecond }
	l := newLatencyLimit(1, 16, 4)
	runLimit(l, time.Unix(1000, 0), 5*time.Second, flat, true)
	if l.current() != 16 {
		t.Fatalf("limit %d, want the bound 16", l.current())
	}
	l = newLatencyLimit(1, 1024, 4)
	runLimit(l, time.Unix(1000, 0), 5*time.Second, flat, false)
	if l.current() != 4 {
		t.Fatalf("limit %d without instances at the limit, want it unchanged (4)", l.current())
	}
	// A service whose latency grows with every request from the first (its
	// throughput the same at any limit): each probe of the baseline finds
	// the latency at half the limit lower, and the limit comes down, one
	// step per baselineSpan, to the minimum's neighbourhood, not below it.
	l = newLatencyLimit(2, 1024, 8)
	proportional := func(n int) time.Duration { return time.Duration(n) * 10 * time.Millisecond }
	limits, _ := runLimit(l, time.Unix(1000, 0), 2*time.Minute, proportional, true)
	if slicesMin(limits) < 2 || l.current() > 3 {
		t.Fatalf("limit %d in the end (lowest %d), want 2..3 and never below 2", l.current(), slicesMin(limits))
	}
}

func slicesMin(v []int) int {
	m := 1 << 30
	for _, x := range v {
		m = min(m, x)
	}
	return m
}
