package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/failhdr"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tracing"
)

// task owns one assigned partition: its fetched records, its offset tracker
// and its pool of module instances. Each instance has one worker goroutine
// (its only user); workers pull the next runnable record, where the pipeline's
// ordering decides what is runnable:
//
//   - partition: one lane for the whole partition: one record at a time, in
//     offset order;
//   - key: one lane per key: one record of a key at a time, in offset order,
//     keys concurrently; records with a null key have no order constraint;
//   - none: any record on any free instance.
//
// Between min and max instances run per task: the minimum is kept warm, the
// rest is borrowed from the host's Budget when records keep waiting (the
// workers it has do not keep up), and given back after
// instances.idle_timeout without a record. The most recently used idle worker
// takes the next record, so that steady traffic concentrates on as few
// instances as keep up with it and the others time out (dispatch.go; see
// RATIONALE.md, "Pools and ordering").
//
// Lock order, outermost first: Pipeline.mu, releaser.mu, task.mu, Budget.mu.
type task struct {
	p         *Pipeline
	topic     string
	partition int32
	tr        tracker
	skip      *doneSet // offsets the previous owner recorded as done

	// Guarded by p.commitMu.
	committed     int64
	committedMeta string

	mu       sync.Mutex
	free     []*kgo.Record    // runnable, no order constraint
	lanes    map[string]*lane // key ordering
	single   lane             // partition ordering
	ready    []*lane          // lanes with records waiting and none in progress
	queued   int              // records waiting to start
	inFlight int              // fetched, not done
	bytes    int              // key+value bytes of records in flight
	started  int              // started, not done
	paused   bool
	stopping bool
	closed   bool
	workers  int             // live workers, not counting those retiring
	live     map[int]*worker // by slot

	// Dispatch (dispatch.go).
	idleW     []*worker   // workers waiting for work, least recently used first
	blocked   int         // workers waiting that may not take a record (async or output bounds)
	waitSince time.Time   // since when records have been runnable without pause (zero: none is)
	kick      *time.Timer // runs dispatch when records fall due or have waited instances.grow_after
	kickAt    time.Time   // when kick fires (zero: not set)

	// instances: auto (autosize.go); sizer is nil otherwise.
	sizer          *poolSizer
	capped         int       // times records waited grow_after with the pool at the target, this window
	ctlAt          time.Time // when the window began
	ctlWait, ctlRn int64     // callWait and callRun then
	ctlCalls       int64     // and calls
	// The guest calls' wait for a core and run time, in nanoseconds,
	// added by the workers after each call (read by the sizer).
	callWait, callRun atomic.Int64
	calls             atomic.Int64 // times a worker accounted calls (one or more each)
	warm              atomic.Int32 // workers whose first instance is created

	stopCh chan struct{}
	wg     sync.WaitGroup // workers
	ctx    context.Context
	cancel context.CancelFunc

	rel    *releaser     // release order, under ordering partition
	ps     *Stats        // the partition's counters (kept across assignments)
	mattrs attribute.Set // metric attributes

	dead atomic.Bool // cut off (exactly_once): nothing more of it is released

	highWatermark atomic.Int64
	position      atomic.Int64 // one past the highest offset started
}

type lane struct {
	key    string
	q      []*kgo.Record
	busy   bool // a record of the lane is in progress
	listed bool // in task.ready
}

func newTask(p *Pipeline, topic string, partition int32, skip *doneSet) *task {
	ctx, cancel := context.WithCancel(context.Background())
	t := &task{p: p, topic: topic, partition: partition, skip: skip, committed: -1, ps: p.partitionStats(topic, partition),
		stopCh: make(chan struct{}), ctx: ctx, cancel: cancel}
	// The timer's function runs on a goroutine of its own; stop stops it,
	// and a run racing with stop finds the task stopping and does nothing.
	t.kick = time.AfterFunc(time.Hour, t.dispatch)
	t.kick.Stop()
	if p.pc.Instances.Auto && !p.secondary {
		t.sizer = newPoolSizer(p.pc.Instances.Min, p.pc.Instances.Max)
		t.ctlAt = time.Now()
	}
	t.mattrs = attribute.NewSet(attribute.String("pipeline", p.pc.Name), attribute.String("topic", topic), attribute.Int("partition", int(partition)))
	switch p.pc.Ordering {
	case config.OrderKey:
		t.lanes = map[string]*lane{}
	case config.OrderPartition:
		t.rel = &releaser{}
	}
	if p.eos {
		// Outcomes enter a transaction in offset order, so that a commit
		// covers exactly the records whose outputs it carries.
		t.rel = &releaser{tx: t}
	}
	return t
}

