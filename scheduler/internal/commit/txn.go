package commit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// Exactly once (RATIONALE.md, "Exactly once").
//
// An exactly_once pipeline's client is a franz-go GroupTransactSession: one
// transactional producer, one consumer-group member, inputs read
// read_committed. A transaction is always open. A record's outcome — its
// outputs, or its retry or dead-letter copy — is released into the open
// transaction in offset order per partition (every ordering keeps a release
// queue under exactly_once), and releasing it makes it done: the partition's
// watermark is then always the end of a contiguous prefix whose outputs are
// all in this or an earlier transaction. The transaction loop cuts the
// transaction every transactions.interval or max_records: it blocks
// releases, flushes, commits each partition's watermark in the transaction
// (TxnOffsetCommit, through franz-go's PreTxnCommitFnContext hook, replacing
// the polled positions franz-go would commit), ends it, and begins the next.
//
// Whatever aborts a transaction — a produce that failed, a rebalance that
// revoked a partition since the last cut, a commit the group refused (a
// zombie whose partitions moved on), a fenced epoch — makes every task start
// over: franz-go rewinds the fetch positions to the committed offsets, the
// old tasks are cut off (nothing they finish later is released) and new
// tasks process the records again. Aborted output records stay in the log,
// invisible to read_committed consumers.

// Transactions is the exactly_once committer (commit.go).
type Transactions struct {
	d     Deps
	sess  *kgo.GroupTransactSession
	txnID string
	// gate is held shared by releases (Enter, Leave: TxnSink.deliver),
	// exclusively by a cut (lock order: Transactions.gate, then
	// Transactions.commitMu, then Set.mu).
	gate sync.RWMutex
	// commitMu is one cut at a time (DESIGN.md, "Lock order").
	commitMu     sync.Mutex
	err          atomic.Pointer[error] // the first produce error of the open transaction
	released     atomic.Int64          // records released since the last cut
	revokedSince atomic.Bool           // partitions revoked or lost since the last cut
	pollStop     atomic.Pointer[context.CancelFunc]
	next         time.Time // when the open transaction is cut (the poll loop's own)
}

// NewTransactions is the exactly_once committer of the pipeline d is of:
// sess is its client's session, txnID its transactional id.
func NewTransactions(d Deps, sess *kgo.GroupTransactSession, txnID string) *Transactions {
	return &Transactions{d: d, sess: sess, txnID: txnID}
}

// TxnID is the transactional id of the pipeline's producer.
func (x *Transactions) TxnID() string { return x.txnID }

// Begin begins the first transaction, on the poll loop (polling and
// ending a transaction never overlap: franz-go requires it).
func (x *Transactions) Begin() bool {
	if err := x.sess.Begin(); err != nil {
		x.d.Fail(fmt.Errorf("pipeline %s: beginning a transaction: %w", x.d.Pipeline.Name, err))
		return false
	}
	x.next = time.Now().Add(x.d.Pipeline.Transactions.Interval)
	return true
}

// PollContext ends the next poll when the open transaction is due for its
// cut: at transactions.interval, or at once when it holds
// transactions.max_records (leave ends a poll in progress when a release
// brings it there).
func (x *Transactions) PollContext(ctx context.Context) (context.Context, func()) {
	pctx, cancel := context.WithDeadline(ctx, x.next)
	x.pollStop.Store(&cancel)
	if x.due() {
		cancel() // a cut is due already
	}
	return pctx, func() {
		x.pollStop.Store(nil)
		cancel()
	}
}

// AfterPoll cuts the open transaction when it is due (CommitNow).
func (x *Transactions) AfterPoll(ctx context.Context) bool {
	if time.Now().Before(x.next) && !x.due() {
		return true
	}
	return x.CommitNow(ctx, nil, nil, false)
}

// Start: nothing runs on its own — the first transaction begins on the
// poll loop (Begin), and each cut runs between polls (AfterPoll).
func (*Transactions) Start() {}

// CommitNow cuts the open transaction (leaving nil: the periodic cut, on
// the poll loop only, as polling and ending a transaction never overlap),
// or cuts off the tasks of partitions that leave, revoked or lost alike
// (leaving). False: the pipeline cannot go on.
func (x *Transactions) CommitNow(ctx context.Context, leaving map[string][]int32, tasks []*partition.Task, _ bool) bool {
	if leaving != nil {
		x.leaving(leaving, tasks)
		return true
	}
	if !x.cut(ctx, false) {
		return false
	}
	x.next = time.Now().Add(x.d.Pipeline.Transactions.Interval)
	return true
}

