package sizing

import (
	"math/rand/v2"
	"testing"
	"time"
)

// asyncModel is what a pipeline decides at a given limit: records per
// second and their latency.
type asyncModel func(limit int) (rate float64, lat time.Duration)

// cpuKnee is a lookup service of a fixed latency behind a host that can do
// at most capacity records/s: up to the knee (capacity·service in flight)
// the rate grows with the limit; past it the rate is flat and records queue,
// their latency growing with the limit.
func cpuKnee(service time.Duration, capacity float64) asyncModel {
	return func(limit int) (float64, time.Duration) {
		rate := min(float64(limit)/service.Seconds(), capacity)
		return rate, time.Duration(float64(limit) / rate * float64(time.Second))
	}
}

// overloaded is a service whose every request waits per for each one in
// progress: the rate is 1/per at any limit, the latency grows with it.
func overloaded(per time.Duration) asyncModel {
	return func(limit int) (float64, time.Duration) {
		return 1 / per.Seconds(), per * time.Duration(limit)
	}
}

// runLimit feeds l the records the model decides at l's limit for d, each
// with its latency; it returns the limit in force after each measurement
// that was not a try.
func runLimit(l *climbLimit, now time.Time, d time.Duration, m asyncModel, limited bool) (limits []int, end time.Time) {
	for end = now.Add(d); now.Before(end); {
		rate, lat := m(l.current())
		l.observe(now, lat, limited)
		if now.Equal(l.winStart) && l.try == 0 {
			limits = append(limits, l.current())
		}
		now = now.Add(time.Duration(float64(time.Second) / rate))
	}
	return limits, now
}

func span(v []int) (lo, hi int) {
	lo = 1 << 30
	for _, x := range v {
		lo, hi = min(lo, x), max(hi, x)
	}
	return lo, hi
}

// With a fast service the limit climbs from its start past the knee within
// a second or two and settles between the knee and twice it — where twice
// as many no longer pay and half as many cost — and stays there.
func TestClimbLimitConverges(t *testing.T) {
	l := newClimbLimit(1, 1024, 4, false)
	m := cpuKnee(10*time.Millisecond, 4000) // knee: 40 in flight
	now := time.Unix(1000, 0)
	limits, now := runLimit(l, now, 2*time.Second, m, true)
	if c := l.current(); c < 40 || c > 80 {
		t.Fatalf("limit %d after 2 s, want 40..80 (the knee at 40): %v", c, limits)
	}
	limits, _ = runLimit(l, now, 30*time.Second, m, true)
	if lo, hi := span(limits); lo < 40 || hi > 80 {
		t.Fatalf("limit %d..%d over 30 s, want it to stay in 40..80: %v", lo, hi, limits)
	}
	t.Logf("settled at %v; %s (%s)", l.current(), l.Reason, l.Detail)
}

// When the rate keeps rising with the limit, as on a host whose cost per
// record falls with more in flight, the limit follows it up even with the
// latency several times its lowest.
func TestClimbLimitFollowsTheRate(t *testing.T) {
	l := newClimbLimit(1, 1024, 4, false)
	// 10 ms lookups; past 64 in flight each doubling buys 10% more rate.
	m := func(limit int) (float64, time.Duration) {
		rate := float64(limit) / 0.010
		if limit > 64 {
			rate = 6400
			for n := 64; n < limit; n *= 2 {
				rate *= 1.10
			}
		}
		return rate, time.Duration(float64(limit) / rate * float64(time.Second))
	}
	limits, _ := runLimit(l, time.Unix(1000, 0), 5*time.Second, m, true)
	if c := limits[len(limits)-1]; c != 1024 {
		t.Fatalf("limit %d after 5 s, want the bound 1024: %v", c, limits)
	}
}

