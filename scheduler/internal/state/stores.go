package state

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/kafkaerr"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

// Config is what a pipeline's stores need of its configuration.
type Config struct {
	Pipeline       string        // the pipeline's name: errors name pipelines[<name>]
	HostID         string        // host.id: a store's file is the host's own
	Dir            string        // the stores' directory (state.dir, resolved)
	Input          string        // the input topic (inputs[0]): a store per partition of it
	RestoreTimeout time.Duration // state.restore_timeout, for each partition's restore
	Limits
}

// Counters are where the stores count (the pipeline's statistics). A nil
// field counts nowhere anyone reads.
type Counters struct {
	Restored       *atomic.Int64 // changelog records applied by restores
	RestoreSkipped *atomic.Int64 // changelog records restores skipped (the store cannot hold them)
	RestoreNanos   *atomic.Int64 // time spent restoring
	Refused        *atomic.Int64 // puts refused at state.max_bytes
	FlushFailures  *atomic.Int64 // flushes the store refused
	TimersSet      *atomic.Int64 // timers set by committed writes (ABI.md §4.2)
}

// Stores are a stateful pipeline's open partition stores: a partition's
// store is opened and restored from the changelog when the partition is
// assigned (Open), before anything of the partition runs, and closed once
// nothing of the partition runs any more after a revoke (Detach). Safe for
// concurrent use; mu is a leaf lock.
type Stores struct {
	c     Config
	admin *kgo.Client                                // the pipeline's client: topic metadata, end offsets
	dial  func(opts ...kgo.Opt) (*kgo.Client, error) // a client of its own for each restore
	n     Counters
	log   *slog.Logger

	// restoring counts the partitions whose store is being restored now
	// (/readyz answers 503 meanwhile).
	restoring atomic.Int32

	mu     sync.Mutex
	stores map[int32]*partStore
	// cur is each partition's newest view (View): the only one a
	// commit's flush applies (Flush). A view taken after an abort or a new
	// assignment replaces it.
	cur   map[int32]*Partition
	parts int // the input topic's partition count, read at the first assignment
}

// partStore is one partition's open store.
type partStore struct {
	store    *statestore.Store
	restored int           // changelog records applied by the restore
	skipped  int           // changelog records the restore skipped (the store cannot hold them)
	took     time.Duration // the restore's duration
	lastWarn atomic.Int64  // unix nanoseconds of the last state.max_bytes refusal logged
}

// NewStores returns the stores of a pipeline, none open yet. admin is the
// pipeline's client (the input's partitions, the changelog's end offsets);
// dial makes a restore's own client, with the host's connection settings
// (kafka.tls, kafka.sasl) and whatever opts the restore adds.
func NewStores(c Config, admin *kgo.Client, dial func(opts ...kgo.Opt) (*kgo.Client, error), n *Counters, log *slog.Logger) *Stores {
	s := &Stores{c: c, admin: admin, dial: dial, log: log, stores: map[int32]*partStore{}, cur: map[int32]*Partition{}}
	if n != nil {
		s.n = *n
	}
	for _, f := range []**atomic.Int64{&s.n.Restored, &s.n.RestoreSkipped, &s.n.RestoreNanos, &s.n.Refused, &s.n.FlushFailures, &s.n.TimersSet} {
		if *f == nil {
			*f = new(atomic.Int64)
		}
	}
	return s
}

// path is the file of a partition's store: one per host, pipeline and
// partition, so that two hosts sharing a directory never share a file.
func (s *Stores) path(partition int32) string {
	return filepath.Join(s.c.Dir, fmt.Sprintf("%s.%s.%d.db", s.c.HostID, s.c.Pipeline, partition))
}

// RestoreParallel is how many partitions' stores are restored at once:
// each restore has its own fetches and its own file, so they overlap the
// broker's round trips with each other's writes.
const RestoreParallel = 4

