package fifo

import (
	"slices"
	"testing"
)

// Insert puts an item at any position of a queue, wrapped around its ring
// or not, full (it grows) or not, and the items keep their order around it
// (those before it move to the front in the first half, those after it
// back in the second).
func TestInsert(t *testing.T) {
	for _, head := range []int{0, 3, 7} { // pops before filling: where the ring starts
		for c := 0; c <= 10; c++ {
			// c 0-6: 6 items, inserted at c; 7-10: 8 items in 8 slots
			// (Insert grows the ring), inserted at 0, 1, 6 and 8.
			i, full := c, c > 6
			if full {
				i = []int{0, 1, 6, 8}[c-7]
			}
			var q Queue[int]
			for k := range 8 {
				q.Push(100 + k)
			}
			for range head {
				q.Pop()
				q.Push(0)
			}
			for q.Len() > 6 && !full {
				q.Pop()
			}
			var want []int
			q.Each(func(v int) { want = append(want, v) })
			want = slices.Insert(want, i, -1)
			q.Insert(i, -1)
			var got []int
			for q.Len() > 0 {
				v, _ := q.Pop()
				got = append(got, v)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("head %d, insert at %d: %v, want %v", head, i, got, want)
			}
		}
	}
}