// When the service becomes overloaded (its latency grows with the requests
// in flight, its rate does not), the limit falls to a few within four
// seconds and stays low; when it becomes slower for good, the limit does
// not fall but rises to the new knee, since Little's law needs more in
// flight for the same rate.
func TestClimbLimitBacksOff(t *testing.T) {
	l := newClimbLimit(1, 1024, 4, false)
	now := time.Unix(1000, 0)
	_, now = runLimit(l, now, 3*time.Second, cpuKnee(10*time.Millisecond, 4000), true)
	before := l.current()
	_, now = runLimit(l, now, 4*time.Second, overloaded(5*time.Millisecond), true)
	if c := l.current(); c > 4 || l.Reason != ReasonLatencyRise {
		t.Fatalf("limit %d (%s: %s) 4 s after the service overloaded (from %d), want at most 4", c, l.Reason, l.Detail, before)
	}
	limits, now := runLimit(l, now, 20*time.Second, overloaded(5*time.Millisecond), true)
	if _, hi := span(limits); hi > 4 {
		t.Fatalf("limit up to %d over 20 s of overload, want it to stay low: %v", hi, limits)
	}

	// Slower for good: 10 ms → 50 ms whatever the load, the host's knee
	// still at 4000 records/s (200 in flight at 50 ms).
	l = newClimbLimit(1, 1024, 4, false)
	_, now = runLimit(l, now, 3*time.Second, cpuKnee(10*time.Millisecond, 4000), true)
	before = l.current()
	limits, _ = runLimit(l, now, 10*time.Second, cpuKnee(50*time.Millisecond, 4000), true)
	if lo, _ := span(limits); lo < before {
		t.Fatalf("limit down to %d (from %d) with a service slower for good: %v", lo, before, limits)
	}
	if c := l.current(); c < 200 || c > 400 {
		t.Fatalf("limit %d 10 s after the service slowed for good, want the new knee's 200..400: %v", c, limits)
	}
}

// The limit stays within its bounds, rises only when instances were held
// back by it, and comes down when fewer in flight carry as much.
func TestClimbLimitBounds(t *testing.T) {
	flat := func(limit int) (float64, time.Duration) { return float64(limit) / 0.010, 10 * time.Millisecond }
	l := newClimbLimit(1, 16, 4, false)
	runLimit(l, time.Unix(1000, 0), 5*time.Second, flat, true)
	if l.current() != 16 {
		t.Fatalf("limit %d, want the bound 16", l.current())
	}
	// Instances never held back by the limit: the input is the bound, the
	// rate the same at any limit.
	input := func(int) (float64, time.Duration) { return 500, 10 * time.Millisecond }
	l = newClimbLimit(1, 1024, 4, false)
	limits, _ := runLimit(l, time.Unix(1000, 0), 30*time.Second, input, false)
	if _, hi := span(limits); hi > 4 || l.current() != 1 {
		t.Fatalf("limit up to %d, %d in the end, without instances at the limit: want never above its start (4) and down to 1: %v", hi, l.current(), limits)
	}
	// A service whose latency grows with every request from the first (its
	// rate the same at any limit): the periodic try down finds half as many
	// carry as much, and the limit comes down to the minimum, not below.
	l = newClimbLimit(2, 1024, 8, false)
	limits, _ = runLimit(l, time.Unix(1000, 0), time.Minute, overloaded(10*time.Millisecond), true)
	if lo, _ := span(limits); lo < 2 || l.current() != 2 {
		t.Fatalf("limit %d in the end (lowest %d), want 2 and never below: %v", l.current(), lo, limits)
	}
}

// An input the pipeline keeps up with (500 records/s, 10 ms lookups): the
// periodic tries down stop where the limit would start holding instances
// back (here below 4), since records held there would only wait for more
// instances; and a limit that holds instances back is raised until it
// does not, also from 1, where twice the limit (2) still holds them back
// and decides no more records: the latency held, and the pool was above
// its minimum.
func TestClimbLimitLeavesThePoolAlone(t *testing.T) {
	for _, from := range []int{16, 2, 1} {
		l := newClimbLimit(1, 1024, 4, true)
		l.limit = from // where the limit went since its start at 4
		now := time.Unix(1000, 0)
		lowest, last := 1<<30, 0
		for end := now.Add(90 * time.Second); now.Before(end); now = now.Add(2 * time.Millisecond) {
			l.above = l.current() < 4 // records wait for another instance: the pool grows
			l.observe(now, 10*time.Millisecond, l.current() < 4)
			if l.try == 0 && now.After(time.Unix(1030, 0)) {
				lowest, last = min(lowest, l.current()), l.current()
			}
		}
		if lowest < 4 || last > 16 {
			t.Fatalf("from %d: limit down to %d, %d in the end; want it to stay at 4 or more (below, instances are held back) and not climb past 16", from, lowest, last)
		}
		t.Logf("from %d: settled at %d..; %s (%s)", from, lowest, l.Reason, l.Detail)
	}
}