// start launches the task's minimum instances.
func (t *task) start() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := 0; i < t.p.pc.Instances.Min; i++ {
		if t.p.budget.reserve(t.p.instanceBytes) {
			t.p.log.Warn("instance budget exceeded by task minimums (host.max_instances / host.max_instance_memory)", "topic", t.topic, "partition", t.partition)
		}
		t.spawnLocked(false)
	}
}

// addWorkerLocked registers w under the lowest free slot.
func (t *task) addWorkerLocked(w *worker) int {
	if t.live == nil {
		t.live = map[int]*worker{}
	}
	slot := 0
	for t.live[slot] != nil {
		slot++
	}
	t.live[slot] = w
	return slot
}

func (t *task) spawnLocked(borrowed bool) {
	t.workers++
	t.wg.Add(1)
	go t.worker(borrowed)
}

// enqueue takes a fetched batch (in offset order). Called from the poll loop.
func (t *task) enqueue(recs []*kgo.Record) {
	n, nb := 0, 0
	t.mu.Lock()
	for _, r := range recs {
		if t.skip != nil {
			if t.skip.has(r.Offset) {
				t.tr.add(r.Offset, r.LeaderEpoch)
				t.tr.done(r.Offset)
				t.p.stats.Skipped.Add(1)
				t.ps.Skipped.Add(1)
				if p := r.Offset + 1; p > t.position.Load() {
					t.position.Store(p) // skipped records count as consumed for lag
				}
				continue
			}
			if r.Offset >= t.skip.base+t.skip.span {
				t.skip = nil
			}
		}
		t.tr.add(r.Offset, r.LeaderEpoch)
		n++
		nb += len(r.Key) + len(r.Value)
		t.placeLocked(r)
	}
	t.queued += n
	t.inFlight += n
	t.bytes += nb
	t.p.budget.inFlight.Add(int64(n))
	t.p.stats.Fetched.Add(int64(n))
	t.ps.Fetched.Add(int64(n))
	if !t.paused && (t.inFlight >= t.p.pc.MaxInFlight || t.bytes >= t.p.pc.MaxInFlightBytes || t.p.budget.overInFlight()) {
		t.paused = true
		t.p.cl.PauseFetchPartitions(map[string][]int32{t.topic: {t.partition}})
	}
	t.dispatchLocked()
	t.mu.Unlock()
}

// placeLocked makes r runnable under the pipeline's ordering.
func (t *task) placeLocked(r *kgo.Record) {
	var ln *lane
	switch t.p.pc.Ordering {
	case config.OrderPartition:
		ln = &t.single
	case config.OrderKey:
		if r.Key == nil {
			t.free = append(t.free, r)
			return
		}
		ln = t.lanes[string(r.Key)]
		if ln == nil {
			ln = &lane{key: string(r.Key)}
			t.lanes[ln.key] = ln
		}
	default:
		t.free = append(t.free, r)
		return
	}
	ln.q = append(ln.q, r)
	if !ln.busy && !ln.listed {
		ln.listed = true
		t.ready = append(t.ready, ln)
	}
}

func (t *task) runnableLocked() bool {
	if t.p.secondary {
		return len(t.free) > 0 && !dueAt(t.free[0]).After(time.Now())
	}
	return len(t.free) > 0 || len(t.ready) > 0
}

// pickLocked takes the runnable record with the lowest offset (keeping the
// watermark moving), or nil.
func (t *task) pickLocked() (*kgo.Record, *lane) {
	if t.p.secondary && !t.runnableLocked() {
		return nil, nil // the oldest retry record is not due yet: neither is any after it
	}
	var lr *kgo.Record
	if len(t.ready) > 0 {
		lr = t.ready[0].q[0]
	}
	if len(t.free) > 0 && (lr == nil || t.free[0].Offset < lr.Offset) {
		r := t.free[0]
		t.free[0] = nil
		t.free = t.free[1:]
		return r, nil
	}
	if lr == nil {
		return nil, nil
	}
	ln := t.ready[0]
	t.ready[0] = nil
	t.ready = t.ready[1:]
	ln.listed = false
	ln.busy = true
	ln.q[0] = nil
	ln.q = ln.q[1:]
	return lr, ln
}

