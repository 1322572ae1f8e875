// The sink step of a record's path (DESIGN.md): how a decided outcome
// leaves the host. A partition's release order (or, without one, the
// worker) hands settled outcomes to the pipeline's sink, in order; the sink
// produces what each carries — its outputs and the changelog records of its
// state writes, or its retry or dead-letter copy — and tells the outcome
// (the job) when it is durable.

package partition

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/background"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/tracing"
)

// Sink is how a pipeline's decided outcomes leave the host; the pipeline's
// guarantee chooses one, once, in newPipeline:
//
//   - plainSink (at_least_once, and consume: share): outputs are produced
//     as records are released; a record is durable once the broker
//     acknowledged every one of them. A produce that fails sends the
//     record down its failure path; a failure copy is produced again with
//     backoff until the broker takes it.
//   - txnSink (exactly_once): outcomes are produced into the open
//     transaction, through its gate; a record is durable at once (the
//     transaction's cut commits it only if every produce was
//     acknowledged), and a produce that fails aborts the transaction.
type Sink interface {
	// refuses says why r's outputs, or the changelog records of its state
	// writes, can never be produced ("" when they can): topic limits, and
	// under exactly_once a refusal the broker made when r last ran. Asked
	// by the worker before the writes join the overlay (so a refused
	// record leaves no state).
	refuses(r *kgo.Record, outs []abi.Output, writes []state.Write) string
	// deliver carries settled outcomes of one partition, in release order,
	// to the broker. For each, once its outcome is durable, it finishes the
	// record (task.finish) — or nothing, when the record's task was cut
	// off (exactly_once) before it was released. Called under the release
	// order's lock (releaser.mu) where one is kept: it may take the
	// transaction gate, task.mu (finishing a record) and leaf locks, never
	// Set.mu or commitMu. Never produces from inside a produce
	// callback.
	deliver(run []*job)
	// Forget drops what the sink remembers of partitions that moved
	// (txnSink: refused records).
	Forget(parts map[string][]int32)
}

// TxnGate is what a TxnSink needs of its transactions (scheduler/internal/commit/txn.go): enter is
// held shared while outcomes are released (a cut holds it exclusively),
// leave ends it, counting the records released (at
// transactions.max_records the poll in progress ends, so the loop cuts),
// and failed makes the open transaction abort at its cut.
type TxnGate interface {
	Enter()
	Leave(released int)
	Failed(err error)
}

// refusesLimits says why a topic would refuse one of outs, or the
// changelog record of one of writes (topicLimits); "" when none would.
func refusesLimits(l TopicLimits, output, changelog string, outs []abi.Output, writes []state.Write) string {
	for i := range outs {
		o := &outs[i]
		if why := l.refuses(cmp.Or(o.Topic, output), o.Key, o.Key == nil, o.Value, o.Headers); why != "" {
			return fmt.Sprintf("output %d: %s", i, why)
		}
	}
	putHeaders := state.PutHeaders()
	for _, w := range writes {
		var hs []abi.Header
		if w.Value != nil {
			hs = putHeaders[:] // a put's record carries the stream time
		}
		if why := l.refuses(changelog, w.Key, false, w.Value, hs); why != "" {
			return "the changelog record of a state write: " + why
		}
	}
	return ""
}

// Producer is what a sink produces with: the pipeline's config and
// client, and for a failure copy produced again after a backoff, the
// pipeline's background group, its quit signal and whether it stopped.
// The client is the pipeline's, made before its sink (Pipeline.wire).
type Producer struct {
	Config     *config.Pipeline
	Client     *kgo.Client
	Log        *slog.Logger
	Background *background.Group
	Quit       <-chan struct{} // closed when the pipeline stops
	Stopped    *atomic.Bool    // set when the pipeline stops
}

// PlainSink is the sink of at_least_once and share pipelines.
type PlainSink struct {
	Producer
	Limits    TopicLimits
	Changelog string // the state's changelog topic (state.enabled; "" otherwise)
}

func (s *PlainSink) refuses(_ *kgo.Record, outs []abi.Output, writes []state.Write) string {
	return refusesLimits(s.Limits, s.Config.Output, s.Changelog, outs, writes)
}

func (*PlainSink) Forget(map[string][]int32) {}

func (s *PlainSink) deliver(run []*job) {
	var at outputTime
	for _, j := range run {
		deliverVerdict(s, j, &at)
	}
}

