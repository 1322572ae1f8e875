package fifo

import "testing"

func TestOrderAndReuse(t *testing.T) {
	var q Queue[int]
	next, want := 0, 0
	for round := 0; round < 1000; round++ {
		for i := 0; i < 1+round%7; i++ {
			q.Push(next)
			next++
		}
		for i := 0; i < 1+round%5 && q.Len() > 0; i++ {
			if v, ok := q.Peek(); !ok || v != want {
				t.Fatalf("peek %d %v, want %d", v, ok, want)
			}
			if v, _ := q.Pop(); v != want {
				t.Fatalf("pop %d, want %d", v, want)
			}
			want++
		}
	}
	n := 0
	q.Each(func(v int) {
		if v != want+n {
			t.Fatalf("each: %d at %d, want %d", v, n, want+n)
		}
		n++
	})
	if n != q.Len() || next-want != n {
		t.Fatalf("len %d, each saw %d, pushed-popped %d", q.Len(), n, next-want)
	}
	for q.Len() > 0 {
		q.Pop()
	}
	if _, ok := q.Pop(); ok {
		t.Fatal("pop from an empty queue")
	}
}

// A queue kept at a steady size allocates nothing once warm.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	var q Queue[*int]
	v := new(int)
	for i := 0; i < 100; i++ {
		q.Push(v)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		q.Push(v)
		q.Pop()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per push+pop", allocs)
	}
}
