package offsets

import (
	"math/rand"
	"testing"
)

// steadyTracker drives a Tracker the way a partition task does under load:
// fetches of 2,000–8,000 records arrive while fewer than 12,000 are pending
// (so 12,000–20,000 are live after a fetch), and records are marked done
// 1,024 at a time, in order within blocks of 64 except that the block's
// records are done in a shuffled order and one record in 97 is held back
// until 4,096 offsets later (a slow record holding the watermark).
type steadyTracker struct {
	t     *Tracker
	rng   *rand.Rand
	perm  [64]int
	added int64 // offsets [0, added) were added
	done  int64 // the blocks below done were marked done (but the held)
}

func newSteadyTracker(t *Tracker) *steadyTracker {
	s := &steadyTracker{t: t, rng: rand.New(rand.NewSource(1))}
	for i, p := range s.rng.Perm(len(s.perm)) {
		s.perm[i] = p
	}
	return s
}

func held(o int64) bool { return o%97 == 0 }

// step adds a fetch if few are pending, then marks 1,024 records done; it
// returns how many records it added.
func (s *steadyTracker) step() int {
	n := 0
	if s.added-s.done < 12000 {
		n = 2000 + s.rng.Intn(6001)
		for i := 0; i < n; i++ {
			s.t.Add(s.added, 1)
			s.added++
		}
	}
	for b := 0; b < 16 && s.done+64 <= s.added; b++ {
		for _, p := range s.perm {
			if o := s.done + int64(p); !held(o) {
				s.t.Done(o)
			}
		}
		// The records held back in the block 4,096 offsets below.
		if lo := s.done - 4096; lo >= 0 {
			for o := lo; o < lo+64; o++ {
				if held(o) {
					s.t.Done(o)
				}
			}
		}
		s.done += 64
	}
	return n
}

// BenchmarkTrackerSteady reports the bytes and allocations a record costs
// the tracker: warm (after 200,000 records, the steady state) and cold (a
// new tracker through its first 100,000 records, as a partition of a
// 1,000,000-record run over 8 partitions). ns/op, B/op and allocs/op are per
// record.
func BenchmarkTrackerSteady(b *testing.B) {
	b.Run("warm", func(b *testing.B) {
		var tr Tracker
		s := newSteadyTracker(&tr)
		for s.added < 200000 {
			s.step()
		}
		b.ReportAllocs()
		b.ResetTimer()
		for n := 0; n < b.N; {
			n += s.step()
		}
	})
	b.Run("cold100k", func(b *testing.B) {
		b.ReportAllocs()
		for n := 0; n < b.N; {
			tr := new(Tracker)
			s := newSteadyTracker(tr)
			for s.added < 100000 && n+int(s.added) < b.N+100000 {
				s.step()
			}
			n += int(s.added)
		}
	})
}