// due reports whether the open transaction holds transactions.max_records.
func (x *Transactions) due() bool {
	return x.released.Load() >= int64(x.d.Pipeline.Transactions.MaxRecords)
}

// Enter holds the gate shared while outcomes are released into the open
// transaction (TxnSink.deliver): a cut waits for it, and releases wait
// for a cut.
func (x *Transactions) Enter() { x.gate.RLock() }

// Leave ends a release (Enter) of released records and, when they bring
// the open transaction to transactions.max_records, ends the poll in
// progress so the loop cuts.
func (x *Transactions) Leave(released int) {
	if released > 0 {
		n, max := x.released.Add(int64(released)), int64(x.d.Pipeline.Transactions.MaxRecords)
		if n >= max && n-int64(released) < max {
			if c := x.pollStop.Load(); c != nil {
				(*c)()
			}
		}
	}
	x.gate.RUnlock()
}

// Failed makes the open transaction abort at its cut. A record of a
// transaction being aborted fails with kgo.ErrAborting when the abort
// drops it from the producer's buffer: that is the abort itself, not a
// reason to abort the next transaction too (each abort used to cause a
// second one).
func (x *Transactions) Failed(err error) {
	if errors.Is(err, kgo.ErrAborting) {
		return
	}
	x.err.CompareAndSwap(nil, &err)
}

// cut ends the open transaction — committing each partition's watermark
// with the outputs released since the last cut, or aborting — and, unless
// final, begins the next. It reports false when the pipeline cannot go on
// (its transactional producer is fenced or failed, or ctx ended while an
// unconfirmed end was being settled).
func (x *Transactions) cut(ctx context.Context, final bool) bool {
	d := x.d
	x.gate.Lock()
	defer x.gate.Unlock()
	x.commitMu.Lock()
	defer x.commitMu.Unlock()
	c := txnCut{released: x.released.Swap(0), tasks: d.Tasks.Attached(), final: final}
	c.marks = watermarks(c.tasks)
	c.why = x.abortReason()
	empty := c.why == "" && len(c.marks) == 0 && c.released == 0
	if empty && !final {
		return true // nothing to commit: keep the transaction open
	}
	commit := kgo.TryCommit
	if c.why != "" {
		commit = kgo.TryAbort
	}
	start := time.Now()
	committed, err := x.sess.End(commitWatermarks(c.marks), commit)
	switch {
	case committed && empty:
		// The last, empty transaction of a shutdown: nothing was in it.
	case committed:
		x.committed(c.marks, c.tasks)
		d.Log.Debug("transaction committed", "records", c.released, "partitions", len(c.marks), "took", time.Since(start))
	default:
		if !x.notCommitted(ctx, c, err) {
			return false
		}
	}
	if final {
		return err == nil
	}
	return x.beginNext(err)
}

// txnCut is what a cut is about: the records released into the
// transaction, the tasks and the watermarks it commits, why it aborts
// ("": it commits), and whether it is the last.
type txnCut struct {
	released int64
	tasks    []*partition.Task
	marks    map[tp]mark
	why      string
	final    bool
}

// watermarks are the tasks' watermarks that moved since their last commit.
func watermarks(tasks []*partition.Task) map[tp]mark {
	marks := map[tp]mark{}
	for _, t := range tasks {
		if off, _, ok := t.Tracker.Watermark(); ok && off != t.Committed.Load() {
			marks[tp{Topic: t.Topic, Partition: t.Partition}] = mark{t, off}
		}
	}
	return marks
}

// abortReason says why the open transaction must abort, "" when nothing
// does. Every produce of the transaction is answered first: a produce that
// fails while End flushes would otherwise be seen only after the commit,
// and the record it belongs to would be committed without it. (The gate
// keeps workers from releasing more.)
func (x *Transactions) abortReason() string {
	if err := x.d.Client.Flush(context.Background()); err != nil {
		x.Failed(fmt.Errorf("flushing the transaction's produces: %w", err))
	}
	var why string
	if e := x.err.Swap(nil); e != nil {
		why = "a produce in it failed: " + (*e).Error()
	}
	if x.revokedSince.Swap(false) {
		why = "partitions were revoked or lost since it began"
	}
	return why
}

// commitWatermarks is the context of an End that commits marks: franz-go
// fills in the polled positions, and the hook replaces them with the
// watermarks (and drops the partitions without one).
func commitWatermarks(marks map[tp]mark) context.Context {
	return kgo.PreTxnCommitFnContext(context.Background(), func(req *kmsg.TxnOffsetCommitRequest) error {
		topics := req.Topics[:0]
		for _, rt := range req.Topics {
			parts := rt.Partitions[:0]
			for _, rp := range rt.Partitions {
				if m, ok := marks[tp{Topic: rt.Topic, Partition: rp.Partition}]; ok {
					rp.Offset, rp.LeaderEpoch = m.off, -1
					parts = append(parts, rp)
				}
			}
			if len(parts) > 0 {
				rt.Partitions = parts
				topics = append(topics, rt)
			}
		}
		req.Topics = topics
		return nil
	})
}

