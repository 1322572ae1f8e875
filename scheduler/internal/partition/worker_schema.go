package partition

// Schema-registry data on the worker (Deps.Schema; RATIONALE.md,
// "Schema-registry data"): a record's framed key or value is decoded to
// JSON before the guest's call, into a buffer of the pipeline's the call
// reads and which is given back once it returned; a record that
// does not decode fails without a call. A succeeded record's outputs to
// the output topic are encoded before its verdict, so that one that does
// not fit its schema fails the record here, through the retry and
// dead-letter path, not in the producer's callback.

import (
	"slices"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/internal/schemaio"
)

// schemaFailure is the failure of a record whose key or value did not
// decode, or whose outputs did not encode: schema.<kind>, retryable only
// when the registry was down or refused the credentials.
func schemaFailure(err error) failure {
	kind, id, retryable := schemaio.Failure(err)
	return failure{kind: kind, msg: err.Error(), retryable: retryable, schemaID: id}
}

// setDecoded points ar's key and value at their JSON in buf.
func setDecoded(ar *abi.Record, buf []byte, k, v schemaio.Span) {
	if k.At >= 0 {
		ar.Key = buf[k.At:k.End:k.End]
	}
	if v.At >= 0 {
		ar.Value = buf[v.At:v.End:v.End]
	}
}

// decodeOne decodes j's record into ar, for a call of it alone (start),
// into b; ok is false, with the failure, when it does not decode.
func (w *worker) decodeOne(b *schemaio.Buffer, j *job, ar *abi.Record) (failure, bool) {
	buf, k, v, err := w.t.d.Schema.Decode(w.t.life.ctx, b.B[:0], j.r)
	b.B = buf
	if err != nil {
		w.t.d.Stats.SchemaDecodeFailures.Add(1)
		return schemaFailure(err), false
	}
	setDecoded(ar, buf, k, v)
	return failure{}, true
}

// decodeRun decodes the records of a run (jobs, their guest records ars)
// into b before its call, and returns how many of them, from the first,
// are decoded and may be called: fewer than the run when record n did not
// decode (failed, with f), or when the JSON decoded reached
// input_format.max_json_bytes (the rest waits for the next run: a call
// reads at most that much plus one record's).
func (w *worker) decodeRun(b *schemaio.Buffer, jobs []*job, ars []abi.Record) (n int, f failure, failed bool) {
	sc := w.t.d.Schema
	buf := b.B[:0]
	spans := slices.Grow(b.Spans[:0], len(jobs))[:len(jobs)]
	for i, j := range jobs {
		if i > 0 && len(buf) >= sc.MaxJSON() {
			break
		}
		var err error
		if buf, spans[i][0], spans[i][1], err = sc.Decode(w.t.life.ctx, buf, j.r); err != nil {
			w.t.d.Stats.SchemaDecodeFailures.Add(1)
			f, failed = schemaFailure(err), true
			break
		}
		n = i + 1
	}
	for i := range n {
		setDecoded(&ars[i], buf, spans[i][0], spans[i][1])
	}
	b.B, b.Spans = buf, spans
	return n, f, failed
}

// decodeRunOrFail decodes a run's records before its call (decodeRun)
// and returns the buffer the call reads and how many records, from the
// first, it calls: the records after those go back to the front of their
// queues, as those a call did not run do (afterRunCall), and are taken
// again. When the first does not decode, none is called (keep 0): it
// fails alone, without a call.
func (w *worker) decodeRunOrFail(sc *schemaio.Pipeline, run []picked, jobs []*job, forged []int, recs []host.BatchRecord, ars []abi.Record) (sb *schemaio.Buffer, keep int) {
	t := w.t
	sb = sc.GetBuffer()
	n, f, failed := w.decodeRun(sb, jobs, ars)
	keep = n
	if failed && n == 0 {
		keep = 1
	}
	if keep < len(jobs) {
		for _, j := range jobs[keep:] {
			j.tr = nil
		}
		t.mu.Lock()
		t.unpickLocked(run[keep:])
		t.mu.Unlock()
		clear(jobs[keep:])
		clear(recs[keep:])
	}
	if n > 0 {
		return sb, n
	}
	sc.PutBuffer(sb)
	j := jobs[0]
	w.place(j, forged[0])
	if p := j.r.Offset + 1; p > t.position.Load() {
		t.position.Store(p)
	}
	w.schemaFailed(j, f)
	w.settleState()
	return nil, 0
}

// schemaFailed decides j, whose record did not decode, without a call:
// retried in place (retry.mode: inline) when the failure may pass, else
// failed, to its retry tier or the dead-letter topic.
func (w *worker) schemaFailed(j *job, f failure) {
	now := time.Now()
	j.started = now
	w.g.handled.Add(1)
	if w.retryInline(j, f, now) {
		return
	}
	w.decideTrace(j, true, now)
	j.failed(f, false)
	j.rs = nil
	w.settle(j, verdictFailed)
}

// encodeOutputs encodes the outputs of a succeeded attempt to the output
// topic with their subjects' schemas, in place; the failure's kind is set
// when one does not fit (the record fails).
func (w *worker) encodeOutputs(res *host.Result) failure {
	sc := w.t.d.Schema
	if sc == nil || !sc.Encodes() || len(res.Outputs) == 0 {
		return failure{}
	}
	if err := sc.Encode(res.Outputs); err != nil {
		w.t.d.Stats.SchemaEncodeFailures.Add(1)
		return schemaFailure(err)
	}
	return failure{}
}
