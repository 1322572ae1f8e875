// Package fifo is a first-in first-out queue on a ring buffer: the queued
// items sit in a slice whose length is a power of two, from a head index
// onwards, wrapping around its end. A push writes the slot after the last
// item, a pop the head's, and PushFront the slot before the head, so a queue
// that is filled and drained over and over stops allocating once it has
// grown to its working size, and moves no item except to grow or shrink.
//
// It grows only when full, by doubling (one allocation and one copy of the
// items, unwrapped to the start of the new slice): a queue that reaches n
// items holds under 2n slots and has allocated under 4n in all, against
// about 2.5n and 9n for an append-grown slice compacted when its dead front
// outgrows its live part (the queue this one replaced). It shrinks when a
// whole turn of the ring (as many pops as it has slots) went by without the
// queue ever being more than a quarter full: to twice that peak, never below
// shrinkFloor slots. A queue that empties between bursts therefore keeps its
// storage, and one whose load dropped for good gives most of it back.
package fifo

// shrinkFloor is the capacity below which a queue is never shrunk: small
// queues (a key's lane) are not worth the churn.
const shrinkFloor = 1024

// Queue is a FIFO queue. The zero value is empty and ready. Not safe for
// concurrent use.
type Queue[T any] struct {
	buf  []T // len(buf) is 0 or a power of two
	head int // index in buf of the front item
	n    int // items queued: buf[head], buf[(head+1)&mask], ...
	peak int // most items queued during the current turn
	turn int // pops in the current turn
}

// Len is the number of items queued.
func (q *Queue[T]) Len() int { return q.n }

// slot is the index in buf of the i-th item, front first.
func (q *Queue[T]) slot(i int) int { return (q.head + i) & (len(q.buf) - 1) }

// Push adds v at the back.
func (q *Queue[T]) Push(v T) {
	if q.n == len(q.buf) {
		q.resize(max(1, 2*len(q.buf)))
	}
	q.buf[q.slot(q.n)] = v
	q.n++
	q.peak = max(q.peak, q.n)
}

// PushFront adds v at the front: it is the next Pop.
func (q *Queue[T]) PushFront(v T) {
	if q.n == len(q.buf) {
		q.resize(max(1, 2*len(q.buf)))
	}
	q.head = (q.head - 1) & (len(q.buf) - 1)
	q.buf[q.head] = v
	q.n++
	q.peak = max(q.peak, q.n)
}

// Insert adds v at position i (0: the front, Len(): the back), moving the
// items on the shorter side of i one place: those before it one place to
// the front when i is in the queue's first half, else those from i on one
// place back. O(min(i, Len()-i)): a timer firing's place, reserved right
// after its trigger's near the front of a release order by offset that
// holds every record fetched behind it (partition.releaser.reserveAfter),
// moves the few places before it, not the thousands after (the whole
// queue a firing was a third of exactly_once's CPU in the windowed
// count). It panics when i is not in [0, Len()].
func (q *Queue[T]) Insert(i int, v T) {
	if i < 0 || i > q.n {
		panic("fifo: index out of range")
	}
	var last int // buf's last slot, once the push made room
	if i < q.n-i {
		// The items before i move one slot towards the front, a copy per
		// run of slots that does not wrap (a swap each was a cost of every
		// work a timer round places after its record).
		q.PushFront(v)
		last = len(q.buf) - 1
		for k := 0; k < i; {
			d := q.slot(k)
			if d == last {
				q.buf[d] = q.buf[0]
				k++
				continue
			}
			c := min(i-k, last-d)
			copy(q.buf[d:d+c], q.buf[d+1:d+1+c])
			k += c
		}
		q.buf[q.slot(i)] = v
		return
	}
	// The items from i on move one slot towards the back, likewise.
	q.Push(v)
	last = len(q.buf) - 1
	for k := q.n - 1; k > i; {
		d := q.slot(k)
		if d == 0 {
			q.buf[0] = q.buf[last]
			k--
			continue
		}
		c := min(k-i, d)
		copy(q.buf[d-c+1:d+1], q.buf[d-c:d])
		k -= c
	}
	q.buf[q.slot(i)] = v
}

// Peek returns the front item; ok is false when the queue is empty.
func (q *Queue[T]) Peek() (v T, ok bool) {
	if q.n == 0 {
		return v, false
	}
	return q.buf[q.head], true
}

// Pop removes and returns the front item; ok is false when the queue is
// empty.
func (q *Queue[T]) Pop() (v T, ok bool) {
	if q.n == 0 {
		return v, false
	}
	v = q.buf[q.head]
	var zero T
	q.buf[q.head] = zero // no reference kept to what left
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.n--
	if q.turn++; q.turn >= len(q.buf) {
		if c := len(q.buf); c > shrinkFloor && q.peak <= c/4 {
			q.resize(max(shrinkFloor, ceilPow2(2*q.peak)))
		}
		q.peak, q.turn = q.n, 0
	}
	return v, true
}

// At returns a pointer to the i-th queued item, front first (0 is the
// front), valid until the next Push, PushFront, Pop or Reset. It panics when
// i is not in [0, Len()).
func (q *Queue[T]) At(i int) *T {
	if i < 0 || i >= q.n {
		panic("fifo: index out of range")
	}
	return &q.buf[q.slot(i)]
}

// Each calls fn for every queued item, front first.
func (q *Queue[T]) Each(fn func(T)) {
	for i := 0; i < q.n; i++ {
		fn(q.buf[q.slot(i)])
	}
}

// Search returns the first queued item, front first, for which f is true,
// given that f is false for a prefix of the queue and true for the rest
// (as sort.Search); ok is false when it is true for none.
func (q *Queue[T]) Search(f func(T) bool) (v T, ok bool) {
	i := q.Index(func(p *T) bool { return f(*p) })
	if i == q.n {
		return v, false
	}
	return q.buf[q.slot(i)], true
}

// Index returns the position (0 is the front) of the first queued item for
// which f is true, given that f is false for a prefix of the queue and true
// for the rest (as sort.Search), or Len() when it is true for none. f is
// given a pointer into the queue (as At).
func (q *Queue[T]) Index(f func(*T) bool) int {
	lo, hi := 0, q.n // f false below lo, true from hi
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if f(&q.buf[q.slot(m)]) {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return lo
}

// Reset empties the queue and lets go of its storage.
func (q *Queue[T]) Reset() { *q = Queue[T]{} }

// resize moves the items to a new slice of c slots (a power of two, at
// least Len()), front at index 0.
func (q *Queue[T]) resize(c int) {
	buf := make([]T, c)
	if q.n > 0 {
		if end := q.head + q.n; end <= len(q.buf) {
			copy(buf, q.buf[q.head:end])
		} else {
			k := copy(buf, q.buf[q.head:])
			copy(buf[k:], q.buf[:end-len(q.buf)])
		}
	}
	q.buf, q.head = buf, 0
}

// ceilPow2 is the least power of two at least n (n >= 1).
func ceilPow2(n int) int {
	c := 1
	for c < n {
		c <<= 1
	}
	return c
}
