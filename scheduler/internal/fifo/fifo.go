// Package fifo is a first-in first-out queue on a slice that reuses its
// storage: popping moves a head index instead of re-slicing, so a queue that
// is filled and drained over and over stops allocating once it has grown to
// its working size (a re-sliced Go slice loses its front capacity and
// allocates again on every few appends).
package fifo

import "sort"

// Queue is a FIFO queue. The zero value is empty and ready. Not safe for
// concurrent use.
type Queue[T any] struct {
	items []T
	head  int
}

// Len is the number of items queued.
func (q *Queue[T]) Len() int { return len(q.items) - q.head }

// Push adds v at the back.
func (q *Queue[T]) Push(v T) {
	if q.head > 0 && len(q.items) == cap(q.items) && q.head*2 >= len(q.items) {
		// At capacity with at least half of it dead at the front: move the
		// live items down instead of growing.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items = q.items[:n]
		q.head = 0
	}
	q.items = append(q.items, v)
}

// PushFront adds v at the front: it is the next Pop. Cheap after a Pop
// (the slot the popped item left is reused).
func (q *Queue[T]) PushFront(v T) {
	if q.head > 0 {
		q.head--
		q.items[q.head] = v
		return
	}
	q.items = append(q.items, v)
	copy(q.items[1:], q.items)
	q.items[0] = v
}

// Peek returns the front item; ok is false when the queue is empty.
func (q *Queue[T]) Peek() (v T, ok bool) {
	if q.head == len(q.items) {
		return v, false
	}
	return q.items[q.head], true
}

// Pop removes and returns the front item; ok is false when the queue is
// empty.
func (q *Queue[T]) Pop() (v T, ok bool) {
	if q.head == len(q.items) {
		return v, false
	}
	v = q.items[q.head]
	var zero T
	q.items[q.head] = zero // no reference kept to what left
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return v, true
}

// Each calls fn for every queued item, front first.
func (q *Queue[T]) Each(fn func(T)) {
	for _, v := range q.items[q.head:] {
		fn(v)
	}
}

// Search returns the first queued item, front first, for which f is true,
// given that f is false for a prefix of the queue and true for the rest
// (as sort.Search); ok is false when it is true for none.
func (q *Queue[T]) Search(f func(T) bool) (v T, ok bool) {
	live := q.items[q.head:]
	i := sort.Search(len(live), func(i int) bool { return f(live[i]) })
	if i == len(live) {
		return v, false
	}
	return live[i], true
}

// Reset empties the queue and lets go of its storage.
func (q *Queue[T]) Reset() { *q = Queue[T]{} }