// deliverOutputs produces a succeeded record's outputs; the record is done
// once the broker acknowledged all of them (outputAcked). If one cannot be
// produced, the record is dead-lettered instead (outputs already
// acknowledged stay: this is at-least-once). j.held is what the outputs
// count in the host's held outputs: given back once the broker answered for
// every one of them.
func (s *PlainSink) deliverOutputs(j *job, at time.Time) {
	j.prepareOutputs(s.Config.Output, at)
	j.remaining.Store(int32(len(j.outcome.outs)))
	if j.tr != nil {
		j.rare.sent = make([]func(int32, int64, error), len(j.outcome.outs)) // made by succeeded
	}
	for i := range j.outcome.outs {
		kr := j.outputRecord(i)
		if j.tr != nil {
			tp, ts, sent := j.tr.Produce(tracing.ProduceOutput, kr.Topic)
			kr.Headers = withTraceContext(kr.Headers, tp, ts)
			j.rare.sent[i] = sent
		}
		kr.Context = j
		s.Client.Produce(context.Background(), kr, outputAcked)
	}
}

// outputAcked is the producer's callback for every output record of a
// plainSink: the record's Context is its job.
func outputAcked(pr *kgo.Record, err error) {
	j := pr.Context.(*job)
	t := j.t
	if x := j.rare; x != nil && x.sent != nil {
		for i := range j.outcome.outs {
			if j.outputRecord(i) == pr {
				x.sent[i](pr.Partition, pr.Offset, err)
			}
		}
	}
	j.acked(pr, err)
	if err != nil {
		j.produceFailed(err)
	}
	if j.remaining.Add(-1) != 0 {
		return
	}
	t.d.Budget.ReleaseOutputs(j.outcome.held)
	if e := j.outcome.failedErr.Load(); e != nil {
		if j.isWork() {
			t.finishWork(j, fmt.Errorf("producing an output of work failed: %w", *e)) // no failure copy: no record
			return
		}
		// Not from inside a promise: fail produces again.
		j.undeliverable(failure{hooks.KindProduce, "producing an output failed: " + (*e).Error(), true, 0}, *e)
		return
	}
	j.finish()
	j.tr.End("ok", "", "")
	j.recycle() // every produce of it answered, its record done: nothing holds it
}

// produceFailed keeps err as j's first produce error. Its own function:
// taking the address of outputAcked's err would move it to the heap on
// every acknowledgement, not only on a failure.
func (j *job) produceFailed(err error) {
	j.outcome.failedErr.CompareAndSwap(nil, &err)
}

// undeliverable sends j, whose outputs could not all be produced, down its
// failure path (at_least_once: the outputs already acknowledged stay), on
// the pipeline's background: never from inside a produce callback. Every
// produce of j was answered: j is nobody's Context any more.
func (j *job) undeliverable(f failure, err error) {
	t := j.t
	j.release.verdict = verdictFailed
	if !t.d.Background.Go(func() {
		j.failed(f, true) // here, not in the callback: the job is this goroutine's (jobRare)
		t.d.Sink.deliver(j.run())
	}) {
		t.d.Log.Error("an output failed during shutdown; its record stays uncommitted", "topic", j.r.Topic, "partition", j.r.Partition, "offset", j.r.Offset, "err", err)
	}
}

