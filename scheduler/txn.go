package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// maxOutputRecordBytes bounds one output record under exactly_once. A record
// the producer would refuse (over the broker's default message.max.bytes)
// would abort every transaction it is retried in; it is failed up front
// instead, and its input takes the retry/dead-letter path.
const maxOutputRecordBytes = 1_000_000

// txnLoop is the exactly_once poll loop: it fetches, dispatches, and cuts a
// transaction whenever one is due. Polling and ending a transaction never
// overlap (franz-go requires it).
func (p *Pipeline) txnLoop(ctx context.Context) {
	defer close(p.pollDone)
	if err := p.sess.Begin(); err != nil {
		p.fail(fmt.Errorf("pipeline %s: beginning a transaction: %w", p.pc.Name, err))
		return
	}
	interval := p.pc.Transactions.Interval
	next := time.Now().Add(interval)
	var lastErr time.Time
	for {
		pctx, cancel := context.WithDeadline(ctx, next)
		p.pollStop.Store(&cancel)
		if p.released.Load() >= int64(p.pc.Transactions.MaxRecords) {
			cancel() // a cut is due already
		}
		fetches := p.cl.PollRecords(pctx, 10000)
		p.pollStop.Store(nil)
		cancel()
		if fetches.IsClientClosed() || ctx.Err() != nil {
			p.cl.AllowRebalance()
			return
		}
		p.logFetchErrors(fetches, &lastErr)
		p.dispatch(fetches)
		p.cl.AllowRebalance()
		if !time.Now().Before(next) || p.released.Load() >= int64(p.pc.Transactions.MaxRecords) {
			if !p.cut(false) {
				return
			}
			next = time.Now().Add(interval)
		}
	}
}

// released counts a record released into the open transaction and, at
// transactions.max_records, ends the poll in progress so the loop cuts.
func (p *Pipeline) countReleased() {
	if p.released.Add(1) == int64(p.pc.Transactions.MaxRecords) {
		if c := p.pollStop.Load(); c != nil {
			(*c)()
		}
	}
}

// txnFailed makes the open transaction abort at its cut.
func (p *Pipeline) txnFailed(err error) {
	p.txnErr.CompareAndSwap(nil, &err)
}

// releaseInTxn runs a release action of t under exactly_once: while no
// transaction is being cut, and not at all once t was cut off (its partition
// revoked or its transaction aborted). The release queue calls it for every
// action, so no per-record wrapper is allocated.
func (t *task) releaseInTxn(action func()) {
	p := t.p
	p.txnGate.RLock()
	defer p.txnGate.RUnlock()
	if t.dead.Load() {
		return
	}
	action()
	p.countReleased()
}

