package state

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

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
	// timersSet counts the timers committed writes set (Counters.TimersSet).
	timersSet *atomic.Int64
	log       *slog.Logger

	mu      sync.Mutex
	overlay map[string]overlayEntry
	groups  overlayGroups // the overlay's two-part keys and timers by group
	clock   partClock     // stream time (ABI.md §4.2)
	timers  partTimers    // what Due knows of the timers (timers.go)
	// overlayBytes is the overlay's keys' and values' bytes (a delete: its
	// key's).
	overlayBytes int64
	// batches are the records whose writes were committed (their
	// batches: Record.batch) and are not yet in the store (apply), in
	// commit order.
	batches []*Record
	seq     uint64
	// spare is a run whose records all ended and no reader holds, for the
	// next BeginRun.
	spare  *Run
	stored flushed      // what the view's flushes applied to the store
	flush  flushScratch // not guarded by mu: Flush runs one at a time
}

// flushed is what a view's flushes applied to its store (under
// Partition.mu).
type flushed struct {
	// applied is one past the highest changelog offset applied to the
	// store by the view's flushes (-1: none yet).
	applied int64
	// clean is what the flushes last wrote to the store, read before the
	// store (get): a key read again after its writes were flushed costs
	// no bbolt read transaction.
	clean cleanCache
}

// cleanCache holds the values a partition's flushes applied to its store,
// as the flush's writes hold them (a write's key and value are never
// changed once made: no copy), up to cleanMaxBytes (under Partition.mu).
// Each commit's flush drops its writes from the overlay, so a record that
// reads a key written before the last commit missed the overlay and read
// the store: a bbolt read transaction of seven allocations and ~400 bytes
// (the count example under exactly_once, which commits every
// transaction). Only the view's own flushes write the store while the view
// is current (Stores.Flush), so an entry is what the store holds; a delete
// removes its key, and the stream time (which the store keeps only moving
// forward) is never kept.
type cleanCache struct {
	m     map[string][]byte
	bytes int64
}

// cleanMaxBytes bounds a partition's clean cache: the keys' and values'
// bytes and cleanEntryBytes an entry. A full cache drops entries in the
// map's (random) order to take a new one: reads of the dropped keys go to
// the store again.
const cleanMaxBytes = 1 << 20

// cleanEntryBytes is what an entry costs besides its key and value: the
// map's slot (a string and a slice header) and its share of the buckets.
const cleanEntryBytes = 64

// keep makes the store's value of the key k (k's own bytes: the write's)
// v, as a flush applied it; nil: the store has no value for k.
func (c *cleanCache) keep(k string, v []byte) {
	if old, ok := c.m[k]; ok {
		c.bytes -= int64(len(k) + len(old) + cleanEntryBytes)
		delete(c.m, k)
	}
	if v == nil || k == statestore.StreamTimeKey {
		return
	}
	n := int64(len(k) + len(v) + cleanEntryBytes)
	if n > cleanMaxBytes/16 {
		return // a large value would take the room of many small ones
	}
	for dk, dv := range c.m {
		if c.bytes+n <= cleanMaxBytes {
			break
		}
		c.bytes -= int64(len(dk) + len(dv) + cleanEntryBytes)
		delete(c.m, dk)
	}
	if c.m == nil {
		c.m = map[string][]byte{}
	}
	c.m[k] = v
	c.bytes += n
}

// overlayGroups indexes the overlay's two-part keys and timers by their
// group (statestore.Key2Group): a scan of one key's subs (state_scan2) or
// of the timers walks its group's keys, not the whole overlay. One-part
// keys are not indexed (their scans walk the overlay). Under
// Partition.mu.
type overlayGroups struct {
	m map[string]map[string]struct{}
	// subs: a scan of a key's subs happened, so the overlay's two-part
	// keys are indexed in m from then on, as the timers always are (Due
	// scans them each round). Before it, a put of a two-part key makes no
	// index entry: a windowed count's firings read their window alone and
	// never scan, and its records' index entries, a map per key made
	// again after each flush, were a cost of every record for nothing.
	subs bool
}

// partClock is a partition's stream time (under Partition.mu).
type partClock struct {
	// streamTime is the largest timestamp of the partition's records
	// decided so far (-1: none; ABI.md §4.2), read from the store when the
	// view is made; timeSaved is the newest value a write of it carries
	// (to the store), and saveTime whether decided records carry it
	// (StreamTime). ownSaved is the newest value a changelog record of its
	// own carried (carry).
	streamTime, timeSaved, ownSaved int64
	saveTime                        bool
	// h is the header the changelog records carry while stream time is
	// h.t, made once for every record until it moves, from slab (a
	// stream time that moves with every record makes one allocation per
	// len(slab) moves, not one each).
	h    *timeHeader
	slab []timeHeader
}

// timeSlab is how many timeHeaders one allocation makes.
const timeSlab = 64

// timeHeader is a stream time as a changelog record's header, and its
// value, in one allocation shared by every record that carries it (never
// changed once made).
type timeHeader struct {
	t       int64
	value   [8]byte
	headers [1]abi.Header
}

// putHeaders is the most a put's changelog record carries in headers (the
// stream time's): PutHeaders.
var putHeaders = [1]abi.Header{{Key: statestore.StreamTimeHeader, Value: make([]byte, 8)}}

