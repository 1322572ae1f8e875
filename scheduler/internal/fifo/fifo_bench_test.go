package fifo

import (
	"math/rand"
	"testing"
)

// steadyQueue drives a Queue the way a partition task's queues are under
// load: fetches of 2,000–8,000 records are pushed while fewer than 12,000
// wait (so 12,000–20,000 wait after a fetch), and 1,024 are popped at a
// time; one pop in 64 is a run cut short, its record pushed back to the
// front and popped again.
type steadyQueue struct {
	q      *Queue[*int]
	rng    *rand.Rand
	v      *int
	pushed int
}

func newSteadyQueue(q *Queue[*int]) *steadyQueue {
	return &steadyQueue{q: q, rng: rand.New(rand.NewSource(1)), v: new(int)}
}

// step pushes a fetch if few wait, then pops 1,024; it returns how many it
// pushed.
func (s *steadyQueue) step() int {
	n := 0
	if s.q.Len() < 12000 {
		n = 2000 + s.rng.Intn(6001)
		for i := 0; i < n; i++ {
			s.q.Push(s.v)
		}
		s.pushed += n
	}
	for i := 0; i < 1024; i++ {
		v, ok := s.q.Pop()
		if !ok {
			break
		}
		if i%64 == 63 {
			s.q.PushFront(v)
			s.q.Pop()
		}
	}
	return n
}

// BenchmarkQueueSteady reports the bytes and allocations a record costs
// the queue: warm (after 200,000 records, the steady state) and cold (a new
// queue through its first 100,000 records, as a partition of a
// 1,000,000-record run over 8 partitions). ns/op, B/op and allocs/op are per
// record.
func BenchmarkQueueSteady(b *testing.B) {
	b.Run("warm", func(b *testing.B) {
		var q Queue[*int]
		s := newSteadyQueue(&q)
		for s.pushed < 200000 {
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
			q := new(Queue[*int])
			s := newSteadyQueue(q)
			for s.pushed < 100000 && n+s.pushed < b.N+100000 {
				s.step()
			}
			n += s.pushed
		}
	})
}
