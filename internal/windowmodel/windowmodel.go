// Package windowmodel is the reference model of windowed counts: what
// Kafka Streams' windowed aggregations with a grace period and
// EmitStrategy.onWindowClose() emit for a partition's records, written as
// plainly as the definitions allow (no timers, no state layout, no
// incremental closing). The Go SDK's windows (abi/guest/window) run over
// timers and two-part state keys; their tests compare them with this
// model on random inputs, and a differential test compares this model's
// sets with Kafka Streams'.
//
// The definitions (Kafka Streams' TimeWindows.windowsFor,
// KStreamWindowAggregate, KStreamSessionWindowAggregate):
//
//   - Stream time is the largest timestamp seen so far, the record being
//     added included; -1 before any.
//   - A time window is [start, start+size), starts the multiples of advance
//     that are >= 0. It takes a record while end + grace > stream time.
//   - A session is [start, end], both inclusive. A record at ts joins every
//     session of its key not yet closed with end >= ts - gap and start <=
//     ts + gap, merging them; a session is closed once end < stream time -
//     gap - grace, and a record that would only make a closed session is
//     dropped.
//   - A window's final result is emitted once it is closed; at the end of
//     the input the closed windows are the final results, the others open.
//   - A record no window takes is late.
//
// Timestamps are non-negative (a Kafka record's; the SDK fails a negative
// one).
//
// For the differential test, three points where Kafka Streams may differ
// from these definitions without being wrong: it skips records with a
// null key (here every record has a key, and moves stream time); it
// throttles emission on the wall clock (emit.interval.ms.kstreams.emit.final,
// 1 s by default: set it to 0, or the last windows to close may not be
// emitted yet); and its session stores drop sessions older than their
// retention (gap + grace by default) with observedStreamTime - retention +
// 1 as the bound, so a session ending exactly at stream time - gap - grace,
// still open by the processor's rule, may no longer be found by a record
// that should join it (the test probes that edge, or gives the store a
// longer retention).
package windowmodel

import "sort"

// Record is a record's key and timestamp (milliseconds).
type Record struct {
	Key string
	TS  int64
}

// Window is a window's count. End is exclusive for time windows, inclusive
// for sessions.
type Window struct {
	Key        string
	Start, End int64
	Count      int64
}

// Result is what a partition's records make.
type Result struct {
	Final []Window // closed windows, sorted by key, start
	Open  []Window // windows still open at the end, sorted likewise
	Late  int      // records no window took
	// Dropped counts the (record, window) pairs refused because the
	// window was closed (a hopping record may be late for some windows).
	Dropped    int
	StreamTime int64
}

type wkey struct {
	key   string
	start int64
}

// Tumbling counts records in windows [n·size, (n+1)·size).
func Tumbling(recs []Record, size, grace int64) Result {
	return Hopping(recs, size, size, grace)
}

// Hopping counts records in windows [n·advance, n·advance+size).
func Hopping(recs []Record, size, advance, grace int64) Result {
	counts := map[wkey]int64{}
	res := Result{StreamTime: -1}
	for _, r := range recs {
		res.StreamTime = max(res.StreamTime, r.TS)
		took := false
		for n := r.TS / advance; n >= 0; n-- {
			start := n * advance
			if start+size <= r.TS {
				break // this window and every earlier one ends at or before ts
			}
			if start+size+grace <= res.StreamTime {
				res.Dropped++
				continue
			}
			counts[wkey{r.Key, start}]++
			took = true
		}
		if !took {
			res.Late++
		}
	}
	for k, c := range counts {
		w := Window{Key: k.key, Start: k.start, End: k.start + size, Count: c}
		if w.End+grace <= res.StreamTime {
			res.Final = append(res.Final, w)
		} else {
			res.Open = append(res.Open, w)
		}
	}
	sortWindows(res.Final)
	sortWindows(res.Open)
	return res
}

// Sessions counts records in session windows of inactivity gap.
func Sessions(recs []Record, gap, grace int64) Result {
	res := Result{StreamTime: -1}
	sessions := map[string][]Window{} // every session, closed ones too
	for _, r := range recs {
		res.StreamTime = max(res.StreamTime, r.TS)
		closeTime := res.StreamTime - gap - grace
		merged := Window{Key: r.Key, Start: r.TS, End: r.TS, Count: 1}
		var keep []Window
		for _, s := range sessions[r.Key] {
			if s.End >= closeTime && s.End >= r.TS-gap && s.Start <= r.TS+gap {
				merged.Start, merged.End = min(merged.Start, s.Start), max(merged.End, s.End)
				merged.Count += s.Count
			} else {
				keep = append(keep, s)
			}
		}
		if merged.End < closeTime {
			res.Late++ // it joined nothing (an open session ends at or after closeTime)
			continue
		}
		sessions[r.Key] = append(keep, merged)
	}
	for _, ss := range sessions {
		for _, s := range ss {
			if s.End < res.StreamTime-gap-grace {
				res.Final = append(res.Final, s)
			} else {
				res.Open = append(res.Open, s)
			}
		}
	}
	sortWindows(res.Final)
	sortWindows(res.Open)
	return res
}

func sortWindows(ws []Window) {
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].Key != ws[j].Key {
			return ws[i].Key < ws[j].Key
		}
		return ws[i].Start < ws[j].Start
	})
}