// PutHeaders is the most a put's changelog record carries in headers (the
// stream time's), for the checks of its size against the changelog's
// bounds: the list is a copy each call (one small array, kept on the
// caller's stack), so no caller can change the list the next one checks;
// its value's 8 bytes are shared, and only their length is read.
func PutHeaders() [1]abi.Header { return putHeaders }

// carried is what a committed record's changelog records carry of the
// stream time (partClock.commit): h, in a header of each of its puts'
// (nil: nothing, the partition does not save it), and own, a record of
// its own besides.
type carried struct {
	h   *timeHeader
	own bool
}

// commit moves the stream time to a committed record's timestamp and
// says what the record's changelog records carry of it.
//
// Every put's changelog record carries the stream time in a header
// (statestore.StreamTimeHeader), and a record with no put (deletes, or
// the stream time alone) writes a record of the stream time key when it
// is newer than the last such: the changelog then keeps the stream time
// of its newest record through compaction, where one record of its own
// per record moved was a third of a windowed count's changelog. The
// newest record with writes either has a put, which stays as its key's
// newest, or its stream time is at most the stream time key's newest
// record's; a put that a later record's tombstone removes is covered by
// that record, which has no put, or carries its own; a restore takes the
// largest it reads (Store.Apply).
func (c *partClock) commit(timestamp int64, rs *Record) carried {
	c.streamTime = max(c.streamTime, timestamp)
	c.saveTime = c.saveTime || rs.readTime
	if !c.saveTime {
		return carried{}
	}
	if c.h == nil || c.h.t != c.streamTime {
		if len(c.slab) == 0 {
			c.slab = make([]timeHeader, timeSlab)
		}
		h := &c.slab[0]
		c.slab = c.slab[1:]
		h.t = c.streamTime
		binary.BigEndian.PutUint64(h.value[:], uint64(h.t))
		h.headers[0] = abi.Header{Key: statestore.StreamTimeHeader, Value: h.value[:]}
		c.h = h
	}
	if c.streamTime > c.timeSaved {
		c.timeSaved = c.streamTime
		rs.addStreamTime(c.h.value[:])
	}
	own := len(rs.writes) > 0 && c.streamTime > c.ownSaved
	for i := 0; own && i < len(rs.writes); i++ {
		if w := rs.writes[i]; w.Value != nil && string(w.Key) != statestore.StreamTimeKey {
			own = false // a put carries it
		}
	}
	if own {
		c.ownSaved = c.streamTime
	}
	return carried{h: c.h, own: own}
}

// outputs is how many changelog records writes make, carrying c.
func (c carried) outputs(writes []statestore.Write) int {
	n := len(writes)
	for _, w := range writes {
		if string(w.Key) == statestore.StreamTimeKey {
			n--
		}
	}
	if c.own {
		n++
	}
	return n
}

// partTimers is what a partition knows of its timers without a scan
// (under Partition.mu; timers.go).
type partTimers struct {
	// next is at or before the at of every timer set (ABI.md §4.2), in
	// the store or the overlay (math.MaxInt64: none is known): Due looks
	// for due timers only once stream time reaches it, and moves it to
	// the first one it finds not yet due. sets counts the timer sets
	// committed, so that Due does not move it past one committed while it
	// looked.
	next int64
	sets uint64
	// scans counts Due's scans of the store (the tests read it).
	scans uint64
	// dueCache is the due timers Due's last scan found, in (at, key)
	// order (at most dueBatch), which answer the next calls while stream
	// time is at dueT or later and no timer with an at by dueT was set
	// since (timerSet empties it): a round's firings cost one scan (a walk
	// of the overlay's due timers) per dueBatch timers, not one each, and
	// the records between rounds, which set later timers, keep it.
	dueCache []Timer
	dueT     int64
	// dueAll: the scan found every timer due by dueT (fewer than
	// dueBatch); dueLater is the first at past dueT it saw, and setSince
	// the least at of the timers set since (math.MaxInt64: none), so that
	// the round's end, once the cache is spent, needs no scan of its
	// fired timers' deletes (dueNoneBut).
	dueAll             bool
	dueLater, setSince int64
}

// flushScratch is the flush's state, reused from one commit to the next
// (Flush, one at a time under mu): when a failed flush was last logged
// (Stores.Flush), the batches it applies, their last writes and the index
// of those by key; and what Stores.Flush defers (deferred): the highest
// committed offset it was told, and when it last applied.
type flushScratch struct {
	// mu: one flush at a time (a commit's, its timer's, a view's last:
	// flushCommitted); lock order: state.Partition's flush lock, then
	// state.Partition.mu (DESIGN.md, "Lock order").
	mu     sync.Mutex
	logged time.Time
	done   []*Record
	writes []statestore.Write
	at     map[string]int
	upTo   int64     // the highest committed offset Stores.Flush was told
	last   time.Time // when Stores.Flush last applied (zero: never)
	// later applies a deferred flush once flushEvery has passed, when no
	// commit came to apply it (an idle partition); retired: the view is
	// no longer current (flushCommitted), and never flushes again.
	later   *time.Timer
	retired bool
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
	// produce is the room for the record one of the batch's record's
	// outputs is produced as (ProduceRoom).
	produce kgo.Record
}

