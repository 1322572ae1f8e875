package fifo

import (
	"math/rand"
	"slices"
	"testing"
)

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

// contents is what Each sees, checked against At and Len.
func contents(t *testing.T, q *Queue[int]) []int {
	t.Helper()
	var got []int
	q.Each(func(v int) { got = append(got, v) })
	if len(got) != q.Len() {
		t.Fatalf("each saw %d, len %d", len(got), q.Len())
	}
	for i, v := range got {
		if *q.At(i) != v {
			t.Fatalf("at %d = %d, each saw %d", i, *q.At(i), v)
		}
	}
	return got
}

func TestWrapAround(t *testing.T) {
	var q Queue[int]
	for i := 0; i < 8; i++ {
		q.Push(i)
	}
	for i := 0; i < 5; i++ {
		q.Pop()
	}
	for i := 8; i < 13; i++ {
		q.Push(i) // slots 0..4: the ring wraps
	}
	if len(q.buf) != 8 || q.head != 5 {
		t.Fatalf("capacity %d, head %d: not wrapped", len(q.buf), q.head)
	}
	if got := contents(t, &q); !slices.Equal(got, []int{5, 6, 7, 8, 9, 10, 11, 12}) {
		t.Fatalf("wrapped ring holds %v", got)
	}
	// Growing while wrapped unwraps in order.
	q.Push(13)
	if len(q.buf) != 16 || q.head != 0 {
		t.Fatalf("after growth: capacity %d, head %d", len(q.buf), q.head)
	}
	for want := 5; want <= 13; want++ {
		if v, ok := q.Pop(); !ok || v != want {
			t.Fatalf("pop %d %v, want %d", v, ok, want)
		}
	}
	if _, ok := q.Pop(); ok || q.Len() != 0 {
		t.Fatal("pop from an empty queue")
	}
}

func TestPushFrontWrapped(t *testing.T) {
	var q Queue[int]
	for i := 0; i < 4; i++ {
		q.Push(i)
	}
	// The front at slot 0: PushFront wraps to the last slot.
	q.PushFront(-1)
	if len(q.buf) != 8 || q.head != 7 {
		t.Fatalf("capacity %d, head %d", len(q.buf), q.head)
	}
	q.PushFront(-2)
	q.PushFront(-3)
	q.PushFront(-4) // full, front at slot 4
	if got := contents(t, &q); !slices.Equal(got, []int{-4, -3, -2, -1, 0, 1, 2, 3}) {
		t.Fatalf("holds %v", got)
	}
	// PushFront on a full wrapped ring grows it.
	q.PushFront(-5)
	if len(q.buf) != 16 {
		t.Fatalf("capacity %d", len(q.buf))
	}
	if got := contents(t, &q); !slices.Equal(got, []int{-5, -4, -3, -2, -1, 0, 1, 2, 3}) {
		t.Fatalf("after growth holds %v", got)
	}
	// A popped item put back is the next pop again.
	v, _ := q.Pop()
	q.PushFront(v)
	if f, _ := q.Peek(); f != -5 {
		t.Fatalf("front %d", f)
	}
}

func TestSearchEachWrapped(t *testing.T) {
	var q Queue[int]
	for i := 0; i < 11; i++ {
		q.Push(-1)
	}
	for i := 0; i < 11; i++ {
		q.Pop()
	}
	for v := 0; v < 16; v++ {
		q.Push(v * 10) // front at slot 11, wraps after 5
	}
	if q.head != 11 || len(q.buf) != 16 {
		t.Fatalf("capacity %d, head %d", len(q.buf), q.head)
	}
	var want []int
	for v := 0; v < 16; v++ {
		want = append(want, v*10)
	}
	if got := contents(t, &q); !slices.Equal(got, want) {
		t.Fatalf("each %v", got)
	}
	for x := -5; x <= 160; x++ {
		v, ok := q.Search(func(v int) bool { return v >= x })
		wantV, wantOK := 0, false
		for _, w := range want {
			if w >= x {
				wantV, wantOK = w, true
				break
			}
		}
		if v != wantV || ok != wantOK {
			t.Fatalf("search >= %d: %d %v, want %d %v", x, v, ok, wantV, wantOK)
		}
		i := q.Index(func(p *int) bool { return *p >= x })
		if wantOK && want[i] != wantV || !wantOK && i != q.Len() {
			t.Fatalf("index >= %d: %d", x, i)
		}
	}
}

