package partition

// A worker's inline retries: records it tries again itself after a
// backoff, before any retry topic.

import (
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/config"
)

// instance returns a live instance, replacing a dead one (after collecting
// the records it lost). Nil only when the task is aborted.
func (w *worker) instance() Instance {
	backoff := 100 * time.Millisecond
	for w.inst == nil || w.inst.Dead() {
		if w.inst != nil {
			for _, d := range w.inst.Poll(w.t.life.ctx, time.Now()) {
				w.outcome(d.Tag.(*job), d.Result)
			}
		}
		if w.ver != nil {
			w.ver.Release()
			w.ver = nil
		}
		start := time.Now()
		v := w.t.version()
		v.Acquire()
		in, err := w.t.d.newInstance(w.t.life.ctx, v)
		if err == nil {
			w.t.d.recordInstantiate(time.Since(start))
			in.KeepSlot()                  // records run back to back on it; the loop yields before it waits
			in.StopBatchAfterFailure(true) // nothing of a partition or key runs past a failed record (startRun)
			w.inst, w.ver = in, v
			if !w.calls.warm {
				w.calls.warm = true
				w.t.pool.auto.warm.Add(1)
			}
			break
		}
		v.Release()
		w.t.d.Log.Error("cannot instantiate module; retrying", "err", err, "backoff", backoff)
		select {
		case <-w.t.life.ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
	return w.inst
}

// newJob makes r's job, with nothing noted of it anywhere: place gives it
// its place in the release order (a record a run took and did not run is
// never placed, and is taken again later). forged is how many of r's
// headers are not believed.
func (w *worker) newJob(r *kgo.Record, ln *lane) (j *job, forged int) {
	t := w.t
	// The guest sees the record as it was first consumed, without
	// wasmstream's headers; on an input topic those are a producer's and
	// are not believed (role.prior).
	if t.rel != nil && t.rel.byOffset {
		j = t.rel.claim(r, w.allocJob) // its place was reserved at enqueue
	} else {
		j = w.allocJob()
		j.r = r
	}
	j.t, j.ln = t, ln
	if _, ok := t.d.Role.(Primary); ok {
		// An input topic's record, the common case, without building
		// its prior state: attempt 1 at its own coordinates.
		j.attempt = 1
		return j, forgedHeaders(r)
	}
	prior, untrusted := t.d.Role.prior(r)
	j.attempt = int32(prior.Attempt) // at most failhdr.MaxAttempt
	if prior.Origin != ownOrigin(r) {
		o := prior.Origin        // declared here: escaping, it is an allocation
		j.rareFields().orig = &o // a retry topic's record: its origin is elsewhere
	}
	return j, untrusted
}

// retryInline retries j in place (retry.mode: inline) when f may be
// retried and attempts remain, and reports whether it does: the record
// waits, holding its lane (its key, or its partition's release order) but
// not the instance, until its backoff is due.
func (w *worker) retryInline(j *job, f failure, end time.Time) bool {
	t := w.t
	rc := &t.d.Config.Retry
	if !f.retryable || int(j.attempt) >= rc.MaxAttempts || rc.Mode != config.RetryInline {
		return false
	}
	x := j.rareFields()
	x.history = append(x.history, historyEntry(f))
	delay, _ := t.d.Config.Delay(int(j.attempt) + 1)
	t.ps.Retried.Add(1)
	w.decideTrace(j, true, end)
	j.attempt++
	if j.tr != nil {
		j.tr.End("retry_inline", f.kind, f.msg)
		j.tr = j.tr.Next(t.traceInfo(j))
	}
	x.due = time.Now().Add(delay)
	w.retry.add(j)
	return true
}

// retryQueue is a worker's inline retries waiting, by due time, and
// whether the host's bound on asynchronous operations refused the first
// due one this turn (startDueRetries, retryHold). The worker's own: only
// its goroutine reads or writes it, so it needs no lock.
type retryQueue struct {
	jobs    []*job // by due time (job.due)
	refused bool
}

// add places j, whose due time is set, among the retries by due time.
func (q *retryQueue) add(j *job) {
	i, _ := slices.BinarySearchFunc(q.jobs, j.due(), func(a *job, d time.Time) int { return a.due().Compare(d) })
	q.jobs = slices.Insert(q.jobs, i, j)
}

// first places j before every retry: a record restarted at once
// (its instance lost under it).
func (q *retryQueue) first(j *job) { q.jobs = slices.Insert(q.jobs, 0, j) }

func (q *retryQueue) len() int { return len(q.jobs) }

// next is when the first retry is due (zero: none waits).
func (q *retryQueue) next() time.Time {
	if len(q.jobs) == 0 {
		return time.Time{}
	}
	return q.jobs[0].due()
}

// due returns the first retry if it is due at now, or nil.
func (q *retryQueue) due(now time.Time) *job {
	if len(q.jobs) == 0 || q.jobs[0].due().After(now) {
		return nil
	}
	return q.jobs[0]
}

// pop removes the first retry (the one due returned).
func (q *retryQueue) pop() { q.jobs = q.jobs[1:] }

// take empties the queue and returns what was in it.
func (q *retryQueue) take() []*job {
	jobs := q.jobs
	q.jobs = nil
	return jobs
}