// release frees ln after its record finished processing (its produces may
// still be in flight: produce order per partition keeps outputs in order).
func (t *task) release(ln *lane) {
	t.mu.Lock()
	if ln != nil {
		ln.busy = false
		switch {
		case len(ln.q) > 0:
			ln.listed = true
			t.ready = append(t.ready, ln)
		case t.lanes != nil:
			delete(t.lanes, ln.key)
		}
	}
	t.dispatchLocked()
	t.mu.Unlock()
}

// stop makes the task take no further record; workers finish the record in
// progress. Records not started stay uncommitted: the partition's next owner
// processes them.
func (t *task) stop() {
	t.mu.Lock()
	if t.stopping {
		t.mu.Unlock()
		return
	}
	t.stopping = true
	t.free, t.ready, t.lanes, t.single.q = nil, nil, nil, nil
	t.queued = 0
	t.kick.Stop()
	if t.paused {
		t.paused = false
		t.p.cl.ResumeFetchPartitions(map[string][]int32{t.topic: {t.partition}})
	}
	t.mu.Unlock()
	close(t.stopCh)
}

// abort interrupts guest calls in progress (they fail as canceled and their
// records stay uncommitted).
func (t *task) abort() { t.cancel() }

// close releases the task's share of the host's in-flight records; records
// finishing later no longer count.
func (t *task) close() {
	t.mu.Lock()
	first := !t.closed
	if first {
		t.closed = true
		t.p.budget.inFlight.Add(-int64(t.inFlight))
	}
	t.mu.Unlock()
	if first && t.rel != nil {
		// Not under t.mu: settling takes the releaser's lock, then t.mu.
		t.rel.abandon(t.p.budget.releaseOutputs)
	}
}

// waitWorkers waits for every worker to exit, until deadline; it reports
// whether they did.
func (t *task) waitWorkers(deadline time.Time) bool {
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(time.Until(deadline)):
		return false
	}
}

func (t *task) startedPending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.started
}

// maybeResume resumes the partition's fetching once the task drained to half
// of its bounds and the host is under its own.
func (t *task) maybeResume() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.paused && !t.stopping && t.inFlight <= t.p.pc.MaxInFlight/2 && t.bytes <= t.p.pc.MaxInFlightBytes/2 && !t.p.budget.overInFlight() {
		t.paused = false
		t.p.cl.ResumeFetchPartitions(map[string][]int32{t.topic: {t.partition}})
	}
}

func (t *task) lag() int64 {
	l := t.highWatermark.Load() - t.position.Load()
	if l < 0 {
		return 0
	}
	return l
}

// counts returns the task's instance and record gauges.
func (t *task) counts() (workers, busy, inFlight, queued int, paused bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.workers, t.workers - len(t.idleW), t.inFlight, t.queued, t.paused
}