// Open opens and restores the stores of the assigned partitions that are
// not open yet, within state.restore_timeout for each, up to
// RestoreParallel at a time. It runs in the assignment callback: the
// partitions' tasks are created only after it; the restores' goroutines
// end before it returns.
func (s *Stores) Open(ctx context.Context, parts []int32) error {
	if err := s.readPartitions(ctx); err != nil {
		return err
	}
	var todo []int32
	s.mu.Lock()
	for _, part := range parts {
		if s.stores[part] == nil {
			todo = append(todo, part)
		}
	}
	s.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	start := time.Now()
	defer func() { s.n.RestoreNanos.Add(int64(time.Since(start))) }()
	errs := make([]error, len(todo))
	sem := make(chan struct{}, RestoreParallel)
	var wg sync.WaitGroup
	for i, part := range todo {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = s.openOne(ctx, part)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// openOne opens and restores one partition's store.
func (s *Stores) openOne(ctx context.Context, part int32) error {
	timeout := s.c.RestoreTimeout
	st, err := statestore.Open(s.path(part), timeout)
	if err != nil {
		return fmt.Errorf("pipelines[%s].state.dir: %w", s.c.Pipeline, err)
	}
	ps := &partStore{store: st}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	s.restoring.Add(1)
	err = s.restore(rctx, ps, part)
	s.restoring.Add(-1)
	cancel()
	if err != nil {
		st.Close()
		return fmt.Errorf("pipelines[%s].state: restoring partition %d from %s (state.restore_timeout %s): %w", s.c.Pipeline, part, s.c.Changelog, timeout, err)
	}
	s.mu.Lock()
	s.stores[part] = ps
	s.mu.Unlock()
	s.n.Restored.Add(int64(ps.restored))
	s.log.Info("state restored", "partition", part, "records", ps.restored, "took", ps.took, "store", st.Path())
	return nil
}

// readPartitions learns the input topic's partition count once.
func (s *Stores) readPartitions(ctx context.Context) error {
	s.mu.Lock()
	n := s.parts
	s.mu.Unlock()
	if n > 0 {
		return nil
	}
	input := s.c.Input
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ts, err := kadm.NewClient(s.admin).ListTopics(ctx, input)
	if err == nil {
		err = ts.Error()
	}
	if err != nil {
		return fmt.Errorf("pipelines[%s].inputs[0]: reading %s's partitions for its state: %w", s.c.Pipeline, input, err)
	}
	s.mu.Lock()
	s.parts = len(ts[input].Partitions)
	s.mu.Unlock()
	return nil
}

// View returns a new view of partition's state (an empty overlay over its
// store), now the partition's current one (Flush applies it), or nil when
// the partition's store is not open (its assignment failed to restore
// it). Each new task of the partition takes one.
func (s *Stores) View(partition int32) *Partition {
	s.mu.Lock()
	old := s.cur[partition]
	s.mu.Unlock()
	if old != nil {
		// Its committed writes a deferred flush kept, before the new view
		// reads the store (flushEvery).
		s.flushCommitted(old)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.stores[partition]
	if ps == nil {
		return nil
	}
	v := newPartition(ps, partition, s.parts, s.c.Limits)
	v.refused, v.timersSet, v.log = s.n.Refused, s.n.TimersSet, s.log
	s.cur[partition] = v
	return v
}

// Flush applies the state writes of the records below the committed offset
// upTo to their partition's store, from the view the committed records
// wrote through (from): the pipeline calls it for each partition whose
// committed offset moved, after the commit succeeded and before the next
// one (never after an aborted transaction). It applies nothing unless from
// is still its partition's current view: a commit answered after its
// partition was lost and assigned again (a lost partition does not wait
// for the commit in flight) carries an offset of the old view, which must
// not reach the new one's writes; nor after an abort, whose restart
// replaced the view. (If from stops being current while it flushes, it
// applies only its own committed writes to its own store, closed or about
// to be: never the new view's.) A failure costs a longer restore, not
// state: the writes stay in the overlay and the changelog has them. It is
// counted (wasmstream.state.flush.failures) and logged at most every
// flushLogEvery.
func (s *Stores) Flush(from *Partition, upTo int64) {
	if from == nil {
		return // stateless, or no store open when the task was made
	}
	s.mu.Lock()
	cur := s.cur[from.partition] == from
	s.mu.Unlock()
	if !cur {
		return // revoked or lost (and perhaps assigned again), or replaced after an abort
	}
	// upTo -1: the deferred flush's timer (flushDeferred), which applies.
	err := from.flushDeferred(upTo, time.Now(), upTo < 0, func() { s.Flush(from, -1) })
	if err == nil {
		return
	}
	n := s.n.FlushFailures.Add(1)
	if from.flushLogDue(time.Now()) {
		s.log.Warn("the local state store refused the state writes of committed records; they stay in memory and are applied again at the next commit, and a restart reads them from the changelog", "partition", from.partition, "failures", n, "err", err)
	}
}

// flushCommitted applies v's deferred committed writes (Partition.
// flushCommitted), counting and logging a failure as Flush does.
func (s *Stores) flushCommitted(v *Partition) {
	if err := v.flushCommitted(); err != nil {
		n := s.n.FlushFailures.Add(1)
		s.log.Warn("the local state store refused the state writes of committed records of a view it replaces; a restart reads them from the changelog", "partition", v.partition, "failures", n, "err", err)
	}
}

// flushLogEvery is how often a partition's store refusing its writes is
// logged at most (each commit tries again).
const flushLogEvery = 30 * time.Second

// flushEvery is how often a partition's store takes its committed writes
// at most (Stores.Flush), unless the overlay holds flushOverlayBytes: a
// transaction commits every 100 ms under exactly_once (transactions.
// interval), and a flush per transaction wrote nearly a key a record (the
// count example: 3 of its 7.7 allocations a record, 6% of its CPU) where
// one a second writes each key once however often it was written. The
// committed writes wait in the overlay, read as before; the view's
// flushCommitted applies them before another view or no view reads the
// store (Stores.View, Stores.Detach). RATIONALE.md, "State stores" (why a
// flushed value is read from memory).
const flushEvery = time.Second

// flushOverlayBytes is the overlay's bytes at which a commit's flush
// applies at once, whenever the last was: the overlay's memory stays
// bounded whatever the write rate.
const flushOverlayBytes = 8 << 20

// flushDeferred is the flush of a commit of upTo (Stores.Flush; -1: the
// timer of a deferred one): upTo is noted, and the committed writes are
// applied if the last flush was flushEvery ago or more, or the overlay
// holds flushOverlayBytes. A flush deferred arms a timer (once) that
// calls later when flushEvery has passed: a partition whose records
// stopped coming gets no commit to apply it, and its store (its bytes,
// state.max_bytes' count) must not wait for one. A retired view does
// nothing.
func (ts *Partition) flushDeferred(upTo int64, now time.Time, force bool, later func()) error {
	ts.flush.mu.Lock()
	defer ts.flush.mu.Unlock()
	if ts.flush.retired {
		return nil
	}
	ts.flush.upTo = max(ts.flush.upTo, upTo)
	ts.mu.Lock()
	big := ts.overlayBytes >= flushOverlayBytes
	ts.mu.Unlock()
	if wait := flushEvery - now.Sub(ts.flush.last); !force && !big && wait > 0 {
		if ts.flush.later == nil {
			ts.flush.later = time.AfterFunc(wait, later)
		}
		return nil
	}
	if ts.flush.later != nil {
		ts.flush.later.Stop() // this flush is the one it waited for
		ts.flush.later = nil
	}
	ts.flush.last = now
	return ts.apply(ts.flush.upTo)
}

// flushLogDue answers whether a failed flush is to be logged now (the
// last was flushLogEvery ago or more): a commit's flush and its timer's
// may fail on two goroutines.
func (ts *Partition) flushLogDue(now time.Time) bool {
	ts.flush.mu.Lock()
	defer ts.flush.mu.Unlock()
	if now.Sub(ts.flush.logged) < flushLogEvery {
		return false
	}
	ts.flush.logged = now
	return true
}

// flushCommitted applies the view's committed writes a deferred flush left
// in its overlay, once it stops being its partition's current view: the
// next view (after an abort) starts with an empty overlay and reads the
// store, as does the partition's next owner. A failure is the same as a
// commit's (the writes stay with this view; a restore reads them from the
// changelog).
func (ts *Partition) flushCommitted() error {
	ts.flush.mu.Lock()
	defer ts.flush.mu.Unlock()
	if ts.flush.retired {
		return nil
	}
	ts.flush.retired = true
	if ts.flush.later != nil {
		ts.flush.later.Stop() // a timer that fired meanwhile finds the view retired
		ts.flush.later = nil
	}
	if ts.flush.upTo <= 0 {
		return nil
	}
	return ts.apply(ts.flush.upTo)
}

// Detach takes the partitions' stores out of the open set at once, so that
// a new assignment of one opens it anew (waiting for the file until it is
// closed), and no commit flushes them any more. closeLater closes them:
// call it once nothing of the partitions runs (their workers ended: a
// worker may still read a store).
func (s *Stores) Detach(parts []int32) (closeLater func()) {
	s.mu.Lock()
	var out []*partStore
	var views []*Partition
	for _, part := range parts {
		if ps := s.stores[part]; ps != nil {
			out = append(out, ps)
			delete(s.stores, part)
		}
		if v := s.cur[part]; v != nil {
			views = append(views, v)
		}
		delete(s.cur, part)
	}
	s.mu.Unlock()
	// Their committed writes a deferred flush kept, before the stores
	// close: a restart or the next assignment here reads the store.
	for _, v := range views {
		s.flushCommitted(v)
	}
	return func() {
		for _, ps := range out {
			_ = ps.store.Close()
		}
	}
}

// CloseAll closes every store (the pipeline stopped).
func (s *Stores) CloseAll() {
	s.mu.Lock()
	var parts []int32
	for part := range s.stores {
		parts = append(parts, part)
	}
	s.mu.Unlock()
	s.Detach(parts)()
}

// Restoring is how many partitions' stores are being restored now.
func (s *Stores) Restoring() int32 { return s.restoring.Load() }

// Size is an open store's size: its file in use, and its keys and values.
type Size struct{ File, Data int64 }

// Sizes returns each open store's size.
func (s *Stores) Sizes() map[int32]Size {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int32]Size, len(s.stores))
	for part, ps := range s.stores {
		out[part] = Size{ps.store.Size(), ps.store.Bytes()}
	}
	return out
}

// RestoreStarted, when set (tests only), is called as a restore that has
// changelog records to read begins.
var RestoreStarted func(part int32)

// restore applies the changelog partition from the offset the store
// reflects up to its end as the restore begins (read_committed: aborted
// transactions' writes are skipped; control records are kept so that the
// end is seen even when a transaction marker is the last offset), through
// a changelogApplier: a record the store cannot hold is skipped, counted
// (wasmstream.state.restore.skipped) and logged, and the restore goes on.
func (s *Stores) restore(ctx context.Context, ps *partStore, part int32) error {
	start := time.Now()
	defer func() { ps.took = time.Since(start) }()
	next, err := ps.store.Next()
	if err != nil {
		return err
	}
	changelog := s.c.Changelog
	ends, err := s.endOffsets(ctx, changelog)
	if err != nil {
		return fmt.Errorf("end offset: %w", err)
	}
	end, ok := ends.Lookup(changelog, part)
	if !ok {
		return fmt.Errorf("the changelog has no partition %d (it needs as many as the input)", part)
	}
	if next > end.Offset {
		// The store has seen more than the changelog holds: the topic was
		// deleted and created again. Its content is not the changelog's.
		s.log.Warn("the state store is ahead of its changelog (recreated?); restoring it in full", "partition", part, "store_next", next, "changelog_end", end.Offset)
		if err := ps.store.Reset(); err != nil {
			return err
		}
		next = 0
	}
	if end.Offset <= next {
		return nil
	}
	if RestoreStarted != nil {
		RestoreStarted(part)
	}
	cl, err := s.dial(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{changelog: {part: kgo.NewOffset().At(next)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), // compacted below next: from the start
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	a := &changelogApplier{store: ps.store, last: next - 1, onSkip: func(r *kgo.Record, err error) {
		if skipped := ps.skipped + 1; skipped <= restoreSkipLogs {
			s.log.Warn("state restore: skipped a changelog record the store cannot hold", "partition", part, "changelog", changelog, "offset", r.Offset, "key_bytes", len(r.Key), "value_bytes", len(r.Value), "err", err)
		}
		ps.skipped++
	}}
	defer func() {
		ps.restored = a.applied
		if ps.skipped > 0 {
			s.n.RestoreSkipped.Add(int64(ps.skipped))
			s.log.Warn("state restore: changelog records skipped", "partition", part, "changelog", changelog, "skipped", ps.skipped)
		}
	}()
	for a.last < end.Offset-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("read up to offset %d of %d: %w", a.last+1, end.Offset, ctx.Err())
		}
		if err := kafkaerr.FirstNonRetriable(fs); err != nil {
			return err
		}
		// A fetch may bring a partition's whole changelog: the applier
		// writes it in transactions of restoreBatch.
		var aerr error
		fs.EachRecord(func(r *kgo.Record) {
			if aerr == nil {
				aerr = a.add(r)
			}
		})
		if aerr == nil {
			aerr = a.flush()
		}
		if aerr != nil {
			return aerr
		}
	}
	return nil
}

// restoreSkipLogs is how many skipped changelog records a restore logs one
// by one; a summary line gives the total.
const restoreSkipLogs = 5

// restoreBatch is the most changelog records a restore applies to the
// store in one bbolt transaction. bbolt splits nodes only at the commit:
// within a transaction each insert into a node moves the entries after
// it, so keys not in order cost ~(batch / leaves) per key, and a new
// store's first transaction (one leaf) is quadratic. A fetch may bring a
// partition's whole changelog; measured, 125,000 shuffled keys applied in
// batches of 4,096: ~200,000 keys/s, of 32,768: ~60,000, in one: ~3,500
// (BENCHMARKS.md, "Restore on the real broker").
const restoreBatch = 4096

// restoreRetriable: an error a restore waits out within
// state.restore_timeout. A Kafka error code says itself whether it may
// pass; anything else short of the restore's own end (the connection to a
// broker that died, a dial refused or reset: franz-go leaves dial errors
// to the caller) is the cluster's weather, and the next try goes to the
// partition's new leader.
func restoreRetriable(err error) bool {
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return ke.Retriable
	}
	return !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, kgo.ErrClientClosed)
}

// endOffsets lists the changelog's end offsets, retrying what may pass (a
// changelog created a moment ago is not known to every broker yet:
// UNKNOWN_TOPIC_OR_PARTITION; a leader killed a moment ago cannot be
// dialled until the client's metadata names the next) until ctx ends.
func (s *Stores) endOffsets(ctx context.Context, changelog string) (kadm.ListedOffsets, error) {
	backoff := 50 * time.Millisecond
	for {
		ends, err := kadm.NewClient(s.admin).ListEndOffsets(ctx, changelog)
		if err == nil {
			err = ends.Error()
		}
		if err == nil || !restoreRetriable(err) {
			return ends, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}
