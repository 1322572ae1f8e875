package state

import (
	"bytes"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

// Partition is a view of a partition's state for the records that run on
// it: the partition's store, and the writes of records that succeeded but
// whose offsets are not committed yet (the overlay). Each new task of the
// partition (a new assignment, or a restart after an aborted transaction)
// takes a new view (Stores.View): an empty overlay over the same store.
// Safe for concurrent use; mu is a leaf lock.
type Partition struct {
	ps        *partStore
	partition int32
	parts     int // the input topic's partitions: a key's partition is murmur2 % parts
	maxValue  int
	changelog string
	// maxBytes bounds the partition's state (state.max_bytes; 0: none);
	// refused counts the puts it refused (Counters.Refused).
	maxBytes int64
	refused  *atomic.Int64
	log      *slog.Logger

	mu      sync.Mutex
	overlay map[string]overlayEntry
	// overlayBytes is the overlay's keys' and values' bytes (a delete: its
	// key's).
	overlayBytes int64
	batches      []*Batch
	seq          uint64
	// applied is one past the highest changelog offset applied to the
	// store by this view's flushes (-1: none yet).
	applied int64
	// flushLogged is when a failed flush was last logged (Stores.Flush,
	// one commit at a time).
	flushLogged time.Time
}

// overlayEntry is a key's newest write not yet in the store.
type overlayEntry struct {
	value []byte // nil: deleted
	seq   uint64 // the batch that wrote it
}

// Write is one state write: a key and its value (nil: a delete).
type Write = statestore.Write

// Batch is the writes of one succeeded record, tied to its changelog
// records' produces (Acked).
type Batch struct {
	offset int64 // the input record's
	seq    uint64
	writes []statestore.Write
	// firstAcked is the lowest changelog offset of the batch the broker
	// acknowledged (math.MaxInt64 until one is); lastAcked the highest.
	firstAcked, lastAcked atomic.Int64
	void                  atomic.Bool // a changelog produce failed: never applied
}

// Limits are a pipeline's bounds on its state and where its changelog
// records go.
type Limits struct {
	MaxValueBytes int    // state.max_value_bytes
	MaxBytes      int64  // state.max_bytes (0: none)
	Changelog     string // state.changelog
}

// NewPartition is a view of partition's state (one of parts of the input)
// in store, outside the stores a pipeline opens (Stores.View): a local
// state (Local) or a benchmark. Refused puts are counted on its own
// counter and not logged.
func NewPartition(store *statestore.Store, partition int32, parts int, l Limits) *Partition {
	return newPartition(&partStore{store: store}, partition, parts, l)
}

func newPartition(ps *partStore, partition int32, parts int, l Limits) *Partition {
	return &Partition{ps: ps, partition: partition, parts: parts, maxValue: l.MaxValueBytes, changelog: l.Changelog, maxBytes: l.MaxBytes,
		refused: new(atomic.Int64), log: slog.New(slog.DiscardHandler), overlay: map[string]overlayEntry{}, applied: -1}
}

// Changelog is the topic the partition's changelog records go to.
func (ts *Partition) Changelog() string { return ts.changelog }

// Begin returns the State of one attempt of a record.
func (ts *Partition) Begin() *Record { return &Record{ts: ts} }

// checkKey answers whether key may be used by a record of the partition.
func (ts *Partition) checkKey(key []byte) abi.Errno {
	if len(key) > abi.MaxStateKeyBytes {
		return abi.ErrnoTooLarge
	}
	if ts.parts > 1 && KeyPartition(key, ts.parts) != ts.partition {
		return abi.ErrnoWrongKey
	}
	return 0
}

// get reads key through the overlay.
func (ts *Partition) get(dst, key []byte) ([]byte, bool, error) {
	ts.mu.Lock()
	e, ok := ts.overlay[string(key)]
	ts.mu.Unlock()
	if ok {
		return append(dst, e.value...), e.value != nil, nil
	}
	return ts.ps.store.Get(dst, key)
}

// Commit takes the writes of a succeeded record at offset (in the worker,
// before the record's lane is freed) and returns them as changelog outputs
// for the record's partition. The batch is returned to be tied to the
// record's produces (Acked). No writes: nil, nil.
func (ts *Partition) Commit(offset int64, rs *Record) (*Batch, []abi.Output) {
	if len(rs.writes) == 0 {
		return nil, nil
	}
	outs := make([]abi.Output, len(rs.writes))
	ts.mu.Lock()
	ts.seq++
	b := &Batch{offset: offset, seq: ts.seq, writes: rs.writes}
	b.firstAcked.Store(math.MaxInt64)
	b.lastAcked.Store(-1)
	for i, w := range rs.writes {
		if e, ok := ts.overlay[string(w.Key)]; ok {
			ts.overlayBytes -= int64(len(w.Key) + len(e.value))
		}
		ts.overlayBytes += int64(len(w.Key) + len(w.Value))
		ts.overlay[string(w.Key)] = overlayEntry{value: w.Value, seq: b.seq}
		outs[i] = abi.Output{Topic: ts.changelog, Key: w.Key, Value: w.Value, Partition: ts.partition}
	}
	ts.batches = append(ts.batches, b)
	ts.mu.Unlock()
	rs.writes, rs.index, rs.bytes = nil, nil, 0 // the batch's now
	rs.committed.Store(true)                    // after the overlay took them (reader.inRun)
	return b, outs
}

// Acked notes a changelog record of b acknowledged at offset (or failed:
// the batch is void, never applied).
func (b *Batch) Acked(offset int64, err error) {
	if err != nil {
		b.void.Store(true)
		return
	}
	for {
		cur := b.firstAcked.Load()
		if offset >= cur || b.firstAcked.CompareAndSwap(cur, offset) {
			break
		}
	}
	for {
		cur := b.lastAcked.Load()
		if offset <= cur || b.lastAcked.CompareAndSwap(cur, offset) {
			break
		}
	}
}

// flush applies to the store the writes of the records below the committed
// offset upTo, and drops them from the overlay where no later write
// replaced them. The store then reflects the changelog up to the lowest
// offset of what stays in the overlay (a restore reads from there; writes
// it applies again are the same writes, in the same order). If the store
// refuses the writes, nothing of them is dropped: they stay in the overlay
// (still read), their batches stay for the next flush to try again, and
// the store's offset stays where it was, so that a restart restores them
// from the changelog. Called after a commit (Stores.Flush), one at a
// time.
func (ts *Partition) Flush(upTo int64) error {
	ts.mu.Lock()
	var done, keep []*Batch
	for _, b := range ts.batches {
		if b.offset < upTo {
			done = append(done, b)
		} else {
			keep = append(keep, b)
		}
	}
	if len(done) == 0 {
		ts.mu.Unlock()
		return nil
	}
	ts.batches = keep
	applied := ts.applied
	for _, b := range done {
		if !b.void.Load() {
			applied = max(applied, b.lastAcked.Load()+1)
		}
	}
	next := applied
	for _, b := range keep {
		next = min(next, b.firstAcked.Load())
	}
	ts.mu.Unlock()
	sort.Slice(done, func(i, j int) bool { return done[i].offset < done[j].offset })
	var ws []statestore.Write
	for _, b := range done {
		if !b.void.Load() {
			ws = append(ws, b.writes...)
		}
	}
	err := ts.ps.store.Apply(ws, next)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if err != nil {
		// Records that succeeded since joined ts.batches meanwhile.
		ts.batches = append(done, ts.batches...)
		return err
	}
	ts.applied = applied
	for _, b := range done {
		for _, w := range b.writes {
			if e, ok := ts.overlay[string(w.Key)]; ok && e.seq == b.seq {
				delete(ts.overlay, string(w.Key))
				ts.overlayBytes -= int64(len(w.Key) + len(e.value))
			}
		}
	}
	return nil
}

// Record is the State one attempt of a record uses (host.State): its
// own writes over the partition's overlay over the store. Used only by the
// instance's worker, during the record's calls.
type Record struct {
	ts *Partition
	// writes are the attempt's, one per key in first-write order (a nil
	// Value deletes); index finds a key's write once there are more than
	// indexAfter (findWrite).
	writes []statestore.Write
	index  map[string]int
	bytes  int64 // the writes' keys and values, as state.max_bytes counts them
	buf    []byte
	// overBound says why a put was refused for state.max_bytes, for the
	// record's failure (OverBound).
	overBound string
	// A record run in one call after others (After): prior names the
	// records before it whose writes are to become the partition's, asked
	// at its first state call; priors is its answer (those with writes),
	// before is their writes, merged in order (the newest of each key),
	// and beforeIdx finds a key among them.
	prior     func() []*Record
	priors    []*Record
	before    []statestore.Write
	beforeIdx map[string]int
	// committed is set once Commit moved the record's writes into the
	// overlay: a reader of a later record of its run (Reader), on another
	// goroutine, then reads them there.
	committed atomic.Bool
}

// After makes rs, a record run in the same call as records before it (a
// run), read through their writes as if each had been committed before rs
// began, as a record run alone after them reads them from the overlay:
// prior returns the records before rs whose writes are to become the
// partition's (those that succeeded), oldest first, and is asked once, at
// rs's first state call (their outcomes are known by then). Their writes
// are read before the overlay and count in state.max_bytes as the
// overlay would; rs's own writes come first. EndRun ends it.
func (rs *Record) After(prior func() []*Record) {
	rs.prior, rs.before, rs.beforeIdx = prior, nil, nil
}

// EndRun makes rs read the partition's view alone again, once the call of
// its run returned: the writes of the records before it are the
// overlay's by then (Partition.Commit), or were dropped with their record.
func (rs *Record) EndRun() { rs.prior, rs.priors, rs.before, rs.beforeIdx = nil, nil, nil, nil }

// resolve merges the writes of the records before rs (After), once.
func (rs *Record) resolve() {
	if rs.prior == nil {
		return
	}
	recs := rs.prior()
	rs.prior = nil
	for _, p := range recs {
		if len(p.writes) > 0 {
			rs.priors = append(rs.priors, p)
		}
		for _, w := range p.writes {
			if i, ok := rs.beforeIdx[string(w.Key)]; ok {
				rs.before[i].Value = w.Value
				continue
			}
			if rs.beforeIdx == nil {
				rs.beforeIdx = map[string]int{}
			}
			rs.beforeIdx[string(w.Key)] = len(rs.before)
			rs.before = append(rs.before, w)
		}
	}
}

// shared reads key from what rs shares with the records before it: their
// writes (After), then the partition's overlay and store.
func (rs *Record) shared(dst, key []byte) ([]byte, bool, error) {
	if i, ok := rs.beforeIdx[string(key)]; ok {
		v := rs.before[i].Value
		return append(dst, v...), v != nil, nil
	}
	return rs.ts.get(dst, key)
}

// beforeBytesLocked is what committing the writes of the records before
// rs would add to the overlay's bytes (Commit's count: a key's new value
// replaces its overlay entry). Called with ts.mu held.
func (rs *Record) beforeBytesLocked() int64 {
	var n int64
	for _, w := range rs.before {
		if e, ok := rs.ts.overlay[string(w.Key)]; ok {
			n += int64(len(w.Value) - len(e.value))
		} else {
			n += int64(len(w.Key) + len(w.Value))
		}
	}
	return n
}

// readWrites are the writes rs reads before the overlay: its own over
// those of the records before it, one per key, in an order where a later
// write of a key replaces an earlier one (Partition.scan).
func (rs *Record) readWrites() []statestore.Write {
	if len(rs.before) == 0 {
		return rs.writes
	}
	return append(slices.Clip(rs.before), rs.writes...)
}

// Writes are the attempt's writes so far, one per key (before Commit: a
// sink checks their changelog records against what the topic accepts).
func (rs *Record) Writes() []Write { return rs.writes }

// OverBound says why a put of the attempt was refused for state.max_bytes
// ("": none was), for the record's failure.
func (rs *Record) OverBound() string { return rs.overBound }

// indexAfter is how many writes a record makes before its writes are
// indexed by key: most records write a key or two, which a search finds
// faster than a map is made, and a record that writes thousands finds each
// in constant time.
const indexAfter = 8

// findWrite returns the index in writes of key's write, or -1; index is
// writes' (nil below indexAfter writes).
func findWrite(writes []statestore.Write, index map[string]int, key []byte) int {
	if index != nil {
		if i, ok := index[string(key)]; ok {
			return i
		}
		return -1
	}
	for i := range writes {
		if string(writes[i].Key) == string(key) {
			return i
		}
	}
	return -1
}

func (rs *Record) Get(key []byte) ([]byte, abi.Errno) {
	if e := rs.ts.checkKey(key); e != 0 {
		return nil, e
	}
	if i := findWrite(rs.writes, rs.index, key); i >= 0 {
		if v := rs.writes[i].Value; v != nil {
			return v, 0
		}
		return nil, abi.ErrnoNotFound
	}
	rs.resolve()
	v, ok, err := rs.shared(rs.buf[:0], key)
	rs.buf = v
	if err != nil {
		return nil, abi.ErrnoNoState // the store is closed: the partition moved
	}
	if !ok {
		return nil, abi.ErrnoNotFound
	}
	return v, 0
}

// Written is the length of the value of the record's write of key (host.
// State).
func (rs *Record) Written(key []byte) (int, bool) {
	if i := findWrite(rs.writes, rs.index, key); i >= 0 {
		return len(rs.writes[i].Value), true
	}
	return 0, false
}

func (rs *Record) put(key, v []byte) {
	if i := findWrite(rs.writes, rs.index, key); i >= 0 {
		rs.bytes += int64(len(v) - len(rs.writes[i].Value))
		rs.writes[i].Value = v
		return
	}
	// Never nil, the empty key included: the key is the changelog
	// record's, and a compacted topic refuses a null key (RATIONALE.md,
	// "The empty state key").
	k := append(make([]byte, 0, len(key)), key...)
	rs.writes = append(rs.writes, statestore.Write{Key: k, Value: v})
	rs.bytes += int64(len(k) + len(v))
	switch {
	case rs.index != nil:
		rs.index[string(k)] = len(rs.writes) - 1
	case len(rs.writes) > indexAfter:
		rs.index = make(map[string]int, 2*len(rs.writes))
		for i, w := range rs.writes {
			rs.index[string(w.Key)] = i
		}
	}
}

func (rs *Record) Put(key, value []byte) abi.Errno {
	if e := rs.ts.checkKey(key); e != 0 {
		return e
	}
	if len(value) > rs.ts.maxValue {
		return abi.ErrnoTooLarge
	}
	if e := rs.room(key, len(value)); e != 0 {
		return e
	}
	v := make([]byte, len(value)) // never nil: nil is a delete
	copy(v, value)
	rs.put(key, v)
	return 0
}

// room answers whether a put of a value of n bytes to key fits the
// partition's bound (state.max_bytes): the store's keys and values, the
// overlay's and the record's writes, with this one replacing the record's
// last write of key. The count takes every write not yet in the store as
// new; when it is over the bound, a put no larger than the value it
// replaces (in the overlay or the store) still passes: it does not grow
// the state. Deletes always pass (RATIONALE.md, "State stores").
func (rs *Record) room(key []byte, n int) abi.Errno {
	ts := rs.ts
	grow := int64(len(key) + n)
	if i := findWrite(rs.writes, rs.index, key); i >= 0 {
		grow = int64(n - len(rs.writes[i].Value))
	}
	if ts.maxBytes <= 0 || grow <= 0 {
		return 0
	}
	rs.resolve()
	ts.mu.Lock()
	overlay := ts.overlayBytes + rs.beforeBytesLocked()
	ts.mu.Unlock()
	used := ts.ps.store.Bytes() + overlay + rs.bytes
	if used+grow <= ts.maxBytes {
		return 0
	}
	v, ok, err := rs.shared(rs.buf[:0], key)
	rs.buf = v
	if err == nil && ok && len(v) >= n {
		return 0
	}
	ts.refused.Add(1)
	rs.overBound = fmt.Sprintf("state_put refused: partition %d holds %d bytes of state, at its bound of %d (state.max_bytes)", ts.partition, used, ts.maxBytes)
	if now := time.Now().UnixNano(); now-ts.ps.lastWarn.Load() > int64(5*time.Second) {
		ts.ps.lastWarn.Store(now)
		ts.log.Warn("state_put refused: the partition's state is at its bound (state.max_bytes); the guest's call returns a limit error", "partition", ts.partition, "state_bytes", used, "max_bytes", ts.maxBytes, "refused", ts.refused.Load())
	}
	return abi.ErrnoLimit
}

func (rs *Record) Delete(key []byte) abi.Errno {
	if e := rs.ts.checkKey(key); e != 0 {
		return e
	}
	rs.put(key, nil)
	return 0
}

// Scan merges the record's writes and the overlay (newer) into the store's
// keys, in key order.
func (rs *Record) Scan(prefix, after []byte, fn func(k, v []byte) bool) abi.Errno {
	rs.resolve()
	return rs.ts.scan(rs.readWrites(), prefix, after, fn)
}

// Reader is the read path of the record's asynchronous state operations
// (host.State): a copy of the record's writes as they are now over the
// partition's overlay and store. The copy is of the slice only: a write's key
// and value are never changed once made (put replaces the entry). In a run
// (After) the writes of the records before it are read between the two
// for as long as the overlay does not hold them yet (reader.inRun): the
// read runs on its own goroutine, possibly after the run's call returned
// and its records were committed, when the overlay holds them or what
// records decided since wrote over them.
func (rs *Record) Reader() host.StateReader {
	rs.resolve()
	return &reader{ts: rs.ts, writes: slices.Clone(rs.writes), index: maps.Clone(rs.index),
		before: rs.before, beforeIdx: rs.beforeIdx, priors: slices.Clone(rs.priors)}
}

// reader is a Record's read-only view for another goroutine:
// its writes (and their index) are its own copy, the writes of the records
// before it in its run are never changed once merged (resolve), and
// Partition is safe for concurrent use.
type reader struct {
	ts        *Partition
	writes    []statestore.Write
	index     map[string]int
	before    []statestore.Write // the run's writes before the record (After)
	beforeIdx map[string]int
	priors    []*Record // whose writes before holds
}

// inRun reports whether the reader still reads the writes of the records
// before its record in their run: until every one of them was committed
// (Commit moves the writes into the overlay before it marks the record).
func (r *reader) inRun() bool {
	for _, p := range r.priors {
		if !p.committed.Load() {
			return true
		}
	}
	return false
}

func (r *reader) Check(key []byte) abi.Errno { return r.ts.checkKey(key) }

func (r *reader) Get(key []byte) ([]byte, bool, abi.Errno) {
	if i := findWrite(r.writes, r.index, key); i >= 0 {
		v := r.writes[i].Value
		return bytes.Clone(v), v != nil, 0
	}
	if i, ok := r.beforeIdx[string(key)]; ok && r.inRun() {
		v := r.before[i].Value
		return bytes.Clone(v), v != nil, 0
	}
	v, ok, err := r.ts.get(nil, key)
	if err != nil {
		return nil, false, abi.ErrnoNoState // the store is closed: the partition moved
	}
	return v, ok, 0
}

func (r *reader) Scan(prefix, after []byte, fn func(k, v []byte) bool) abi.Errno {
	ws := r.writes
	if len(r.before) > 0 && r.inRun() {
		// The record's own writes replace those before it (scan: a later
		// write of a key replaces an earlier one).
		ws = append(slices.Clip(r.before), r.writes...)
	}
	return r.ts.scan(ws, prefix, after, fn)
}

// scan merges writes (the newest) and the overlay (newer) into the store's
// keys, in key order.
func (ts *Partition) scan(writes []statestore.Write, prefix, after []byte, fn func(k, v []byte) bool) abi.Errno {
	if len(prefix) > abi.MaxStateKeyBytes {
		return abi.ErrnoTooLarge
	}
	inRange := func(k string) bool {
		return strings.HasPrefix(k, string(prefix)) && (len(after) == 0 || k > string(after))
	}
	newer := map[string][]byte{}
	ts.mu.Lock()
	for k, e := range ts.overlay {
		if inRange(k) {
			newer[k] = e.value
		}
	}
	ts.mu.Unlock()
	for _, w := range writes {
		if k := string(w.Key); inRange(k) {
			newer[k] = w.Value
		}
	}
	keys := make([]string, 0, len(newer))
	for k := range newer {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	stop := false
	// emitNewer emits the newer keys below limit (all when limit is nil).
	emitNewer := func(limit []byte) {
		for len(keys) > 0 && !stop && (limit == nil || keys[0] < string(limit)) {
			if v := newer[keys[0]]; v != nil {
				stop = !fn([]byte(keys[0]), v)
			}
			keys = keys[1:]
		}
	}
	err := ts.ps.store.Scan(prefix, after, func(k, v []byte) bool {
		emitNewer(k)
		if stop {
			return false
		}
		if len(keys) > 0 && keys[0] == string(k) {
			if nv := newer[keys[0]]; nv != nil {
				stop = !fn(k, nv)
			}
			keys = keys[1:]
			return !stop
		}
		stop = !fn(k, v)
		return !stop
	})
	if err != nil {
		return abi.ErrnoNoState
	}
	emitNewer(nil)
	return 0
}