// deliverFailure produces r's failure copy (retry or dead letter); r is
// done once that is acknowledged. A failed produce is tried again with
// backoff until it succeeds or the pipeline stops (r then stays
// uncommitted): a failed record is never dropped.
func (s *PlainSink) deliverFailure(t *Task, r *kgo.Record, fc failureCopy, tr *tracing.Attempt, f failure) {
	p := &s.Producer
	p.Log.Debug("failed record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "to", fc.topic)
	var attempt func(backoff time.Duration)
	attempt = func(backoff time.Duration) {
		tp, ts, sent := tr.Produce(fc.kind, fc.topic)
		fr := &kgo.Record{Topic: fc.topic, Key: r.Key, Value: r.Value, Headers: withTraceContext(fc.headers, tp, ts), Partition: -1}
		p.Client.Produce(context.Background(), fr, func(pr *kgo.Record, err error) {
			sent(pr.Partition, pr.Offset, err)
			if err == nil {
				fc.count(t.out).Add(1)
				t.Finish(r)
				tr.End(fc.kind, f.kind, f.msg)
				return
			}
			again := !p.Stopped.Load() && p.Background.Go(func() {
				select {
				case <-time.After(backoff):
					attempt(min(backoff*2, 30*time.Second))
				case <-p.Quit:
					p.Log.Error("producing a failed record failed at shutdown; it stays uncommitted", "to", fc.topic, "offset", r.Offset, "err", err)
				}
			})
			if !again {
				p.Log.Error("producing a failed record during shutdown failed; it stays uncommitted", "to", fc.topic, "offset", r.Offset, "err", err)
				return
			}
			p.Log.Error("producing a failed record failed; retrying", "to", fc.topic, "offset", r.Offset, "err", err, "backoff", backoff)
		})
	}
	attempt(time.Second)
}

// TxnSink is the sink of exactly_once pipelines: outcomes enter the open
// transaction, in release order, through its gate.
type TxnSink struct {
	Producer
	Gate      TxnGate
	Limits    TopicLimits
	Changelog string
	// refused are the records whose produce the broker refused in a
	// transaction that then aborted: run again, they fail (refuses).
	refused refusedRecords
}

func (s *TxnSink) refuses(r *kgo.Record, outs []abi.Output, writes []state.Write) string {
	if r == nil { // work (work.go): no record the broker refused before
		return refusesLimits(s.Limits, s.Config.Output, s.Changelog, outs, writes)
	}
	if why := s.refused.take(r); why != "" {
		return "the broker refused an output of this record when it last ran (its transaction aborted): " + why
	}
	return refusesLimits(s.Limits, s.Config.Output, s.Changelog, outs, writes)
}

func (s *TxnSink) Forget(parts map[string][]int32) { s.refused.forget(parts) }

// deliver releases run into the open transaction: while no transaction is
// being cut (the gate, held shared over the whole run: checking the
// cut-off, producing and finishing each record happen in one hold), and
// nothing of a job whose task was cut off (its partition revoked or its
// transaction aborted).
func (s *TxnSink) deliver(run []*job) {
	s.Gate.Enter()
	n := 0
	var at outputTime
	for _, j := range run {
		if j.cutOff() {
			continue
		}
		deliverVerdict(s, j, &at)
		n++
	}
	s.Gate.Leave(n)
}

// deliverOutputs releases a succeeded record's outputs into the open
// transaction: the record is done at once, and the transaction's cut
// commits it only if every produce was acknowledged (otherwise the
// transaction aborts and the record is processed again; if the broker
// refused what it holds, it then fails: refusedRecords). An output a topic
// is known to refuse never gets here (refuses).
func (s *TxnSink) deliverOutputs(j *job, at time.Time) {
	j.prepareOutputs(s.Config.Output, at)
	// Its outputs' answers and its release below: the last of them lets
	// go of the job (txnAnswered), whichever it is (a produce can be
	// answered before Produce returns).
	j.remaining.Store(int32(len(j.outcome.outs)) + 1)
	if j.tr != nil {
		j.rare.sent = make([]func(int32, int64, error), len(j.outcome.outs)) // made by succeeded
	}
	for i := range j.outcome.outs {
		kr := j.outputRecord(i)
		if j.tr != nil {
			tp, ts, sent := j.tr.Produce(tracing.ProduceOutput, kr.Topic)
			kr.Headers = withTraceContext(kr.Headers, tp, ts)
			j.rare.sent[i] = sent
		}
		// One static callback, the job in the record (as a PlainSink's):
		// a closure per output was two allocations a stateful record
		// (its output and its changelog output).
		kr.Context = j
		s.Client.Produce(context.Background(), kr, txnOutputAcked)
	}
	j.finish()
	j.tr.End("ok", "", "")
	j.txnAnswered()
}

// txnAnswered counts one of what a TxnSink's job waits for: an answer for
// one of its outputs, or its release. The last gives back the outputs'
// bytes held in the host's account, and the job (recycle) unless a produce
// of it failed (its transaction aborts; nothing of the job is read again,
// but the rare path is left to the collector).
func (j *job) txnAnswered() {
	if j.remaining.Add(-1) != 0 {
		return
	}
	j.t.d.Budget.ReleaseOutputs(j.outcome.held)
	if j.outcome.failedErr.Load() == nil {
		j.recycle()
	}
}

// txnOutputAcked is the producer's callback for every output record of a
// TxnSink: the record's Context is its job, whose task's sink is the
// TxnSink. The job is finished already (its record done at release); the
// transaction's cut waits for every produce, and a failed one aborts it.
func txnOutputAcked(pr *kgo.Record, err error) {
	j := pr.Context.(*job)
	t := j.t
	if x := j.rare; x != nil && x.sent != nil {
		for i := range j.outcome.outs {
			if j.outputRecord(i) == pr {
				x.sent[i](pr.Partition, pr.Offset, err)
			}
		}
	}
	j.acked(pr, err)
	if err != nil {
		j.produceFailed(err)
		s := t.d.Sink.(*TxnSink)
		if r := j.r; r != nil && refusedForRecord(err) {
			// Run again, it would be refused again: it fails then
			// (refusedRecords, refuses).
			s.refused.note(r, fmt.Sprintf("to %s: %v", pr.Topic, err))
		}
		s.Gate.Failed(fmt.Errorf("output of %s to %s: %w", j.describe(), pr.Topic, err))
	}
	j.txnAnswered() // the last thing read of j: the last answer lets go of it
}

// deliverFailure releases r's failure copy into the open transaction, like
// outputs: r is done at once; a produce that fails aborts the transaction.
func (s *TxnSink) deliverFailure(t *Task, r *kgo.Record, fc failureCopy, tr *tracing.Attempt, f failure) {
	p := &s.Producer
	p.Log.Debug("failed record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "to", fc.topic)
	tp, ts, sent := tr.Produce(fc.kind, fc.topic)
	fr := &kgo.Record{Topic: fc.topic, Key: r.Key, Value: r.Value, Headers: withTraceContext(fc.headers, tp, ts), Partition: -1}
	p.Client.Produce(context.Background(), fr, func(pr *kgo.Record, err error) {
		sent(pr.Partition, pr.Offset, err)
		if err != nil {
			s.Gate.Failed(fmt.Errorf("failure copy of %s[%d]@%d to %s: %w", r.Topic, r.Partition, r.Offset, fc.topic, err))
			return
		}
		fc.count(t.out).Add(1) // on acknowledgement, as outputs are
	})
	t.Finish(r)
	tr.End(fc.kind, f.kind, f.msg)
}

// verdictSink is what a sink does with one decided record: produce its
// outputs, or its failure copy.
type verdictSink interface {
	deliverOutputs(j *job, at time.Time)
	deliverFailure(t *Task, r *kgo.Record, fc failureCopy, tr *tracing.Attempt, f failure)
}

// deliverVerdict acts on one decided record's verdict through s: a filtered
// record is done, a succeeded one's outputs leave, a failed one's copy
// goes to its retry or dead-letter topic.
func deliverVerdict(s verdictSink, j *job, at *outputTime) {
	switch j.release.verdict {
	case verdictDone:
		j.t.filtered(j)
	case verdictOutputs:
		if j.t.d.InputTimestamps && j.r != nil { // work (j.r nil) has no input timestamp: the clock
			s.deliverOutputs(j, j.r.Timestamp)
		} else {
			s.deliverOutputs(j, at.now())
		}
	case verdictFailed:
		x := j.rare // made with its failure (job.failed)
		s.deliverFailure(j.t, j.r, j.t.failureCopy(j.r, int(j.attempt), x.fail, x.history, j.tr), j.tr, x.fail)
	}
}

// outputTime is the timestamp of the outputs a sink delivers in one run:
// the clock is read once, for the run's first output (ABI.md §5.2).
type outputTime time.Time

func (t *outputTime) now() time.Time {
	if time.Time(*t).IsZero() {
		*t = outputTime(time.Now())
	}
	return time.Time(*t)
}

// prepareOutputs makes the records j's outputs are produced as: the one
// embedded in j for the first output, outcome.second for the second of
// two (worker.outputRecords), one allocation for the others. output is
// the pipeline's output topic (an output naming none goes there), at their
// timestamp.
func (j *job) prepareOutputs(output string, at time.Time) {
	if n := len(j.outcome.outs) - 1; n > 0 && !j.twoOutputs() && len(j.rare.extra) != n {
		more := make([]kgo.Record, n)
		x := j.rare // made by succeeded
		x.extra = make([]*kgo.Record, n)
		for i := range more {
			x.extra[i] = &more[i]
		}
	}
	for i := range j.outcome.outs {
		kr := j.outputRecord(i)
		fillOutput(kr, &j.outcome.outs[i], output)
		kr.Timestamp = at
	}
}

// outputRecord is the record output i of j is produced as.
func (j *job) outputRecord(i int) *kgo.Record {
	switch {
	case i == 0:
		return &j.outcome.out1
	case j.twoOutputs():
		return j.outcome.second
	}
	return j.rare.extra[i-1]
}

// twoOutputs reports whether j has exactly two outputs, the second
// produced as outcome.second.
func (j *job) twoOutputs() bool {
	return len(j.outcome.outs) == 2 && j.outcome.second != nil
}

// fillOutput makes kr the record output o is produced as.
func fillOutput(kr *kgo.Record, o *abi.Output, output string) {
	topic := o.Topic
	if topic == "" {
		topic = output
	}
	*kr = kgo.Record{Topic: topic, Key: o.Key, Value: o.Value, Partition: o.Partition}
	if len(o.Headers) > 0 {
		kr.Headers = make([]kgo.RecordHeader, len(o.Headers))
		for j, h := range o.Headers {
			kr.Headers[j] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
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
