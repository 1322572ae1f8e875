package windowmodel

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// The model's properties, on random inputs: what the definitions imply
// without restating them.

const trials = 300

func randomRecords(rng *rand.Rand, n int, keys int, span int64) []Record {
	recs := make([]Record, n)
	for i := range recs {
		recs[i] = Record{Key: string(rune('a' + rng.IntN(keys))), TS: rng.Int64N(span)}
	}
	return recs
}

func total(ws []Window) (n int64) {
	for _, w := range ws {
		n += w.Count
	}
	return n
}

// Every record is counted once in a tumbling window or late, never both.
func TestTumblingConservesRecords(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for range trials {
		recs := randomRecords(rng, rng.IntN(60), 3, 200)
		size, grace := 1+rng.Int64N(30), rng.Int64N(40)
		r := Tumbling(recs, size, grace)
		if got := total(r.Final) + total(r.Open) + int64(r.Late); got != int64(len(recs)) {
			t.Fatalf("size %d grace %d: %d counted + late, %d records: %+v", size, grace, got, len(recs), recs)
		}
		if r.Late != r.Dropped {
			t.Fatalf("tumbling: late %d, dropped %d: a record has one window", r.Late, r.Dropped)
		}
	}
}

// Records in timestamp order are never late, and their counts are the
// plain grouping by (key, ts - ts mod size).
func TestTumblingInOrderIsAGroupBy(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for range trials {
		recs := randomRecords(rng, rng.IntN(60), 3, 500)
		slices.SortStableFunc(recs, func(a, b Record) int { return int(a.TS - b.TS) })
		size, grace := 1+rng.Int64N(50), rng.Int64N(20)
		r := Tumbling(recs, size, grace)
		if r.Late != 0 {
			t.Fatalf("in order: %d late", r.Late)
		}
		want := map[wkey]int64{}
		for _, rec := range recs {
			want[wkey{rec.Key, rec.TS - rec.TS%size}]++
		}
		got := map[wkey]int64{}
		for _, w := range append(append([]Window{}, r.Final...), r.Open...) {
			got[wkey{w.Key, w.Start}] = w.Count
			if w.End != w.Start+size || w.Start%size != 0 {
				t.Fatalf("window %+v is not [n·%d, n·%d+%d)", w, size, size, size)
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

// Out of order within grace (each record at most grace behind the largest
// timestamp before it) the result is the sorted input's: order does not
// matter while nothing is late.
func TestOutOfOrderWithinGraceIsOrderFree(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 6))
	for range trials {
		size, grace := 1+rng.Int64N(30), rng.Int64N(25)
		advance := 1 + rng.Int64N(size)
		n := rng.IntN(60)
		recs := make([]Record, n)
		base := int64(0)
		for i := range recs {
			base += rng.Int64N(10)
			recs[i] = Record{Key: string(rune('a' + rng.IntN(3))), TS: max(0, base-rng.Int64N(grace+1))}
		}
		sorted := slices.Clone(recs)
		slices.SortStableFunc(sorted, func(a, b Record) int { return int(a.TS - b.TS) })
		for _, kind := range []struct {
			name string
			run  func([]Record) Result
		}{
			{"hopping", func(rs []Record) Result { return Hopping(rs, size, advance, grace) }},
			{"sessions", func(rs []Record) Result { return Sessions(rs, size, grace) }},
		} {
			got, want := kind.run(recs), kind.run(sorted)
			if got.Late != 0 || got.Dropped != 0 {
				t.Fatalf("%s: within grace, %d late, %d dropped: %+v", kind.name, got.Late, got.Dropped, recs)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s size %d advance %d grace %d:\n got %+v\nwant %+v\ninput %+v", kind.name, size, advance, grace, got, want, recs)
			}
		}
	}
}

// A record beyond grace (its windows all closed) is late and changes no
// window.
func TestLateBeyondGraceChangesNothing(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	for range trials {
		recs := randomRecords(rng, 1+rng.IntN(60), 3, 1000)
		size, grace := 1+rng.Int64N(30), rng.Int64N(40)
		advance := 1 + rng.Int64N(size)
		before := Hopping(recs, size, advance, grace)
		// Every window holding ts ends by ts+size, so ts < st-size-grace is closed everywhere.
		if before.StreamTime-size-grace <= 0 {
			continue
		}
		ts := rng.Int64N(before.StreamTime - size - grace)
		after := Hopping(append(slices.Clone(recs), Record{Key: "a", TS: ts}), size, advance, grace)
		if after.Late != before.Late+1 || !reflect.DeepEqual(after.Final, before.Final) || !reflect.DeepEqual(after.Open, before.Open) {
			t.Fatalf("record at %d (stream time %d, size %d, grace %d) changed the result:\n%+v\n%+v", ts, before.StreamTime, size, grace, before, after)
		}
		sAfter := Sessions(append(slices.Clone(recs), Record{Key: "a", TS: max(0, ts-size)}), size, grace)
		sBefore := Sessions(recs, size, grace)
		if sAfter.Late != sBefore.Late+1 || !reflect.DeepEqual(sAfter.Final, sBefore.Final) || !reflect.DeepEqual(sAfter.Open, sBefore.Open) {
			t.Fatalf("session record at %d (stream time %d, gap %d, grace %d) changed the result", max(0, ts-size), sBefore.StreamTime, size, grace)
		}
	}
}

// Hopping with advance = size is tumbling; with advance < size a record at
// ts >= size is in about size/advance windows, each holding it.
func TestHoppingWindowsPerRecord(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 10))
	for range trials {
		recs := randomRecords(rng, rng.IntN(40), 2, 300)
		size, grace := 1+rng.Int64N(30), rng.Int64N(40)
		if !reflect.DeepEqual(Hopping(recs, size, size, grace), Tumbling(recs, size, grace)) {
			t.Fatal("hopping with advance = size differs from tumbling")
		}
		advance := 1 + rng.Int64N(size)
		ts := size + rng.Int64N(100)
		r := Hopping([]Record{{"k", ts}}, size, advance, grace)
		// The starts in (ts-size, ts] that are multiples of advance: size/advance
		// of them, rounded down or up (exactly that when advance divides size).
		n := int64(len(r.Open) + len(r.Final))
		if n < size/advance || n > (size+advance-1)/advance {
			t.Fatalf("size %d advance %d: record at %d in %d windows", size, advance, ts, n)
		}
		for _, w := range r.Open {
			if w.Start%advance != 0 || w.Start > ts || w.End <= ts {
				t.Fatalf("size %d advance %d: record at %d in window %+v", size, advance, ts, w)
			}
		}
	}
}

