package fifo

import (
	"slices"
	"testing"
)

// Insert puts an item at any position of a queue, wrapped around its ring
// or not, and the items from there on move one place back.
func TestInsert(t *testing.T) {
	for _, head := range []int{0, 3, 7} { // pops before filling: where the ring starts
		for i := 0; i <= 6; i++ {
			var q Queue[int]
			for k := range 8 {
				q.Push(100 + k)
			}
			for range head {
				q.Pop()
				q.Push(0)
			}
			for q.Len() > 6 {
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