// cut ends the open transaction — committing each partition's watermark
// with the outputs released since the last cut, or aborting — and, unless
// final, begins the next. It reports false when the pipeline cannot go on
// (its transactional producer is fenced or failed).
func (p *Pipeline) cut(final bool) bool {
	p.txnGate.Lock()
	defer p.txnGate.Unlock()
	p.commitMu.Lock()
	defer p.commitMu.Unlock()
	released := p.released.Swap(0)
	p.mu.Lock()
	tasks := make([]*task, 0, len(p.tasks))
	for _, t := range p.tasks {
		tasks = append(tasks, t)
	}
	p.mu.Unlock()
	type mark struct {
		t   *task
		off int64
	}
	marks := map[tp]mark{}
	for _, t := range tasks {
		if off, _, ok := t.tr.watermark(); ok && off != t.committed {
			marks[tp{t.topic, t.partition}] = mark{t, off}
		}
	}
	var why string
	if e := p.txnErr.Swap(nil); e != nil {
		why = "a produce in it failed: " + (*e).Error()
	}
	if p.revokedSince.Swap(false) {
		why = "partitions were revoked or lost since it began"
	}
	empty := why == "" && len(marks) == 0 && released == 0
	if empty && !final {
		return true // nothing to commit: keep the transaction open
	}
	commit := kgo.TryCommit
	if why != "" {
		commit = kgo.TryAbort
	}
	ctx := kgo.PreTxnCommitFnContext(context.Background(), func(req *kmsg.TxnOffsetCommitRequest) error {
		// franz-go fills in the polled positions; commit the watermarks.
		topics := req.Topics[:0]
		for _, rt := range req.Topics {
			parts := rt.Partitions[:0]
			for _, rp := range rt.Partitions {
				if m, ok := marks[tp{rt.Topic, rp.Partition}]; ok {
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
	start := time.Now()
	committed, err := p.sess.End(ctx, commit)
	switch {
	case committed && empty:
		// The last, empty transaction of a shutdown: nothing was in it.
	case committed:
		for _, m := range marks {
			m.t.committed = m.off
		}
		p.stats.Commits.Add(1)
		p.stats.TxnCommitted.Add(1)
		p.log.Debug("transaction committed", "records", released, "partitions", len(marks), "took", time.Since(start))
	default:
		p.stats.TxnAborted.Add(1)
		if why == "" {
			why = "the commit was refused (the group moved on: this member was fenced or rebalanced)"
			if err != nil {
				why += ": " + err.Error()
			}
		}
		p.log.Warn("transaction aborted; every partition starts over from its committed offset", "reason", why, "records", released)
		p.restartTasks(tasks)
	}
	if final {
		return err == nil
	}
	if berr := p.sess.Begin(); berr != nil {
		if err == nil {
			err = berr
		}
		p.fail(fmt.Errorf("pipeline %s: transactional producer %q cannot go on (fenced by a newer producer with the same transactional id, or failed): %w", p.pc.Name, p.txnID, err))
		return false
	}
	return true
}

// restartTasks cuts tasks off after an abort and replaces them with fresh
// tasks for the same partitions, which franz-go has rewound to their
// committed offsets. Called with the transaction gate held: the old tasks'
// workers may be blocked on it, so they are waited for elsewhere.
func (p *Pipeline) restartTasks(old []*task) {
	for _, t := range old {
		t.dead.Store(true)
		t.stop()
	}
	p.mu.Lock()
	for _, t := range old {
		k := tp{t.topic, t.partition}
		if p.tasks[k] != t || p.stopped.Load() {
			continue
		}
		nt := newTask(p, t.topic, t.partition, nil)
		nt.committed = t.committed
		p.tasks[k] = nt
		nt.start()
	}
	p.mu.Unlock()
	go retire(old)
}

// retire interrupts cut-off tasks and releases their resources.
func retire(tasks []*task) {
	for _, t := range tasks {
		t.abort()
	}
	for _, t := range tasks {
		t.waitWorkers(time.Now().Add(time.Minute))
		t.close()
	}
}

// revokeTxn handles revoked or lost partitions under exactly_once: their
// tasks are cut off at once (the open transaction aborts at its cut, so
// nothing they released commits) and retired in the background. It runs
// inside franz-go's session callback, which End also waits for, so it must
// not wait for the transaction gate.
func (p *Pipeline) revokeTxn(parts map[string][]int32) {
	n := 0
	for _, ps := range parts {
		n += len(ps)
	}
	if n == 0 {
		return
	}
	p.revokedSince.Store(true)
	tasks := p.detach(parts)
	for _, t := range tasks {
		t.dead.Store(true)
		t.stop()
		p.log.Debug("partition revoked", "topic", t.topic, "partition", t.partition)
	}
	go retire(tasks)
}

// stopTxn shuts an exactly_once pipeline down: stop fetching, drain the
// tasks, commit the last transaction, leave the group.
func (p *Pipeline) stopTxn(ctx context.Context) {
	if p.pollCancel != nil {
		p.pollCancel()
		<-p.pollDone
	}
	p.mu.Lock()
	tasks := make([]*task, 0, len(p.tasks))
	for _, t := range p.tasks {
		tasks = append(tasks, t)
	}
	p.mu.Unlock()
	p.drain(tasks)
	if !p.failed.Load() && !p.cut(true) {
		p.log.Error("the last transaction did not commit; its records will be processed again by the partitions' next owner")
	}
	if err := p.cl.LeaveGroupContext(ctx); err != nil {
		p.log.Warn("leaving the group", "err", err)
	}
	for _, t := range p.detachAll() {
		t.dead.Store(true)
		t.stop()
		retire([]*task{t})
	}
	close(p.stopCommit)
	p.wg.Wait()
	p.sess.Close()
}

// detachAll removes every task.
func (p *Pipeline) detachAll() []*task {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*task, 0, len(p.tasks))
	for k, t := range p.tasks {
		out = append(out, t)
		delete(p.tasks, k)
	}
	return out
}

// fail reports an error the pipeline cannot recover from; the host stops.
func (p *Pipeline) fail(err error) {
	if !p.failed.CompareAndSwap(false, true) {
		return
	}
	p.log.Error("pipeline failed", "err", err)
	if p.onFail != nil {
		p.onFail(err)
	}
}

// outputTooLarge reports whether kr is over what the producer may send under
// exactly_once.
func outputTooLarge(kr *kgo.Record) bool {
	n := len(kr.Key) + len(kr.Value) + len(kr.Topic) + 64
	for _, h := range kr.Headers {
		n += len(h.Key) + len(h.Value) + 8
	}
	return n > maxOutputRecordBytes
}