// committed notes a committed transaction's watermarks, tells the
// pipeline's subscribers (Deps.OnCommitted) and counts the outcomes of
// the records the tasks released into it.
func (x *Transactions) committed(marks map[tp]mark, tasks []*partition.Task) {
	d := x.d
	for _, m := range marks {
		m.t.Committed.Store(m.off)
		d.OnCommitted(m.t, m.off)
	}
	countCommitted(tasks)
	d.Stats.Commits.Add(1)
	d.Stats.TxnCommitted.Add(1)
}

// countCommitted counts the outcomes of the records tasks released into
// the transaction that committed (Task.CountCommitted). Those of an
// aborted transaction are never counted: its tasks are cut off with them,
// and the records counted when they commit again.
func countCommitted(tasks []*partition.Task) {
	for _, t := range tasks {
		t.CountCommitted()
	}
}

// notCommitted handles an end that did not confirm a commit: an
// unconfirmed end is settled first (settle), then whether the transaction
// landed decides; either way every task starts over from the committed
// offsets. It reports false when the pipeline cannot go on.
func (x *Transactions) notCommitted(ctx context.Context, c txnCut, err error) bool {
	d := x.d
	if err != nil && !c.final && fatalProducer(err) {
		x.brokeAtEnd(c, err)
		return false
	}
	var from map[tp]int64
	if err != nil && !c.final {
		var ok bool
		if from, ok = x.settle(ctx, c.tasks, err); !ok {
			return false
		}
	}
	landed, ok := x.landed(c.marks, from)
	if !ok {
		return false
	}
	if landed {
		countCommitted(c.tasks)
		d.Stats.Commits.Add(1)
		d.Stats.TxnCommitted.Add(1)
		d.Log.Info("the unconfirmed transaction had committed; every partition goes on from the broker's committed offset", "records", c.released)
	} else {
		d.Stats.TxnAborted.Add(1)
		why := c.why
		if why == "" {
			why = "the commit was refused (the group moved on: this member was fenced or rebalanced)"
			if err != nil {
				why += ": " + err.Error()
			}
		}
		d.Log.Warn("transaction aborted; every partition starts over from its committed offset", "reason", why, "records", c.released)
	}
	x.restartTasks(c.tasks, from)
	return true
}

// beginNext begins the next transaction after an end that returned
// endErr. It reports false when it cannot: the producer's state is fatal
// (franz-go keeps the error that made it so), and only a new client can
// go on — the pipeline broke, and the runner rebuilds it (Deps.Broke:
// scheduler/rebuild.go).
// Both errors are named: the end's says what happened, Begin's why it is
// final.
func (x *Transactions) beginNext(endErr error) bool {
	berr := x.sess.Begin()
	if berr == nil {
		return true
	}
	if endErr != nil && endErr.Error() != berr.Error() {
		berr = fmt.Errorf("%w (the transaction's end had failed: %v)", berr, endErr)
	}
	x.d.Broke(fmt.Errorf("transactional producer %q cannot go on (fenced by a newer producer with the same transactional id, or failed): %w", x.txnID, berr))
	return false
}

// fatalProducer reports whether err, an End's, is one franz-go keeps as
// its producer ID's state and does not recover from: every later Begin
// and EndTransaction of this client fails with it, or (an unconfirmed
// end's retry) reports an abort it could not make. Under KIP-890 part 2
// (Kafka 4's transaction.version 2) INVALID_PRODUCER_ID_MAPPING and
// INVALID_PRODUCER_EPOCH are such, as PRODUCER_FENCED and
// INVALID_TXN_STATE always are: a transaction coordinator that failed
// over while an EndTxn was in flight has answered with the first.
func fatalProducer(err error) bool {
	for _, fatal := range []error{kerr.InvalidProducerIDMapping, kerr.InvalidProducerEpoch, kerr.ProducerFenced, kerr.InvalidTxnState} {
		if errors.Is(err, fatal) {
			return true
		}
	}
	return false
}