// ProduceRoom is a kgo.Record for the producer to send one of the batch's
// record's outputs as (its changelog output, the second of the count
// example's two). It lives as the batch does, until the flush after its
// record's commit, which comes after every produce of the record was
// answered; then it goes with its Record to the next Begin (recycle), where
// a record of its own would have been allocated for every stateful record.
func (b *Batch) ProduceRoom() *kgo.Record { return &b.produce }

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
	p := &Partition{ps: ps, partition: partition, parts: parts, maxValue: l.MaxValueBytes, changelog: l.Changelog, maxBytes: l.MaxBytes,
		refused: new(atomic.Int64), timersSet: new(atomic.Int64), log: slog.New(slog.DiscardHandler), overlay: map[string]overlayEntry{}, stored: flushed{applied: -1}}
	// A store that cannot be read answers -1 here and ErrnoNoState at its
	// first read.
	p.clock.streamTime, _ = ps.store.StreamTime()
	p.clock.timeSaved, p.clock.ownSaved = p.clock.streamTime, p.clock.streamTime
	// A partition whose store holds a stream time has had a processor that
	// reads it: its records go on writing it from the first.
	p.clock.saveTime = p.clock.streamTime >= 0
	p.timers.next = p.firstTimer()
	return p
}

// Decided moves the partition's stream time (ABI.md §4.2) to the
// timestamp ts (milliseconds) of a record decided without its writes being
// committed (dead-lettered, or failed at the sink): the next record's
// Commit carries it to the changelog. A succeeded record's is Commit's.
func (ts *Partition) Decided(timestamp int64) {
	ts.mu.Lock()
	ts.clock.streamTime = max(ts.clock.streamTime, timestamp)
	ts.mu.Unlock()
}

// Changelog is the topic the partition's changelog records go to.
func (ts *Partition) Changelog() string { return ts.changelog }

// OutputRoom is host.OutputRoom: the room for the record's outputs and
// its changelog outputs (outs), when n outputs leave room for one write's
// (the count example's record: an output and a put), which CommitAt then
// adds in place. The host's run slab holds larger lists.
func (rs *Record) OutputRoom(n int) []abi.Output {
	if n >= len(rs.outs) || rs.lent {
		return nil
	}
	rs.lent = true
	return rs.outs[:0:len(rs.outs)]
}

// Begin returns the State of one attempt of a record: a Record a flush
// gave back (recycle), or a new one.
func (ts *Partition) Begin() *Record {
	if rs, _ := spareRecords.Get().(*Record); rs != nil {
		rs.ts = ts
		return rs
	}
	return &Record{ts: ts}
}

// spareRecords are Records whose batches a flush applied (recycle), for
// the next Begin of any partition. A Record lives from its record's
// attempt until the commit after its outcome (its batch waits in
// Partition.batches for the flush): a commit interval's records of every
// partition. Taken back from there, the next interval's records allocate
// nothing (a Record, 384 bytes then, was a fifth of a stateful record's
// ~1,700; with the room for a produce record in its batch it is 544); a
// sync.Pool gives back to the collector what the next interval did not
// take.
var spareRecords sync.Pool

// recycle gives rs, whose batch a flush just applied to the store, to
// the next Begin, unless something may still read it: a void batch's
// record (its produces failed: its job's failure path had its outputs),
// or one a Reader's run holds (pinned). Anything else that held rs let go
// of it before its offset was committed, which the flush comes after:
// its job (Record.outs, Batch.Acked: every produce of it was answered
// before its record was done, or before its transaction's commit), its
// worker (the attempt's calls), and the overlay and the store, which keep
// the writes' keys and values, never the Record's own fields.
func (rs *Record) recycle() {
	if rs.pinned || rs.batch.void.Load() {
		return
	}
	*rs = Record{}
	spareRecords.Put(rs)
}

// checkKey answers whether key may be used by a record of the partition.
// A one-part key that begins with the two-part keys' marker is refused
// (ErrnoTooLarge, as a key the store cannot hold): the two namespaces
// never meet (statestore.Key2).
func (ts *Partition) checkKey(key []byte) abi.Errno {
	if len(key) > abi.MaxStateKeyBytes || statestore.IsKey2(key) {
		return abi.ErrnoTooLarge
	}
	return ts.checkPartition(key)
}

// checkKey2 answers whether the two-part key (key, sub) may be used by a
// record of the partition: only key is checked against the partition.
func (ts *Partition) checkKey2(key, sub []byte) abi.Errno {
	if len(key) > abi.MaxStateKeyBytes || len(sub) > abi.MaxStateKeyBytes {
		return abi.ErrnoTooLarge
	}
	return ts.checkPartition(key)
}

// checkPartition answers whether key belongs to the partition.
func (ts *Partition) checkPartition(key []byte) abi.Errno {
	if ts.parts > 1 && KeyPartition(key, ts.parts) != ts.partition {
		return abi.ErrnoWrongKey
	}
	return 0
}

// get reads key through the overlay: an overlay value as it is (a write's
// value is never changed once made), a stored one appended to buf[:0];
// buf is returned, grown, for the next read.
func (ts *Partition) get(buf, key []byte) (v, grown []byte, ok bool, err error) {
	ts.mu.Lock()
	e, ok := ts.overlay[string(key)]
	if !ok {
		if v, ok = ts.stored.clean.m[string(key)]; ok {
			ts.mu.Unlock()
			return v, buf, true, nil
		}
	}
	ts.mu.Unlock()
	if ok {
		return e.value, buf, e.value != nil, nil
	}
	v, ok, err = ts.ps.store.Get(buf[:0], key)
	return v, v, ok, err
}

