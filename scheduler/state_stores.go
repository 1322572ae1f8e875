package scheduler

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

// stateStores are a stateful pipeline's open partition stores (state.go):
// a partition's store is opened and restored from the changelog when the
// partition is assigned, before its task exists, and closed once its task
// is gone after a revoke. Safe for concurrent use; mu is a leaf lock.
type stateStores struct {
	p   *Pipeline
	dir string

	// restoring counts the partitions whose store is being restored now
	// (/readyz answers 503 meanwhile).
	restoring atomic.Int32

	mu     sync.Mutex
	stores map[int32]*partStore
	// cur is each partition's newest task view (taskState): the one a
	// commit's flush applies (committed). A task replaced after an abort
	// or a new assignment replaces it.
	cur   map[int32]*taskState
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

func newStateStores(p *Pipeline) (*stateStores, error) {
	dir, err := p.cfg.StateDir(p.pc)
	if err != nil {
		return nil, err
	}
	return &stateStores{p: p, dir: dir, stores: map[int32]*partStore{}, cur: map[int32]*taskState{}}, nil
}

// path is the file of a partition's store: one per host, pipeline and
// partition, so that two hosts sharing a directory never share a file.
func (s *stateStores) path(partition int32) string {
	return filepath.Join(s.dir, fmt.Sprintf("%s.%s.%d.db", s.p.cfg.Host.ID, s.p.pc.Name, partition))
}

// restoreParallel is how many partitions' stores are restored at once:
// each restore has its own fetches and its own file, so they overlap the
// broker's round trips with each other's writes.
const restoreParallel = 4

// open opens and restores the stores of the assigned partitions that are
// not open yet, within state.restore_timeout for each, up to
// restoreParallel at a time. It runs in the assignment callback: the
// partitions' tasks are created only after it; the restores' goroutines
// end before it returns.
func (s *stateStores) open(ctx context.Context, parts []int32) error {
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
	defer func() { s.p.stats.StateRestoreNanos.Add(int64(time.Since(start))) }()
	errs := make([]error, len(todo))
	sem := make(chan struct{}, restoreParallel)
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
func (s *stateStores) openOne(ctx context.Context, part int32) error {
	timeout := s.p.pc.State.RestoreTimeout
	st, err := statestore.Open(s.path(part), timeout)
	if err != nil {
		return fmt.Errorf("pipelines[%s].state.dir: %w", s.p.pc.Name, err)
	}
	ps := &partStore{store: st}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	s.restoring.Add(1)
	err = s.restore(rctx, ps, part)
	s.restoring.Add(-1)
	cancel()
	if err != nil {
		st.Close()
		return fmt.Errorf("pipelines[%s].state: restoring partition %d from %s (state.restore_timeout %s): %w", s.p.pc.Name, part, s.p.pc.State.Changelog, timeout, err)
	}
	s.mu.Lock()
	s.stores[part] = ps
	s.mu.Unlock()
	s.p.stats.StateRestored.Add(int64(ps.restored))
	s.p.log.Info("state restored", "partition", part, "records", ps.restored, "took", ps.took, "store", st.Path())
	return nil
}

// readPartitions learns the input topic's partition count once.
func (s *stateStores) readPartitions(ctx context.Context) error {
	s.mu.Lock()
	n := s.parts
	s.mu.Unlock()
	if n > 0 {
		return nil
	}
	input := s.p.pc.Inputs[0]
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ts, err := kadm.NewClient(s.p.cl).ListTopics(ctx, input)
	if err == nil {
		err = ts.Error()
	}
	if err != nil {
		return fmt.Errorf("pipelines[%s].inputs[0]: reading %s's partitions for its state: %w", s.p.pc.Name, input, err)
	}
	s.mu.Lock()
	s.parts = len(ts[input].Partitions)
	s.mu.Unlock()
	return nil
}

// taskState returns the state of a new task of partition, or nil when the
// partition's store is not open (its assignment failed to restore it).
func (s *stateStores) taskState(partition int32) *taskState {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.stores[partition]
	if ps == nil {
		return nil
	}
	st := &s.p.pc.State
	ts := newTaskState(ps, partition, s.parts, st.MaxValueBytes, st.Changelog)
	ts.maxBytes, ts.refused, ts.log = st.MaxBytes, &s.p.stats.StateRefused, s.p.log
	s.cur[partition] = ts
	return ts
}

// detach takes the partitions' stores out of the open set (a new
// assignment of one opens it anew) and returns them to close once their
// tasks are gone.
func (s *stateStores) detach(parts []int32) []*partStore {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*partStore
	for _, part := range parts {
		if ps := s.stores[part]; ps != nil {
			out = append(out, ps)
			delete(s.stores, part)
		}
		delete(s.cur, part)
	}
	return out
}

// closeAll closes every store (the pipeline stopped).
func (s *stateStores) closeAll() {
	s.mu.Lock()
	var parts []int32
	for part := range s.stores {
		parts = append(parts, part)
	}
	s.mu.Unlock()
	closeStores(s.detach(parts))
}

func closeStores(ps []*partStore) {
	for _, p := range ps {
		_ = p.store.Close()
	}
}

// releaseState closes the stores of tasks that are gone (revoked, lost).
// Call it after their workers ended.
func (p *Pipeline) releaseState(tasks []*task) { closeStores(p.detachState(tasks)) }

// detachState takes the stores of tasks being revoked out of the open set
// at once, so that a new assignment of their partitions opens them anew
// (waiting for the file until they are closed), and returns them to close
// once the tasks' workers ended.
func (p *Pipeline) detachState(tasks []*task) []*partStore {
	if p.state == nil {
		return nil
	}
	parts := make([]int32, len(tasks))
	for i, t := range tasks {
		parts[i] = t.partition
	}
	return p.state.detach(parts)
}

// restoreStarted, when set (tests only), is called as a restore that has
// changelog records to read begins.
var restoreStarted func(part int32)

// restore applies the changelog partition from the offset the store
// reflects up to its end as the restore begins (read_committed: aborted
// transactions' writes are skipped; control records are kept so that the
// end is seen even when a transaction marker is the last offset), through
// a changelogApplier: a record the store cannot hold is skipped, counted
// (wasmstream.state.restore.skipped) and logged, and the restore goes on.
func (s *stateStores) restore(ctx context.Context, ps *partStore, part int32) error {
	start := time.Now()
	defer func() { ps.took = time.Since(start) }()
	next, err := ps.store.Next()
	if err != nil {
		return err
	}
	changelog := s.p.pc.State.Changelog
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
		s.p.log.Warn("the state store is ahead of its changelog (recreated?); restoring it in full", "partition", part, "store_next", next, "changelog_end", end.Offset)
		if err := ps.store.Reset(); err != nil {
			return err
		}
		next = 0
	}
	if end.Offset <= next {
		return nil
	}
	if restoreStarted != nil {
		restoreStarted(part)
	}
	cl, err := kafkaconn.NewClient(s.p.cfg.Kafka, s.p.brokers,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{changelog: {part: kgo.NewOffset().At(next)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), // compacted below next: from the start
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(100*time.Millisecond),
		kgo.WithLogger(kgoLogger{s.p.log}),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	a := &changelogApplier{store: ps.store, last: next - 1, onSkip: func(r *kgo.Record, err error) {
		if skipped := ps.skipped + 1; skipped <= restoreSkipLogs {
			s.p.log.Warn("state restore: skipped a changelog record the store cannot hold", "partition", part, "changelog", changelog, "offset", r.Offset, "key_bytes", len(r.Key), "value_bytes", len(r.Value), "err", err)
		}
		ps.skipped++
	}}
	defer func() {
		ps.restored = a.applied
		if ps.skipped > 0 {
			s.p.stats.StateRestoreSkipped.Add(int64(ps.skipped))
			s.p.log.Warn("state restore: changelog records skipped", "partition", part, "changelog", changelog, "skipped", ps.skipped)
		}
	}()
	for a.last < end.Offset-1 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("read up to offset %d of %d: %w", a.last+1, end.Offset, ctx.Err())
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) && !kerr.IsRetriable(err) && ferr == nil {
				ferr = err
			}
		})
		if ferr != nil {
			return ferr
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
func (s *stateStores) endOffsets(ctx context.Context, changelog string) (kadm.ListedOffsets, error) {
	backoff := 50 * time.Millisecond
	for {
		ends, err := kadm.NewClient(s.p.cl).ListEndOffsets(ctx, changelog)
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