// brokeAtEnd gives up the pipeline's member after an End that left its
// producer ID fatal (fatalProducer): the transaction cannot be settled
// with this client — its abort would be refused, and the committed
// offsets read with RequireStable would wait for the broker to time the
// transaction out (transactions.timeout) — and the next Begin would fail
// anyway. So the tasks are cut off at once (nothing they finish later is
// released) and the pipeline says it broke: the runner rebuilds it with a
// new client of the same transactional id, whose InitProducerID fences
// this epoch and has the coordinator abort the open transaction (or
// complete one it had prepared to commit); its member rejoins and every
// partition starts over from the group's committed offsets, read stable.
// The tasks are detached and retired in the background, as on a revoke:
// their records will never be released, and the rebuild's stop would
// otherwise wait shutdown.drain_timeout for them. Called with the
// transaction gate held.
func (x *Transactions) brokeAtEnd(c txnCut, err error) {
	d := x.d
	parts := map[string][]int32{}
	for _, t := range c.tasks {
		parts[t.Topic] = append(parts[t.Topic], t.Partition)
	}
	d.Forget(parts)
	tasks := d.Tasks.Detach(parts)
	for _, t := range tasks {
		t.Dead.Store(true)
		t.Stop()
	}
	after := d.Gone(tasks)
	gone := func() { partition.Retire(tasks); after() }
	if !d.Background.Go(gone) {
		gone() // shutting down: no background work any more
	}
	d.Stats.TxnAborted.Add(1)
	d.Log.Warn("the transaction's end failed and the transactional producer cannot go on; the pipeline's client is rebuilt and every partition starts over from its committed offset",
		"err", err, "records", c.released)
	d.Broke(fmt.Errorf("transactional producer %q cannot go on after its transaction's end failed: %w", x.txnID, err))
}

// restartTasks cuts tasks off after an abort and replaces them with fresh
// tasks for the same partitions (partition.Set.Restart), which franz-go
// has rewound to their committed offsets: from, where the end was settled,
// else the last known. Called with the transaction gate held: the old tasks'
// workers may be blocked on it, so they are waited for elsewhere.
func (x *Transactions) restartTasks(old []*partition.Task, from map[tp]int64) {
	d := x.d
	for _, t := range old {
		t.Dead.Store(true)
		t.Stop()
	}
	committed := make([]int64, len(old))
	for i, t := range old {
		committed[i] = t.Committed.Load()
		if off, ok := from[tp{Topic: t.Topic, Partition: t.Partition}]; ok {
			committed[i] = off
		}
	}
	d.Tasks.Restart(old, committed)
	d.Background.Go(func() { partition.Retire(old) })
}