// Commit takes the writes of a succeeded record at offset (in the worker,
// before the record's lane is freed) and appends them to outs as
// changelog outputs for the record's partition (the record's own outputs:
// no slice of their own). The batch is returned to be tied to the
// record's produces (Acked). No writes: nil, outs.
func (ts *Partition) Commit(offset int64, rs *Record, outs []abi.Output) (*Batch, []abi.Output) {
	return ts.CommitAt(offset, -1, rs, outs)
}

// CommitAt is Commit for a record of timestamp (milliseconds; -1: none),
// which it also moves the partition's stream time to (ABI.md §4.2). Once a
// record of the partition read the stream time (Record.StreamTime), or the
// store holds one, the partition's records carry it (partClock.commit): a
// record that moves it writes it (statestore.StreamTimeKey) to the store
// at the flush, and to the changelog with its outputs, in its transaction
// under exactly_once, so that a restore brings it back with the state —
// in a header of each of its puts' changelog records
// (statestore.StreamTimeHeader), or, when it has none, in a record of its
// own (partClock.carry).
func (ts *Partition) CommitAt(offset, timestamp int64, rs *Record, outs []abi.Output) (*Batch, []abi.Output) {
	var c carried
	if timestamp >= 0 || rs.readTime || len(rs.writes) > 0 {
		ts.mu.Lock()
		c = ts.clock.commit(timestamp, rs)
		ts.mu.Unlock()
	}
	if len(rs.writes) == 0 {
		return nil, outs
	}
	if n := len(outs) + c.outputs(rs.writes); cap(outs) < n {
		if n <= len(rs.outs) && !rs.lent {
			// The record's own room: a record's output and its write,
			// the common stateful record, allocate nothing here. (Lent:
			// the host holds outputs of the record there that outs is
			// not, as Local's callers' outputs are: never overwritten.)
			outs = append(rs.outs[:0:n], outs...)
		} else {
			// One allocation (slices.Grow makes two under the race detector).
			outs = append(make([]abi.Output, 0, n), outs...)
		}
	}
	b := &rs.batch // inside the record: no allocation of its own
	b.offset, b.writes = offset, rs.writes
	b.firstAcked.Store(math.MaxInt64)
	b.lastAcked.Store(-1)
	ts.mu.Lock()
	ts.seq++
	b.seq = ts.seq
	for _, w := range rs.writes {
		k := keyString(w.Key) // the write's own key: no copy
		if e, ok := ts.overlay[k]; ok {
			ts.overlayBytes -= int64(len(w.Key) + len(e.value))
		}
		ts.overlayBytes += int64(len(w.Key) + len(w.Value))
		ts.overlay[k] = overlayEntry{value: w.Value, seq: b.seq}
		ts.groupAdd(w.Key, k)
		if w.Value != nil {
			ts.timerSet(w.Key)
		}
		if k == statestore.StreamTimeKey {
			continue // carried by the puts, or in a record of its own below
		}
		o := abi.Output{Topic: ts.changelog, Key: w.Key, Value: w.Value, Partition: ts.partition}
		if w.Value != nil && c.h != nil {
			o.Headers = c.h.headers[:]
		}
		outs = append(outs, o)
	}
	if c.own {
		outs = append(outs, abi.Output{Topic: ts.changelog, Key: streamTimeKey, Value: c.h.value[:], Partition: ts.partition})
	}
	ts.batches = append(ts.batches, rs)
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
	ts.flush.mu.Lock()
	defer ts.flush.mu.Unlock()
	return ts.apply(upTo)
}

// apply is Flush under flush.mu.
func (ts *Partition) apply(upTo int64) error {
	ts.mu.Lock()
	done, keep := ts.flush.done[:0], ts.batches[:0] // keep: in place
	for _, rs := range ts.batches {
		if rs.batch.offset < upTo {
			done = append(done, rs)
		} else {
			keep = append(keep, rs)
		}
	}
	if len(done) == 0 {
		ts.mu.Unlock()
		return nil
	}
	clear(ts.batches[len(keep):])
	ts.batches = keep
	applied := ts.stored.applied
	for _, rs := range done {
		if !rs.batch.void.Load() {
			applied = max(applied, rs.batch.lastAcked.Load()+1)
		}
	}
	next := applied
	for _, rs := range keep {
		next = min(next, rs.batch.firstAcked.Load())
	}
	ts.mu.Unlock()
	slices.SortFunc(done, func(a, b *Record) int { return cmp.Compare(a.batch.offset, b.batch.offset) })
	ws := ts.lastWrites(done)
	err := ts.ps.store.Apply(ws, next)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if err != nil {
		// Records that succeeded since joined ts.batches meanwhile.
		ts.batches = append(slices.Clone(done), ts.batches...)
	} else {
		ts.stored.applied = applied
		for _, w := range ws {
			ts.stored.clean.keep(keyString(w.Key), w.Value)
		}
		for _, rs := range done {
			b := &rs.batch
			for _, w := range b.writes {
				if e, ok := ts.overlay[string(w.Key)]; ok && e.seq == b.seq {
					delete(ts.overlay, keyString(w.Key))
					ts.groupRemove(w.Key)
					ts.overlayBytes -= int64(len(w.Key) + len(e.value))
				}
			}
		}
	}
	clear(ws) // the next flush's: it holds no write of these
	ts.flush.writes = ws[:0]
	if err == nil {
		for _, rs := range done {
			rs.recycle()
		}
	}
	clear(done)
	ts.flush.done = done[:0]
	return err
}