// sizeState returns the instances: auto target and its last change; ok is
// false with a fixed pool.
func (t *task) sizeState() (target int, reason, detail string, at time.Time, ok bool) {
	if t.sizer == nil {
		return 0, "", "", time.Time{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sizer.target, t.sizer.reason, t.sizer.detail, t.sizer.changedAt, true
}

func (t *task) finish(r *kgo.Record) {
	if !t.tr.done(r.Offset) {
		return
	}
	t.p.stats.Done.Add(1)
	t.ps.Done.Add(1)
	t.mu.Lock()
	t.inFlight--
	t.started--
	t.bytes -= len(r.Key) + len(r.Value)
	if !t.closed {
		t.p.budget.inFlight.Add(-1)
	}
	paused := t.paused
	t.mu.Unlock()
	if paused {
		t.p.signalFlow()
	}
}

// failure says why an attempt failed and whether it may be retried.
type failure struct {
	kind      string
	msg       string
	retryable bool
}

func (t *task) classify(res *host.Result) failure {
	if f := res.Fault(); f != nil {
		kind := "fault." + string(f.Kind)
		return failure{kind, res.Err.Error(), t.p.retryable[kind]}
	}
	if res.Status == abi.StatusFail {
		return failure{KindGuestFail, res.Err.Error(), false}
	}
	return failure{KindGuestRetry, res.Err.Error(), true}
}

func historyEntry(f failure) string { return failhdr.NewEntry(0, f.kind, f.msg).Text }

// fail routes a failed attempt: to the retry topic of the next attempt's
// backoff tier when it may be retried there, otherwise to the dead-letter
// topic. Either way r is done once that produce is acknowledged.
func (t *task) fail(r *kgo.Record, attempt int, f failure, history []string, tr *tracing.Attempt) {
	rc := &t.p.pc.Retry
	if f.retryable && attempt < rc.MaxAttempts && rc.Mode == config.RetryTopics {
		delay, tier := t.p.pc.Delay(attempt + 1)
		hs := t.failureHeaders(r, attempt, attempt+1, f, history)
		hs = append(hs, kgo.RecordHeader{Key: HeaderDue, Value: strconv.AppendInt(nil, time.Now().Add(delay).UnixMilli(), 10)}) // the one header failureHeaders leaves out
		t.produceFailure(r, t.p.pc.TierTopic(tier), hs, func(s *Stats) *atomic.Int64 { return &s.Retried }, tr, tracing.ProduceRetry, f)
		return
	}
	t.produceFailure(r, t.p.pc.DeadLetterTopic, t.failureHeaders(r, attempt, attempt, f, history), func(s *Stats) *atomic.Int64 { return &s.DeadLetter }, tr, tracing.ProduceDeadLetter, f)
}

// withTraceContext returns hs with the trace context replaced by tp and ts
// (when tp is set: the record is traced; otherwise hs as it is, so that an
// upstream trace context passes through).
func withTraceContext(hs []kgo.RecordHeader, tp, ts []byte) []kgo.RecordHeader {
	if tp == nil {
		return hs
	}
	out := hs[:0:0]
	for _, h := range hs {
		if h.Key != tracing.HeaderTraceparent && h.Key != tracing.HeaderTracestate {
			out = append(out, h)
		}
	}
	out = append(out, kgo.RecordHeader{Key: tracing.HeaderTraceparent, Value: tp})
	if ts != nil {
		out = append(out, kgo.RecordHeader{Key: tracing.HeaderTracestate, Value: ts})
	}
	return out
}

// failureHeaders builds a failed record's headers: its own (not wasmstream's),
// then what internal/failhdr encodes: where it was first consumed, its error
// history with the inline attempts and this failure appended, and
// attemptHeader as the attempt. What r's wasmstream.* headers are believed
// is priorOf's decision: nothing on an input topic.
func (t *task) failureHeaders(r *kgo.Record, attempt, attemptHeader int, f failure, inline []string) []kgo.RecordHeader {
	now := time.Now().UTC()
	st, _ := t.priorOf(r)
	if !t.p.secondary {
		st.FirstFailure = now
	}
	n := attempt - len(inline)
	for _, e := range inline {
		st.History = append(st.History, failhdr.Entry{Attempt: n, Text: e})
		n++
	}
	st.History = append(st.History, failhdr.NewEntry(attempt, f.kind, f.msg))
	st.Pipeline, st.Kind, st.Error = t.p.pc.Name, f.kind, f.msg
	st.Attempt, st.ModuleDigest, st.FailedAt = attemptHeader, t.p.Module().Info().Digest, now
	st.Due = time.Time{}
	hs := failhdr.Own(r.Headers)
	return failhdr.Encode(slices.Grow(hs, 12+len(st.History)), &st)
}

// produceOutputs produces a succeeded record's outputs; the record is done
// once the broker acknowledged all of them. If one cannot be produced, the
// record is dead-lettered instead (outputs already acknowledged stay: this is
// at-least-once).
// held is what the outputs count in the host's held outputs: given back once
// the broker answered for every one of them.
func (t *task) produceOutputs(r *kgo.Record, attempt int, outs []abi.Output, held int64, tr *tracing.Attempt) {
	if t.p.eos {
		t.produceOutputsTxn(r, attempt, outs, held, tr)
		return
	}
	remaining := atomic.Int32{}
	remaining.Store(int32(len(outs)))
	var failed atomic.Pointer[error]
	for i := range outs {
		kr := t.outputRecord(&outs[i])
		tp, ts, sent := tr.Produce(tracing.ProduceOutput, kr.Topic)
		kr.Headers = withTraceContext(kr.Headers, tp, ts)
		t.p.cl.Produce(context.Background(), kr, func(pr *kgo.Record, err error) {
			sent(pr.Partition, pr.Offset, err)
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			} else {
				t.p.stats.Outputs.Add(1)
				t.ps.Outputs.Add(1)
			}
			if remaining.Add(-1) != 0 {
				return
			}
			t.p.budget.releaseOutputs(held)
			if e := failed.Load(); e != nil {
				// Not from inside a promise: fail produces again.
				go t.fail(r, attempt, failure{KindProduce, "producing an output failed: " + (*e).Error(), true}, nil, tr)
				return
			}
			t.finish(r)
			tr.End("ok", "", "")
		})
	}
}

// outputRecord is the record an output is produced as.
func (t *task) outputRecord(o *abi.Output) *kgo.Record {
	topic := o.Topic
	if topic == "" {
		topic = t.p.pc.Output
	}
	kr := &kgo.Record{Topic: topic, Key: o.Key, Value: o.Value, Partition: o.Partition}
	if len(o.Headers) > 0 {
		kr.Headers = make([]kgo.RecordHeader, len(o.Headers))
		for j, h := range o.Headers {
			kr.Headers[j] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	return kr
}

// produceOutputsTxn releases a succeeded record's outputs into the open
// transaction (exactly_once): the record is done at once, and the
// transaction's cut commits it only if every produce was acknowledged
// (otherwise the transaction aborts and the record is processed again).
func (t *task) produceOutputsTxn(r *kgo.Record, attempt int, outs []abi.Output, held int64, tr *tracing.Attempt) {
	krs := make([]*kgo.Record, len(outs))
	for i := range outs {
		krs[i] = t.outputRecord(&outs[i])
		if outputTooLarge(krs[i]) {
			t.p.budget.releaseOutputs(held)
			t.fail(r, attempt, failure{KindProduce, fmt.Sprintf("output %d to %s is over the %d bytes a transactional produce may carry", i, krs[i].Topic, maxOutputRecordBytes), false}, nil, tr)
			return
		}
	}
	remaining := atomic.Int32{}
	remaining.Store(int32(len(krs)))
	for _, kr := range krs {
		tp, ts, sent := tr.Produce(tracing.ProduceOutput, kr.Topic)
		kr.Headers = withTraceContext(kr.Headers, tp, ts)
		t.p.cl.Produce(context.Background(), kr, func(pr *kgo.Record, err error) {
			sent(pr.Partition, pr.Offset, err)
			if remaining.Add(-1) == 0 {
				t.p.budget.releaseOutputs(held)
			}
			if err != nil {
				t.p.txnFailed(fmt.Errorf("output of %s[%d]@%d to %s: %w", r.Topic, r.Partition, r.Offset, pr.Topic, err))
				return
			}
			t.p.stats.Outputs.Add(1)
			t.ps.Outputs.Add(1)
		})
	}
	t.finish(r)
	tr.End("ok", "", "")
}

// produceFailure produces r's failure copy (retry or dead letter) to topic;
// r is done once that is acknowledged. A failed produce is retried with
// backoff until it succeeds or the pipeline stops (r then stays uncommitted):
// a failed record is never dropped.
func (t *task) produceFailure(r *kgo.Record, topic string, hs []kgo.RecordHeader, counter func(*Stats) *atomic.Int64, tr *tracing.Attempt, kind string, f failure) {
	t.p.log.Debug("failed record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "to", topic)
	if t.p.eos {
		// Into the open transaction, like outputs (produceOutputsTxn).
		tp, ts, sent := tr.Produce(kind, topic)
		fr := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: withTraceContext(hs, tp, ts), Partition: -1}
		t.p.cl.Produce(context.Background(), fr, func(pr *kgo.Record, err error) {
			sent(pr.Partition, pr.Offset, err)
			if err != nil {
				t.p.txnFailed(fmt.Errorf("failure copy of %s[%d]@%d to %s: %w", r.Topic, r.Partition, r.Offset, topic, err))
				return
			}
			counter(&t.p.stats).Add(1) // on acknowledgement, as outputs are
			counter(t.ps).Add(1)
		})
		t.finish(r)
		tr.End(kind, f.kind, f.msg)
		return
	}
	var attempt func(backoff time.Duration)
	attempt = func(backoff time.Duration) {
		tp, ts, sent := tr.Produce(kind, topic)
		fr := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: withTraceContext(hs, tp, ts), Partition: -1}
		t.p.cl.Produce(context.Background(), fr, func(pr *kgo.Record, err error) {
			sent(pr.Partition, pr.Offset, err)
			if err == nil {
				counter(&t.p.stats).Add(1)
				counter(t.ps).Add(1)
				t.finish(r)
				tr.End(kind, f.kind, f.msg)
				return
			}
			if t.p.stopped.Load() {
				t.p.log.Error("producing a failed record during shutdown failed; it stays uncommitted", "to", topic, "offset", r.Offset, "err", err)
				return
			}
			t.p.log.Error("producing a failed record failed; retrying", "to", topic, "offset", r.Offset, "err", err, "backoff", backoff)
			time.AfterFunc(backoff, func() { attempt(min(backoff*2, 30*time.Second)) })
		})
	}
	attempt(time.Second)
}