// settle handles an end whose outcome this host does not know: End
// failed after its EndTxn was sent (the transaction coordinator died or
// moved, the connection dropped, franz-go's retries ran out). The
// transaction may have committed — offsets and outputs together — or not.
// Restarting from the offsets this host last saw committed would process
// a committed transaction's records again: duplicates. So settle first
// ends the transaction for certain (EndTransaction with TryAbort: franz-go
// reloads the producer ID, which fences the old epoch; the coordinator
// completes a prepared commit or aborts the rest before it answers), and
// then reads the group's committed offsets from the broker with
// RequireStable (answered only once no transactional commit is pending),
// seeks every partition there and reports them for the new tasks. It
// retries until it succeeds or ctx ends (the pipeline stops): a
// coordinator failover takes seconds, and exiting would only move the
// same work to a restart. It reports false when the pipeline cannot go on.
func (x *Transactions) settle(ctx context.Context, tasks []*partition.Task, endErr error) (map[tp]int64, bool) {
	d := x.d
	d.Log.Warn("the transaction's end is unconfirmed: settling it, then reading the committed offsets from the broker", "err", endErr)
	start := time.Now()
	var lastLog time.Time
	wait := func(what string, err error, attempt int) bool {
		if time.Since(lastLog) > 10*time.Second {
			d.Log.Warn("settling an unconfirmed transaction: "+what+" failed; retrying", "err", err, "for", time.Since(start).Round(time.Millisecond))
			lastLog = time.Now()
		}
		d := min(100*time.Millisecond<<min(attempt, 5), 3*time.Second)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	for attempt := 0; ; attempt++ {
		err := d.Client.EndTransaction(ctx, kgo.TryAbort) // nil at once if none is open
		if err == nil {
			break
		}
		if !wait("ending the transaction", err, attempt) {
			return nil, false
		}
	}
	want := map[string][]int32{}
	for _, t := range tasks {
		want[t.Topic] = append(want[t.Topic], t.Partition)
	}
	from := map[tp]int64{}
	for attempt := 0; ; attempt++ {
		err := x.stableOffsets(ctx, want, from)
		if err == nil {
			break
		}
		if !wait("reading the committed offsets", err, attempt) {
			return nil, false
		}
	}
	seek := map[string]map[int32]kgo.EpochOffset{}
	for k, off := range from {
		if seek[k.Topic] == nil {
			seek[k.Topic] = map[int32]kgo.EpochOffset{}
		}
		seek[k.Topic][k.Partition] = kgo.EpochOffset{Epoch: -1, Offset: off}
	}
	d.Client.SetOffsets(seek)
	d.Stats.TxnSettled.Add(1)
	d.Log.Info("unconfirmed transaction settled; the partitions start over from the broker's committed offsets", "took", time.Since(start).Round(time.Millisecond), "partitions", len(from))
	return from, true
}

// landed compares a settled end's offsets (from) with what the transaction
// would have committed (marks). The end committed after all if the broker
// holds the marks: the pipeline is told of the commit (Deps.OnCommitted), as
// after a confirmed one, so the partitions' state is flushed up to them
// before the new tasks open their views. A partition
// at neither its mark nor its last known commit has state this host cannot
// account for: a pipeline with state then fails (a restart restores the
// stores from the changelog); without state, the broker's offset is the
// truth and the tasks go on from it.
func (x *Transactions) landed(marks map[tp]mark, from map[tp]int64) (landed, ok bool) {
	d := x.d
	for k, m := range marks {
		off, known := from[k]
		switch {
		case !known || off == m.t.Committed.Load():
		case off == m.off:
			m.t.Committed.Store(off)
			d.OnCommitted(m.t, off)
			landed = true
		case d.Pipeline.State.Enabled:
			d.Fail(fmt.Errorf("pipeline %s: after an unconfirmed transaction, %s[%d] is committed at %d, neither at this host's last commit (%d) nor at the transaction's (%d): its state cannot be accounted for, so the host stops and the next owner restores it from the changelog", d.Pipeline.Name, k.Topic, k.Partition, off, m.t.Committed.Load(), m.off))
			return false, false
		default:
			d.Log.Warn("after an unconfirmed transaction, a partition's committed offset is neither the last known nor the transaction's; going on from the broker's", "topic", k.Topic, "partition", k.Partition, "committed", off)
		}
	}
	return landed, true
}

// stableOffsets reads the group's committed offsets of want into from,
// failing while any is unreadable or a transactional commit is pending.
// A partition with no commit is left out (it starts where it would).
func (x *Transactions) stableOffsets(ctx context.Context, want map[string][]int32, from map[tp]int64) error {
	d := x.d
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(d.Client).FetchOffsets(kadm.RequireStable(fctx), d.Group)
	if err != nil {
		return err
	}
	for topic, parts := range want {
		for _, part := range parts {
			o, ok := resp.Lookup(topic, part)
			if !ok {
				continue
			}
			if o.Err != nil {
				return fmt.Errorf("%s[%d]: %w", topic, part, o.Err)
			}
			if o.At >= 0 {
				from[tp{Topic: topic, Partition: part}] = o.At
			}
		}
	}
	return nil
}

// mark is a partition's watermark to commit in a transaction.
type mark struct {
	t   *partition.Task
	off int64
}

// leaving handles revoked or lost partitions under exactly_once: their
// tasks (detached by the source: source.Group.Revoked, Lost) are cut off
// at once (the open transaction aborts at its cut, so nothing they
// released commits) and retired in the background. It runs inside
// franz-go's session callback, which End also waits for, so it must not
// wait for the transaction gate.
func (x *Transactions) leaving(parts map[string][]int32, tasks []*partition.Task) {
	d := x.d
	n := 0
	for _, ps := range parts {
		n += len(ps)
	}
	if n == 0 {
		return
	}
	x.revokedSince.Store(true)
	d.Forget(parts)
	for _, t := range tasks {
		t.Dead.Store(true)
		t.Stop()
		d.Log.Debug("partition revoked", "topic", t.Topic, "partition", t.Partition)
	}
	after := d.Gone(tasks)
	gone := func() { partition.Retire(tasks); after() }
	if !d.Background.Go(gone) {
		gone() // shutting down: no background work any more
	}
}

// Final commits the last transaction, with the watermarks of the drained
// tasks (still attached: the cut reads them from the pipeline), unless the
// pipeline failed.
func (x *Transactions) Final(ctx context.Context, _ []*partition.Task) {
	if !x.d.Failed.Load() && !x.cut(ctx, true) {
		x.d.Log.Error("the last transaction did not commit; its records will be processed again by the partitions' next owner")
	}
}

// Close closes the client through its session.
func (x *Transactions) Close() { x.sess.Close() }