// Fixed pools past the knee, as in the I/O-bound benchmark: the instances
// fill about 64 operations each (above that the limit holds one back only
// now and then, in bursts) and each doubling of the limit costs 4% of the
// rate (more in flight, more work per record). A try up that costs rate is
// not kept there, even in a window where it held no instance back: the
// limit stays within twice the knee.
func TestClimbLimitFixedPoolsStopAtTheKnee(t *testing.T) {
	const knee = 64
	rng := rand.New(rand.NewPCG(1, 2))
	model := func(limit int) (float64, time.Duration, bool) {
		rate := float64(min(limit, knee)) / 0.010
		for n := knee; n < limit; n *= 2 {
			rate *= 0.96
		}
		burst := rng.Float64() < 0.002 // per record: a window of a few hundred has one about half the time
		return rate, time.Duration(float64(min(limit, knee)) / rate * float64(time.Second)), limit <= knee || burst
	}
	l := newClimbLimit(1, 1024, 4, false)
	now := time.Unix(1000, 0)
	hi := 0
	for end := now.Add(60 * time.Second); now.Before(end); {
		rate, lat, limited := model(l.current())
		l.observe(now, lat, limited)
		hi = max(hi, l.current())
		now = now.Add(time.Duration(float64(time.Second) / rate))
	}
	if hi > 2*knee || l.current() < knee/2 {
		t.Fatalf("limit up to %d, %d in the end; want at most %d (twice the knee) and at least %d", hi, l.current(), 2*knee, knee/2)
	}
	t.Logf("limit up to %d, %d in the end; %s (%s)", hi, l.current(), l.Reason, l.Detail)
}

// Past the knee with noise, as on a real host: each 250 ms the rate is off
// by a random 4% (GC, fetch batches), and each doubling of the limit past 64
// costs 2%. Luck must not carry the limit up: over two minutes it spends at
// most a tenth of the time above twice the knee.
func TestClimbLimitIgnoresLuckyWindows(t *testing.T) {
	const knee = 64
	for seed := uint64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		noise, slot := 1.0, time.Time{}
		l := newClimbLimit(1, 1024, 4, false)
		now := time.Unix(1000, 0)
		var above, total time.Duration
		for end := now.Add(2 * time.Minute); now.Before(end); {
			if now.Sub(slot) >= 250*time.Millisecond {
				slot, noise = now, 1+0.04*rng.NormFloat64()
			}
			limit := l.current()
			rate := float64(min(limit, knee)) / 0.010
			for n := knee; n < limit; n *= 2 {
				rate *= 0.98
			}
			rate *= noise
			l.observe(now, time.Duration(float64(limit)/rate*float64(time.Second)), true)
			step := time.Duration(float64(time.Second) / rate)
			if now.After(time.Unix(1010, 0)) {
				total += step
				if limit > 2*knee {
					above += step
				}
			}
			now = now.Add(step)
		}
		if share := float64(above) / float64(total); share > 0.1 {
			t.Errorf("seed %d: limit above %d for %.0f%% of the time, want at most 10%%", seed, 2*knee, 100*share)
		} else {
			t.Logf("seed %d: above %d for %.1f%% of the time; ended at %d (%s)", seed, 2*knee, 100*share, l.current(), l.Reason)
		}
	}
}

// The same input with the latency of a real lookup service: each record's
// 0–20 ms at random, and now and then a second in which it triples (a
// collection, a slow disk). The stalls make the latency move far, so tries
// down come for the latency; where pools grow, half the limit is still not
// kept while it holds instances back, or the pool would borrow an instance
// for every one the limit gave up (seen in a 10-minute soak: the limit at 1,
// the pool at 16 of a minimum of 4). A window that measured a stall may
// make half the limit look like relief: the limit then holds instances
// back, and is raised again within a try. (Each periodic try down holds
// them back for its window: about 3% of the time.)
func TestClimbLimitLeavesThePoolAloneThroughStalls(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		l := newClimbLimit(1, 1024, 8, true)
		now := time.Unix(1000, 0)
		var below, total, stretch, longest time.Duration
		const step = 2 * time.Millisecond
		for end := now.Add(5 * time.Minute); now.Before(end); now = now.Add(step) {
			lat := time.Duration(rng.IntN(20_000)) * time.Microsecond
			if now.Unix()%23 == 0 {
				lat *= 3
			}
			l.above = l.current() < 4
			l.observe(now, lat, l.current() < 4)
			if now.After(time.Unix(1030, 0)) {
				total += step
				if l.current() < 4 {
					below, stretch = below+step, stretch+step
					longest = max(longest, stretch)
				} else {
					stretch = 0
				}
			}
		}
		t.Logf("seed %d: below 4 for %.1f%% of the time, at most %v at once; last %d, %s (%s)",
			seed, 100*float64(below)/float64(total), longest, l.current(), l.Reason, l.Detail)
		if below*20 > total || longest > 2*time.Second || l.current() < 4 {
			t.Errorf("seed %d: the limit held instances back for too long (below 4: %v of %v, %v at once; last %d)", seed, below, total, longest, l.current())
		}
	}
}
