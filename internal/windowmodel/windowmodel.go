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
// Kafka Streams 4.4 differs from these definitions in the points below,
// found by the differential test (tests/windiff: Kafka Streams' windowed
// count with EmitStrategy.onWindowClose() and this model on the same
// seeded input, partition by partition) and read in Streams' source
// (KStreamWindowAggregate, KStreamSessionWindowAggregate, the segmented
// stores). In each the definitions above are the right ones: they are
// Streams' own processors' rules, which its stores or configuration
// defeat. The test configures Streams around them; the Go SDK's windows
// (abi/guest/window) keep the definitions, and the same test runs them in
// a wasmstream pipeline over the same input: their final windows and late
// records are the model's.
//
//   - Null keys: Streams skips a record with a null key before it moves
//     stream time, and counts it as dropped. Here every record has a key.
//   - The emission throttle: final results are emitted at most once a
//     second of wall-clock time, by the internal config
//     __emit.interval.ms.kstreams.windowed.aggregation__ (StreamsConfig.
//     InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION; there
//     is no "emit.interval.ms.kstreams.emit.final", which Streams ignores).
//     The windows closed by records processed within that second wait for
//     a later record: on the test's input (about 300 records a partition,
//     processed in well under a second) Streams emitted none of the 122
//     final windows of a partition. Set to 0, it emits on every record.
//   - Time windows lost on a jump of stream time: the window store
//     (retention size + grace by default) serves only what is younger than
//     its own stream time (the largest window start written) minus the
//     retention (strict retention, KAFKA-12960), and the record that
//     closes a window writes its own window before it fetches the closed
//     ones. A window [s, s+size) is never emitted when the record that
//     closes it writes a window starting after s + size + grace: with
//     size 1000 and grace 300, a record at 2000 arriving while stream time
//     is below 1300 loses [0, 1000). The test's input (pauses of up to 2.5
//     s) lost 41 of 128 final windows of a partition, 195 of 393 hopping
//     ones. A longer retention (Materialized.withRetention) keeps them:
//     the processor's close rule, not the store, decides what a window
//     takes.
//   - A session ending exactly at the close time: a session is open while
//     end >= stream time - gap - grace (the processor drops a record whose
//     merged session ends before that, and emits sessions ending at or
//     before it minus 1), but the session store's lookup serves only
//     sessions ending at or after its stream time - retention + 1, with
//     retention gap + grace by default: one millisecond later. A record
//     that should join a session ending exactly at stream time - gap -
//     grace starts a session of its own, and Streams emits two sessions
//     where the definition has one (on the test's input, 190 sessions on a
//     partition where the model has 164: records exactly gap after a
//     session's end, stream time exactly at its close time). A
//     retention of gap + grace + 1 makes the lookup bound the close time;
//     a longer one lets a record merge with sessions already closed, and
//     emitted, into a second final result that overlaps them (with an
//     hour, on the test's input, a key's session [12408, 14883] count 10
//     where the model has [14883, 14883] count 1, the key's earlier
//     sessions from 12408 on emitted by both: their records counted
//     twice; and a record the model calls late was taken).
//   - Sessions lost at a segment boundary (read in the source, kept out of
//     the test's input): the session store keeps sessions in segments of
//     max(retention/2, 60 s) by end time and deletes a segment once its
//     stream time passes the segment's end + retention, on the write that
//     precedes the emission. A record that moves stream time past a
//     segment's end + retention before the sessions ending in it were
//     emitted loses them (with the default retention, a session ending at
//     a segment's last millisecond is never emitted: its close and its
//     segment's deletion come with the same stream time). The test keeps
//     its input in the first minute.
//   - Late counts: Streams' dropped-records-total counts, for time
//     windows, each (record, window) pair refused (Result.Dropped: a
//     hopping record may be late for some of its windows only), and for
//     sessions each record refused (Result.Late).
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