// lastWrites are the writes of the batches (in offset order) that are not
// void, one per key, with its last value: what the store must hold after
// them. A commit's flush then writes each key once however many records
// wrote it since the last commit (a count over a thousand keys at a
// thousand records a second and a commit a second: each key once, not
// once a record), which is bbolt's cost per write: a cursor, its path and
// a node update. Its slice and index are the partition's flush scratch.
func (ts *Partition) lastWrites(done []*Record) []statestore.Write {
	ws, at := ts.flush.writes[:0], ts.flush.at
	if at == nil {
		at = map[string]int{} // sized by the keys, not the writes
		ts.flush.at = at
	}
	defer clear(at)
	for _, rs := range done {
		if rs.batch.void.Load() {
			continue
		}
		for _, w := range rs.batch.writes {
			if i, ok := at[string(w.Key)]; ok {
				ws[i].Value = w.Value
				continue
			}
			at[keyString(w.Key)] = len(ws)
			ws = append(ws, w)
		}
	}
	return ws
}

// Record is the State one attempt of a record uses (host.State): its
// own writes over, in a run, the writes of the records before it (Run),
// over the partition's overlay over the store. Used only by the instance's
// worker, during the record's calls. One allocation an attempt: its
// batch and its first write are inside it.
type Record struct {
	ts *Partition
	// writes are the attempt's, one per key in first-write order (a nil
	// Value deletes); index finds a key's write once there are more than
	// indexAfter (findWrite). A record's first write is kept in first.
	writes []statestore.Write
	first  [1]statestore.Write
	index  map[string]int
	bytes  int64 // the writes' keys and values, as state.max_bytes counts them
	// overUsed is the partition's state bytes when a put was refused for
	// state.max_bytes (over: one was), for the record's failure
	// (OverBound): the message is made when asked, not kept (a Record
	// stays in the 576-byte size class: TestRecordSize).
	overUsed int64
	// run is the run the record is k-th of (Run.Begin), until EndRun.
	run *Run
	k   int
	// batch is the record's writes once committed (Commit).
	batch Batch
	// outs is the room for the record's outputs and changelog outputs
	// when they are few (an output and a write: the count example's
	// record): the host puts the record's output here (OutputRoom) and
	// Commit adds the changelog output after it, or Commit copies the
	// outputs here. It is alive as long as batch, which the record's job
	// holds until they are acknowledged; inside the Record, which a flush
	// gives to the next Begin, it costs a record nothing once Records are
	// used again, where a slice of its own was an allocation a record.
	outs [2]abi.Output
	// committed is set once Commit moved the record's writes into the
	// overlay: a reader of a later record of its run (Reader), on another
	// goroutine, then reads them there.
	committed atomic.Bool
	// readTime: the record read the stream time (StreamTime). Beside
	// committed, in its padding, as over is: a Record stays in its
	// allocation size class (TestStateRecordAllocs counts the bytes of
	// the record path).
	readTime bool
	over     bool
	// pinned: a Reader of its run may read it after its attempt
	// (reader.inRun reads its committed): never recycled.
	pinned bool
	// lent: outs holds outputs the host put there (OutputRoom).
	lent bool
}

// key2Stack is the room for a two-part key's encoding that Get2 and
// Written2 keep on the stack; a longer one is allocated.
const key2Stack = 128

// streamTimeKey is statestore.StreamTimeKey as a write's key, one for
// every record's stream-time write: a write's key is never changed.
var streamTimeKey = []byte(statestore.StreamTimeKey)

// addStreamTime appends (or replaces) the record's write of the stream
// time v (statestore.StreamTimeKey, int64 big-endian, never changed): the
// host's write, not counted in the record's bounds.
func (rs *Record) addStreamTime(v []byte) {
	if i := findWrite(rs.writes, rs.index, []byte(statestore.StreamTimeKey)); i >= 0 {
		rs.writes[i].Value = v
		return
	}
	if rs.writes == nil {
		rs.writes = rs.first[:0]
	}
	rs.writes = append(rs.writes, statestore.Write{Key: streamTimeKey, Value: v})
	if rs.index != nil {
		rs.index[statestore.StreamTimeKey] = len(rs.writes) - 1
	}
}

// StreamTime is the partition's stream time (host.State2): the largest
// timestamp of its records decided so far, -1 before any; not the
// record's own. A record of a run reads the timestamps of the run's
// records before it too (Run.BeginAt), as it would read them run alone
// after they were decided. A record that reads it makes the partition's
// records write it with their state from then on (CommitAt).
func (rs *Record) StreamTime() (int64, abi.Errno) {
	rs.readTime = true
	ts := rs.ts
	ts.mu.Lock()
	t := ts.clock.streamTime
	ts.mu.Unlock()
	if rs.run != nil {
		t = max(t, rs.run.timeBefore(rs.k))
	}
	return t, 0
}

// Get2 is Get of the two-part key (key, sub) (host.State2). The value is
// valid until the next call on the Record.
func (rs *Record) Get2(key, sub []byte) ([]byte, abi.Errno) {
	if e := rs.ts.checkKey2(key, sub); e != 0 {
		return nil, e
	}
	var a [key2Stack]byte
	return rs.get(statestore.Key2(a[:0], key, sub))
}