// TestShrink: a queue whose load dropped for good gives its storage back
// after a turn of the ring; one that empties between bursts keeps it.
func TestShrink(t *testing.T) {
	var q Queue[int]
	for i := 0; i < 100000; i++ {
		q.Push(i)
	}
	big := len(q.buf)
	next := 0
	for q.Len() > 100 {
		if v, _ := q.Pop(); v != next {
			t.Fatalf("pop %d, want %d", v, next)
		}
		next++
	}
	// Now at most 101 queued, through two turns of the largest ring.
	pushed := 100000
	for i := 0; i < 2*big; i++ {
		q.Push(pushed)
		pushed++
		if v, _ := q.Pop(); v != next {
			t.Fatalf("pop %d, want %d", v, next)
		}
		next++
	}
	if len(q.buf) != shrinkFloor {
		t.Fatalf("capacity %d after the load dropped to 101 (was %d)", len(q.buf), big)
	}
	for q.Len() > 0 {
		if v, _ := q.Pop(); v != next {
			t.Fatalf("pop %d, want %d", v, next)
		}
		next++
	}

	// Bursts of 20,000 drained to empty: the storage stays.
	var b Queue[int]
	for round := 0; round < 10; round++ {
		for i := 0; i < 20000; i++ {
			b.Push(i)
		}
		if round == 0 {
			big = len(b.buf)
		}
		for b.Len() > 0 {
			b.Pop()
		}
		if len(b.buf) != big {
			t.Fatalf("round %d: capacity %d, was %d", round, len(b.buf), big)
		}
	}
}

// TestAgainstSlice runs random operations against a plain slice.
func TestAgainstSlice(t *testing.T) {
	// Pushes, pops, pushes at the front and inserts anywhere, against a
	// slice, wrapped or not.
	rng := rand.New(rand.NewSource(2))
	var q Queue[int]
	var model []int
	next := 0
	for op := 0; op < 30000; op++ {
		switch r := rng.Intn(100); {
		case r < 45:
			for k := rng.Intn(1 + rng.Intn(1000)); k >= 0; k-- {
				q.Push(next)
				model = append(model, next)
				next++
			}
		case r < 90:
			for k := rng.Intn(1 + rng.Intn(1000)); k >= 0; k-- {
				v, ok := q.Pop()
				if len(model) == 0 {
					if ok {
						t.Fatalf("op %d: pop %d from an empty queue", op, v)
					}
					break
				}
				if !ok || v != model[0] {
					t.Fatalf("op %d: pop %d %v, want %d", op, v, ok, model[0])
				}
				model = model[1:]
			}
		case r < 94:
			q.PushFront(-next)
			model = append([]int{-next}, model...)
			next++
		case r < 98:
			i := rng.Intn(len(model) + 1)
			q.Insert(i, -next)
			model = slices.Insert(model, i, -next)
			next++
		case r < 99:
			if got := contents(t, &q); !slices.Equal(got, model) {
				t.Fatalf("op %d: holds %v, want %v", op, got, model)
			}
		default:
			q.Reset()
			model = nil
		}
		if q.Len() != len(model) {
			t.Fatalf("op %d: len %d, want %d", op, q.Len(), len(model))
		}
		if v, ok := q.Peek(); ok != (len(model) > 0) || ok && v != model[0] {
			t.Fatalf("op %d: peek %d %v", op, v, ok)
		}
		if c := len(q.buf); c&(c-1) != 0 || c < q.Len() {
			t.Fatalf("op %d: capacity %d for %d items", op, c, q.Len())
		}
	}
}

// TestSteadyBurstsAllocateNothing: under a partition task's load (bursts of
// thousands, drained continuously, 12,000-20,000 queued) a warm queue
// allocates nothing a record.
func TestSteadyBurstsAllocateNothing(t *testing.T) {
	var q Queue[*int]
	s := newSteadyQueue(&q)
	for s.pushed < 200000 {
		s.step()
	}
	pushed := s.pushed
	allocs := testing.AllocsPerRun(200, func() { s.step() })
	if allocs != 0 {
		t.Fatalf("%v allocations per step of %d records", allocs, (s.pushed-pushed)/201)
	}
}