// Every record is in one session or late; sessions of a key never overlap
// within gap of each other.
func TestSessionsConserveAndSeparate(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(11, 12))
	for range trials {
		recs := randomRecords(rng, rng.IntN(60), 3, 400)
		gap, grace := 1+rng.Int64N(20), rng.Int64N(30)
		r := Sessions(recs, gap, grace)
		if got := total(r.Final) + total(r.Open) + int64(r.Late); got != int64(len(recs)) {
			t.Fatalf("gap %d grace %d: %d counted + late, %d records", gap, grace, got, len(recs))
		}
		for _, w := range r.Open {
			for _, v := range r.Open {
				if w != v && w.Key == v.Key && w.Start <= v.Start && v.Start-w.End <= gap {
					t.Fatalf("open sessions %+v and %+v within gap %d", w, v, gap)
				}
			}
		}
	}
}

// The boundaries, by hand: Kafka Streams' exact edges.
func TestBoundaries(t *testing.T) {
	t.Parallel()
	const size, grace = 10, 5
	cases := []struct {
		name string
		recs []Record
		want Result
	}{
		{"at exactly end: next window", []Record{{"k", 9}, {"k", 10}},
			Result{Open: []Window{{"k", 0, 10, 1}, {"k", 10, 20, 1}}, StreamTime: 10}},
		{"stream time end+grace-1: still open", []Record{{"k", 14}, {"k", 3}},
			Result{Open: []Window{{"k", 0, 10, 1}, {"k", 10, 20, 1}}, StreamTime: 14}},
		{"stream time end+grace: closed, the record late", []Record{{"k", 15}, {"k", 3}},
			Result{Open: []Window{{"k", 10, 20, 1}}, Late: 1, Dropped: 1, StreamTime: 15}},
		{"closed by another key's record", []Record{{"a", 2}, {"b", 15}},
			Result{Final: []Window{{"a", 0, 10, 1}}, Open: []Window{{"b", 10, 20, 1}}, StreamTime: 15}},
		{"a record closes its own old window", []Record{{"k", 2}, {"k", 15}},
			Result{Final: []Window{{"k", 0, 10, 1}}, Open: []Window{{"k", 10, 20, 1}}, StreamTime: 15}},
	}
	for _, c := range cases {
		if got := Tumbling(c.recs, size, grace); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
	// Hopping: windows start at 0 at the earliest (no negative starts).
	if got := Hopping([]Record{{"k", 3}}, 10, 5, 0); len(got.Open) != 1 || got.Open[0].Start != 0 {
		t.Errorf("hopping at 3: %+v, want only [0, 10)", got.Open)
	}
	// Sessions: a record exactly gap after the end joins; gap+1 starts anew.
	if got := Sessions([]Record{{"k", 0}, {"k", 10}, {"k", 21}}, 10, 100); !reflect.DeepEqual(got.Open, []Window{{"k", 0, 10, 2}, {"k", 21, 21, 1}}) {
		t.Errorf("sessions: %+v", got.Open)
	}
	// A session closes once stream time passes end + gap + grace.
	if got := Sessions([]Record{{"a", 0}, {"b", 15}}, 10, 5); len(got.Final) != 0 {
		t.Errorf("session [0,0] closed at stream time 15 = end+gap+grace: %+v", got.Final)
	}
	if got := Sessions([]Record{{"a", 0}, {"b", 16}}, 10, 5); !reflect.DeepEqual(got.Final, []Window{{"a", 0, 0, 1}}) {
		t.Errorf("session [0,0] not closed at stream time 16: %+v", got.Final)
	}
}