// Put2 is Put of the two-part key (key, sub) (host.State2).
func (rs *Record) Put2(key, sub, value []byte) abi.Errno {
	if e := rs.ts.checkKey2(key, sub); e != 0 {
		return e
	}
	return rs.put(key2(key, sub), value, true)
}

// key2 is the two-part key (key, sub)'s encoding for a write, which keeps
// it: made in one allocation of its size, not grown through four appends.
func key2(key, sub []byte) []byte {
	return statestore.Key2(make([]byte, 0, statestore.Key2Size(key, sub)), key, sub)
}

// Delete2 is Delete of the two-part key (key, sub) (host.State2).
func (rs *Record) Delete2(key, sub []byte) abi.Errno {
	if e := rs.ts.checkKey2(key, sub); e != 0 {
		return e
	}
	return rs.delete(key2(key, sub), true)
}

// Written2 is Written of the two-part key (key, sub) (host.State2).
func (rs *Record) Written2(key, sub []byte) (int, bool) {
	var a [key2Stack]byte
	return rs.Written(statestore.Key2(a[:0], key, sub))
}

// Scan2 calls fn for the subs of key that start with prefix and sort after
// after (all of them when after is empty), in sub order (host.State2).
// The subs' prefix is not checked; key is.
func (rs *Record) Scan2(key, prefix, after []byte, fn func(sub, v []byte) bool) abi.Errno {
	if e := rs.ts.checkKey2(key, prefix); e != 0 {
		return e
	}
	if len(after) > abi.MaxStateKeyBytes {
		return abi.ErrnoTooLarge
	}
	// The scan's prefix and after, in one allocation.
	head := statestore.Key2Size(key, nil)
	pa := make([]byte, 0, head+len(prefix)+head+len(after))
	p := statestore.Key2(pa, key, prefix)
	var a []byte
	if len(after) > 0 {
		a = statestore.Key2(p[len(p):], key, after)
	}
	return rs.ts.scan(rs.readWrites(), p, a, func(k, v []byte) bool { return fn(k[head:], v) })
}

// EndRun makes rs read the partition's view alone again, once the call of
// its run returned: the writes of the records before it are the
// overlay's by then (Partition.Commit), or were dropped with their record.
// A record not in a run: nothing.
func (rs *Record) EndRun() {
	if r := rs.run; r != nil {
		rs.run = nil
		r.end()
	}
}

// shared reads key from what rs shares with the records before it: their
// writes in its run, then the partition's overlay and store. A write's
// value is never changed once made: it is returned as it is.
func (rs *Record) shared(key []byte) ([]byte, bool, error) {
	if r := rs.run; r != nil {
		r.fold(rs.k)
		if i, ok := r.idx[string(key)]; ok {
			v := r.ws[i].Value
			return v, v != nil, nil
		}
		// The run's records read one after another: one buffer.
		v, buf, ok, err := rs.ts.get(r.buf, key)
		r.buf = buf
		return v, ok, err
	}
	// No buffer of the record's own: the clean cache answers most reads
	// the overlay does not, and a read of the store allocates its value.
	v, _, ok, err := rs.ts.get(nil, key)
	return v, ok, err
}

// runGrow is what committing the writes of the records before rs in its
// run would add to the overlay's bytes (Commit's count).
func (rs *Record) runGrow() int64 {
	if r := rs.run; r != nil {
		r.fold(rs.k)
		return r.grow
	}
	return 0
}

// readWrites are the writes rs reads before the overlay: its own over
// those of the records before it in its run, in an order where a later
// write of a key replaces an earlier one (Partition.scan).
func (rs *Record) readWrites() []statestore.Write {
	r := rs.run
	if r == nil {
		return rs.writes
	}
	r.fold(rs.k)
	if len(r.ws) == 0 {
		return rs.writes
	}
	return r.writes(len(r.ws), rs.writes)
}

// Writes are the attempt's writes so far, one per key (before Commit: a
// sink checks their changelog records against what the topic accepts).
func (rs *Record) Writes() []Write { return rs.writes }

// OverBound says why a put of the attempt was refused for state.max_bytes
// ("": none was), for the record's failure.
func (rs *Record) OverBound() string {
	if !rs.over {
		return ""
	}
	return fmt.Sprintf("state_put refused: partition %d holds %d bytes of state, at its bound of %d (state.max_bytes)", rs.ts.partition, rs.overUsed, rs.ts.maxBytes)
}

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
	return rs.get(key)
}

