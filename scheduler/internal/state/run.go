package state

import (
	"math"
	"sync"
	"unsafe"

	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

// Run is the state of the records of one call into an instance (a run:
// the worker's startRun). The host does not chain the records' states and
// Partition.Commit takes a record's writes only after the call, so record
// k of the run reads through the writes of the records before it that are
// to become the partition's, as if each had been committed before it
// began, as a record run alone after them reads them from the overlay
// (RATIONALE.md, "Runs of records: what the engine takes in one pick").
//
// Those writes are folded once: when a record of the run first needs them
// (a state call), the records before it not asked yet are asked about in
// order (accepts), and the writes of those accepted are appended to the
// run's writes and indexed by key. A record reads a key with one lookup,
// whatever the run's length; each write is folded once a run. (Before, each
// record merged the writes of every record before it again, with a closure
// and a map of its own: quadratic in the run's length, ~48 allocations and
// ~8 KB a record in runs of 64.)
//
// Used by the worker that runs it, during the call and until each of its
// records ended its part (Record.EndRun); a Reader of one of its records
// reads it from any goroutine. A run none of whose records made a Reader
// is kept by the partition when its last record ends, and is the next
// run's (BeginRun): its slices and map are reused, and a run of a count
// allocates nothing of its own.
type Run struct {
	ts      *Partition
	accepts func(k int) bool
	recs    []*Record // begun, in order (Begin)
	asked   int       // the records accepts was asked about (fold)
	ended   int       // records whose part in the run ended (EndRun)
	// grow is what committing the folded writes would add to the
	// overlay's bytes, as the overlay stood when each was folded
	// (Record.room; counted only with state.max_bytes).
	grow    int64
	readers bool   // a Reader reads the run: it is never reused
	buf     []byte // the value a record of the run read from the store last (Record.Get)

	// mu guards idx and the growth of ws and priors against readers
	// (reader.Get, reader.Scan, reader.inRun); the worker, their only
	// writer, reads them without it. A leaf lock: never held with
	// Partition.mu.
	mu sync.Mutex
	// ws are the writes of the accepted records, in order (a key may
	// have several); an entry is never changed once appended.
	ws []runWrite
	// idx is the newest entry of each key in ws; its keys are the writes'
	// own (keyString).
	idx    map[string]int32
	priors []*Record // the accepted records that wrote, in order
	clock  runClock  // the stream time and timers the run's records raised (runclock.go)
}

// runWrite is a write of a run, linked to the entry before it of its key
// (prev, -1: none): a reader limited to the first n entries walks back from
// the newest.
type runWrite struct {
	statestore.Write
	prev int32
}

// BeginRun returns the state of a new run of records on the partition.
// accepts(k) says whether record k of the run (the k-th Begin) is to
// succeed: ended ok, and its outputs and changelog records will be taken.
// It is asked once for each record that wrote, in order, from the
// worker's goroutine during the call, and only once record k's part of
// the call ended.
func (ts *Partition) BeginRun(accepts func(k int) bool) *Run {
	ts.mu.Lock()
	r := ts.spare
	ts.spare = nil
	ts.mu.Unlock()
	if r == nil {
		r = &Run{ts: ts, idx: map[string]int32{}}
		r.clock.reset()
	}
	r.accepts = accepts
	return r
}

// Begin returns the State of record k of the run, k the Begins before it.
// Its decision moves no stream time the run's later records read (BeginAt).
func (r *Run) Begin() *Record {
	rs := r.begin()
	r.clock.begin(math.MinInt64)
	return rs
}

// begin makes the State of the run's next record.
func (r *Run) begin() *Record {
	rs := r.ts.Begin()
	rs.run, rs.k = r, len(r.recs)
	r.recs = append(r.recs, rs)
	return rs
}

// fold takes in the writes of the records before record k not asked
// about yet.
func (r *Run) fold(k int) {
	for ; r.asked < k; r.asked++ {
		if p := r.recs[r.asked]; len(p.writes) > 0 && r.accepts(r.asked) {
			r.add(p)
		}
	}
}

// add appends the writes of p, accepted, to the run's.
func (r *Run) add(p *Record) {
	if ts := r.ts; ts.maxBytes > 0 {
		// Commit's count: a key's new value replaces its entry, in the
		// run or else in the overlay.
		ts.mu.Lock()
		for _, w := range p.writes {
			if i, ok := r.idx[string(w.Key)]; ok {
				r.grow += int64(len(w.Value) - len(r.ws[i].Value))
			} else if e, ok := ts.overlay[string(w.Key)]; ok {
				r.grow += int64(len(w.Value) - len(e.value))
			} else {
				r.grow += int64(len(w.Key) + len(w.Value))
			}
		}
		ts.mu.Unlock()
	}
	r.mu.Lock()
	for _, w := range p.writes {
		prev, ok := r.idx[string(w.Key)]
		if !ok {
			prev = -1
		}
		r.idx[keyString(w.Key)] = int32(len(r.ws))
		r.ws = append(r.ws, runWrite{w, prev})
	}
	r.priors = append(r.priors, p)
	r.mu.Unlock()
}

// get is key's newest write among the first n of the run's, for a reader
// on any goroutine.
func (r *Run) get(key []byte, n int) (v []byte, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.idx[string(key)]
	for ok && int(i) >= n {
		i = r.ws[i].prev
		ok = i >= 0
	}
	if !ok {
		return nil, false
	}
	return r.ws[i].Value, true
}

// writes are the first n of the run's writes, in order, for a scan (a
// later write of a key replaces an earlier one), followed by own.
func (r *Run) writes(n int, own []statestore.Write) []statestore.Write {
	r.mu.Lock()
	ws := r.ws[:n:n] // entries below n never change
	r.mu.Unlock()
	out := make([]statestore.Write, 0, n+len(own))
	for _, w := range ws {
		out = append(out, w.Write)
	}
	return append(out, own...)
}

// committed reports whether the first n accepted records of the run were
// committed (Partition.Commit marks a record once the overlay holds its
// writes).
func (r *Run) committed(n int) bool {
	r.mu.Lock()
	ps := r.priors[:n:n]
	r.mu.Unlock()
	for _, p := range ps {
		if !p.committed.Load() {
			return false
		}
	}
	return true
}

// ended notes that one of the run's records ended its part in it; after
// the last, a run no reader holds is the partition's spare.
func (r *Run) end() {
	r.ended++
	if r.ended < len(r.recs) || r.readers {
		return
	}
	clear(r.recs)
	clear(r.ws) // the writes of records the overlay or nothing holds now
	clear(r.idx)
	clear(r.priors)
	r.recs, r.ws, r.priors = r.recs[:0], r.ws[:0], r.priors[:0]
	r.accepts, r.asked, r.ended, r.grow = nil, 0, 0, 0
	r.clock.reset()
	ts := r.ts
	ts.mu.Lock()
	ts.spare = r
	ts.mu.Unlock()
}

// keyString is key as a map key without a copy. Only for the keys of
// writes: a write's key is the host's copy of the guest's (Record.Put),
// never changed once made, so the string's bytes stay what they were.
func keyString(key []byte) string { return unsafe.String(unsafe.SliceData(key), len(key)) }