// get reads the checked key (one-part, or a two-part key's encoding).
func (rs *Record) get(key []byte) ([]byte, abi.Errno) {
	if i := findWrite(rs.writes, rs.index, key); i >= 0 {
		if v := rs.writes[i].Value; v != nil {
			return v, 0
		}
		return nil, abi.ErrnoNotFound
	}
	v, ok, err := rs.shared(key)
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

// add appends a write of a key the record has not written; k is the
// record's own copy of the key.
func (rs *Record) add(k, v []byte) {
	if rs.writes == nil {
		rs.writes = rs.first[:0]
	}
	rs.writes = append(rs.writes, statestore.Write{Key: k, Value: v})
	rs.bytes += int64(len(k) + len(v))
	switch {
	case rs.index != nil:
		rs.index[keyString(k)] = len(rs.writes) - 1
	case len(rs.writes) > indexAfter:
		rs.index = make(map[string]int, 2*len(rs.writes))
		for i, w := range rs.writes {
			rs.index[keyString(w.Key)] = i
		}
	}
}

// replace makes v the value of the record's write i.
func (rs *Record) replace(i int, v []byte) {
	rs.bytes += int64(len(v) - len(rs.writes[i].Value))
	rs.writes[i].Value = v
}

func (rs *Record) Put(key, value []byte) abi.Errno {
	if e := rs.ts.checkKey(key); e != 0 {
		return e
	}
	return rs.put(key, value, false)
}

// put sets the checked key (one-part, or a two-part key's encoding) to
// value; own: key is the record's already (a two-part key's encoding).
func (rs *Record) put(key, value []byte, own bool) abi.Errno {
	if len(value) > rs.ts.maxValue {
		return abi.ErrnoTooLarge
	}
	i := findWrite(rs.writes, rs.index, key)
	if e := rs.room(i, key, len(value)); e != 0 {
		return e
	}
	if i >= 0 {
		rs.replace(i, append(make([]byte, 0, len(value)), value...)) // never nil: nil is a delete
		return 0
	}
	// The key and the value in one allocation, neither nil, the empty key
	// included: the key is the changelog record's, and a compacted topic
	// refuses a null key (RATIONALE.md, "The empty state key").
	if own {
		rs.add(key, append(make([]byte, 0, len(value)), value...))
		return 0
	}
	kv := make([]byte, len(key)+len(value))
	copy(kv, key)
	copy(kv[len(key):], value)
	rs.add(kv[:len(key):len(key)], kv[len(key):])
	return 0
}

// room answers whether a put of a value of n bytes to key fits the
// partition's bound (state.max_bytes): the store's keys and values, the
// overlay's, the run's before the record and the record's writes, with
// this one replacing the record's write i of key (-1: none). The count
// takes every write not yet in the store as new; when it is over the
// bound, a put no larger than the value it replaces (in the overlay or the
// store) still passes: it does not grow the state. Deletes always pass
// (RATIONALE.md, "State stores").
func (rs *Record) room(i int, key []byte, n int) abi.Errno {
	ts := rs.ts
	grow := int64(len(key) + n)
	if i >= 0 {
		grow = int64(n - len(rs.writes[i].Value))
	}
	if ts.maxBytes <= 0 || grow <= 0 {
		return 0
	}
	run := rs.runGrow()
	ts.mu.Lock()
	overlay := ts.overlayBytes
	ts.mu.Unlock()
	used := ts.ps.store.Bytes() + overlay + run + rs.bytes
	if used+grow <= ts.maxBytes {
		return 0
	}
	v, ok, err := rs.shared(key)
	if err == nil && ok && len(v) >= n {
		return 0
	}
	ts.refused.Add(1)
	rs.over, rs.overUsed = true, used
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
	return rs.delete(key, false)
}

// delete removes the checked key; own as put's.
func (rs *Record) delete(key []byte, own bool) abi.Errno {
	if i := findWrite(rs.writes, rs.index, key); i >= 0 {
		rs.replace(i, nil)
		return 0
	}
	if !own {
		key = append(make([]byte, 0, len(key)), key...) // never nil, as Put's
	}
	rs.add(key, nil)
	return 0
}

// Scan merges the record's writes and the overlay (newer) into the store's
// keys, in key order.
func (rs *Record) Scan(prefix, after []byte, fn func(k, v []byte) bool) abi.Errno {
	return rs.ts.scan(rs.readWrites(), prefix, after, fn)
}

// Reader is the read path of the record's asynchronous state operations
// (host.State): a copy of the record's writes as they are now over the
// partition's overlay and store. The copy is of the slice only: a write's key
// and value are never changed once made (put replaces the entry). In a run
// the writes of the records before it are read between the two for as
// long as the overlay does not hold them yet (reader.inRun): the read
// runs on its own goroutine, possibly after the run's call returned and
// its records were committed, when the overlay holds them or what records
// decided since wrote over them.
func (rs *Record) Reader() host.StateReader {
	rd := &reader{ts: rs.ts, writes: slices.Clone(rs.writes), index: maps.Clone(rs.index)}
	if r := rs.run; r != nil {
		r.fold(rs.k)
		r.readers = true // its writes stay as they are: never reused
		for _, p := range r.recs {
			p.pinned = true // the reader's priors are among them
		}
		rd.run, rd.runWrites, rd.priors = r, len(r.ws), len(r.priors)
	}
	return rd
}

// reader is a Record's read-only view for another goroutine:
// its writes (and their index) are its own copy, the first runWrites of
// its run's writes (those of the records before it) never change, and
// Partition and Run are safe for concurrent use by readers.
type reader struct {
	ts        *Partition
	writes    []statestore.Write
	index     map[string]int
	run       *Run
	runWrites int // the run's writes the record reads
	priors    int // the run's accepted records that made them
}

// inRun reports whether the reader still reads the writes of the records
// before its record in their run: until every one of them was committed
// (Commit moves the writes into the overlay before it marks the record).
func (r *reader) inRun() bool {
	return r.runWrites > 0 && !r.run.committed(r.priors)
}

func (r *reader) Check(key []byte) abi.Errno { return r.ts.checkKey(key) }

func (r *reader) Get(key []byte) ([]byte, bool, abi.Errno) {
	if i := findWrite(r.writes, r.index, key); i >= 0 {
		v := r.writes[i].Value
		return bytes.Clone(v), v != nil, 0
	}
	if r.inRun() {
		if v, ok := r.run.get(key, r.runWrites); ok {
			return bytes.Clone(v), v != nil, 0
		}
	}
	v, read, ok, err := r.ts.get(nil, key)
	if err != nil {
		return nil, false, abi.ErrnoNoState // the store is closed: the partition moved
	}
	if ok && read == nil {
		v = bytes.Clone(v) // the caller's to keep: the overlay's value is shared
	}
	return v, ok, 0
}

func (r *reader) Scan(prefix, after []byte, fn func(k, v []byte) bool) abi.Errno {
	ws := r.writes
	if r.inRun() {
		// The record's own writes replace those before it (scan: a later
		// write of a key replaces an earlier one).
		ws = r.run.writes(r.runWrites, r.writes)
	}
	return r.ts.scan(ws, prefix, after, fn)
}

// scan merges writes (the newest) and the overlay (newer) into the store's
// keys, in key order.
func (ts *Partition) scan(writes []statestore.Write, prefix, after []byte, fn func(k, v []byte) bool) abi.Errno {
	if len(prefix) > abi.MaxStateKeyBytes && !statestore.IsKey2(prefix) {
		return abi.ErrnoTooLarge
	}
	// A one-part scan lists no two-part key nor the stream time, which
	// begin with statestore.Key2Marker (the store keeps them apart); a
	// two-part scan's prefix begins with it, and the stream time's key
	// never has such a prefix (statestore.StreamTimeKey).
	two := statestore.IsKey2(prefix)
	inRange := func(k string) bool {
		return strings.HasPrefix(k, string(prefix)) && (len(after) == 0 || k > string(after)) &&
			(two || !strings.HasPrefix(k, statestore.Key2Marker))
	}
	newer := map[string][]byte{}
	ts.mu.Lock()
	if g, ok := statestore.Key2Group(prefix); ok {
		// One key's subs, or the timers: its group's keys alone.
		ts.indexSubs()
		for k := range ts.groups.m[string(g)] {
			if inRange(k) {
				newer[k] = ts.overlay[k].value
			}
		}
	} else {
		for k, e := range ts.overlay {
			if inRange(k) {
				newer[k] = e.value
			}
		}
	}
	ts.mu.Unlock()
	for _, w := range writes {
		if k := string(w.Key); inRange(k) {
			newer[k] = w.Value
		}
	}
	sorted := make([]newerKey, 0, len(newer))
	for k, v := range newer {
		sorted = append(sorted, newerKey{k, v})
	}
	return ts.merge(sorted, prefix, after, fn)
}

// newerKey is a key of the overlay or of a record's writes and its value
// there (nil: deleted), for a scan's merge.
type newerKey struct {
	k string
	v []byte
}

// merge scans the store's keys with prefix after after (all: nil) and the
// keys of newer (each once, in that range, in any order; merge sorts it)
// in key order, newer's values replacing the store's.
func (ts *Partition) merge(newer []newerKey, prefix, after []byte, fn func(k, v []byte) bool) abi.Errno {
	slices.SortFunc(newer, func(a, b newerKey) int { return strings.Compare(a.k, b.k) })
	stop := false
	// emitNewer emits the newer keys below limit (all when limit is nil).
	emitNewer := func(limit []byte) {
		for len(newer) > 0 && !stop && (limit == nil || newer[0].k < string(limit)) {
			if v := newer[0].v; v != nil {
				stop = !fn([]byte(newer[0].k), v)
			}
			newer = newer[1:]
		}
	}
	err := ts.ps.store.Scan(prefix, after, func(k, v []byte) bool {
		emitNewer(k)
		if stop {
			return false
		}
		if len(newer) > 0 && newer[0].k == string(k) {
			if nv := newer[0].v; nv != nil {
				stop = !fn(k, nv)
			}
			newer = newer[1:]
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

// groupAdd indexes the overlay's key k (key's string, the write's own
// bytes) in its group, if it is a two-part key or a timer's (under ts.mu).
func (ts *Partition) groupAdd(key []byte, k string) {
	g, ok := statestore.Key2Group(key)
	if !ok || !ts.groups.subs && string(g) != statestore.TimerPrefix {
		return
	}
	set := ts.groups.m[string(g)]
	if set == nil {
		if ts.groups.m == nil {
			ts.groups.m = map[string]map[string]struct{}{}
		}
		set = map[string]struct{}{}
		ts.groups.m[string(g)] = set
	}
	set[k] = struct{}{}
}

// indexSubs indexes the overlay's two-part keys in groups, once
// (under ts.mu; overlayGroups.subs).
func (ts *Partition) indexSubs() {
	if ts.groups.subs {
		return
	}
	ts.groups.subs = true
	for k := range ts.overlay {
		if statestore.IsKey2([]byte(k)) && !strings.HasPrefix(k, statestore.TimerPrefix) {
			ts.groupAdd([]byte(k), k)
		}
	}
}

// groupRemove drops key, which left the overlay, from its group's index
// (under ts.mu); a group left empty goes.
func (ts *Partition) groupRemove(key []byte) {
	g, ok := statestore.Key2Group(key)
	if !ok || !ts.groups.subs && string(g) != statestore.TimerPrefix {
		return
	}
	if set := ts.groups.m[string(g)]; set != nil {
		delete(set, string(key))
		if len(set) == 0 {
			delete(ts.groups.m, string(g))
		}
	}
}
