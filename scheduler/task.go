package scheduler

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
)

// task owns one assigned partition: its queue of fetched records, its offset
// tracker and its module instance. Records run one at a time, in offset
// order, on the task's goroutine (the instance's only user).
type task struct {
	p         *Pipeline
	topic     string
	partition int32
	tr        tracker
	committed int64 // last committed watermark; guarded by p.commitMu

	mu       sync.Mutex
	queue    []*kgo.Record
	qbytes   int // key+value bytes in queue
	paused   bool
	stopping bool
	wake     chan struct{}

	ctx    context.Context // guest calls; canceled by abort
	cancel context.CancelFunc
	exited chan struct{}
	inst   *host.Instance

	highWatermark atomic.Int64
	position      atomic.Int64 // one past the last record started
}

func newTask(p *Pipeline, topic string, partition int32) *task {
	ctx, cancel := context.WithCancel(context.Background())
	return &task{p: p, topic: topic, partition: partition, wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel, exited: make(chan struct{}), committed: -1}
}

// enqueue takes a fetched batch (in offset order). A task holding max_queued
// records or max_queued_bytes pauses its partition's fetching until it drains
// to half of both. Pausing drops the client's buffered data for the
// partition, so the bounds are set well above one fetch (RATIONALE.md,
// "Backpressure").
// Called from the poll loop.
func (t *task) enqueue(recs []*kgo.Record) {
	for _, r := range recs {
		t.tr.add(r.Offset, r.LeaderEpoch)
	}
	t.p.stats.Fetched.Add(int64(len(recs)))
	n := 0
	for _, r := range recs {
		n += len(r.Key) + len(r.Value)
	}
	t.mu.Lock()
	t.queue = append(t.queue, recs...)
	t.qbytes += n
	if !t.paused && (len(t.queue) >= t.p.pc.MaxQueued || t.qbytes >= t.p.pc.MaxQueuedBytes) {
		t.paused = true
		t.p.cl.PauseFetchPartitions(map[string][]int32{t.topic: {t.partition}})
	}
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// next returns the next record to run, or nil once the task is stopping.
func (t *task) next() *kgo.Record {
	for {
		t.mu.Lock()
		if t.stopping {
			t.mu.Unlock()
			return nil
		}
		if len(t.queue) > 0 {
			r := t.queue[0]
			t.queue[0] = nil
			t.queue = t.queue[1:]
			t.qbytes -= len(r.Key) + len(r.Value)
			if t.paused && len(t.queue) <= t.p.pc.MaxQueued/2 && t.qbytes <= t.p.pc.MaxQueuedBytes/2 {
				t.paused = false
				t.p.cl.ResumeFetchPartitions(map[string][]int32{t.topic: {t.partition}})
			}
			t.mu.Unlock()
			return r
		}
		t.mu.Unlock()
		<-t.wake
	}
}

// stop makes the task finish the record in progress and take no other.
// Queued records are dropped from the tracker: they stay uncommitted and
// their partition's next owner processes them.
func (t *task) stop() {
	t.mu.Lock()
	t.stopping = true
	if len(t.queue) > 0 {
		t.tr.dropFrom(t.queue[0].Offset)
		t.queue, t.qbytes = nil, 0
	}
	if t.paused {
		t.paused = false
		t.p.cl.ResumeFetchPartitions(map[string][]int32{t.topic: {t.partition}})
	}
	t.mu.Unlock()
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// abort interrupts the guest call in progress (it fails as canceled and its
// record stays uncommitted).
func (t *task) abort() { t.cancel() }

func (t *task) lag() int64 {
	l := t.highWatermark.Load() - t.position.Load()
	if l < 0 {
		return 0
	}
	return l
}

func (t *task) run() {
	defer close(t.exited)
	defer func() {
		if t.inst != nil {
			t.inst.Close(context.Background())
		}
	}()
	for {
		r := t.next()
		if r == nil {
			return
		}
		t.position.Store(r.Offset + 1)
		t.process(r)
	}
}

// instance returns a live instance, replacing a dead one. Nil only when the
// task is aborted.
func (t *task) instance() *host.Instance {
	backoff := 100 * time.Millisecond
	for t.inst == nil || t.inst.Dead() {
		in, err := t.p.mod.NewInstance(t.ctx)
		if err == nil {
			t.inst = in
			break
		}
		t.p.log.Error("cannot instantiate module; retrying", "err", err, "backoff", backoff)
		select {
		case <-t.ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
	return t.inst
}

func (t *task) process(r *kgo.Record) {
	in := t.instance()
	if in == nil {
		return // aborted: the record stays uncommitted
	}
	ar := abi.Record{
		Offset:    r.Offset,
		Timestamp: r.Timestamp.UnixMilli(),
		Partition: r.Partition,
		Attempt:   1,
		Topic:     r.Topic,
		Key:       r.Key,
		Value:     r.Value,
	}
	if len(r.Headers) > 0 {
		ar.Headers = make([]abi.Header, len(r.Headers))
		for i, h := range r.Headers {
			ar.Headers[i] = abi.Header{Key: h.Key, Value: h.Value}
		}
	}
	res := in.Process(t.ctx, &ar)
	if f := res.Fault(); f != nil {
		if f.Kind == host.FaultCanceled {
			return // aborted by a drain deadline: uncommitted, processed again by the next owner
		}
		t.p.stats.Faults.Add(1)
		t.p.log.Warn("guest fault; instance replaced", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "kind", f.Kind, "err", f.Msg)
	}
	if res.Status != abi.StatusOK {
		kind := KindGuestRetry
		if f := res.Fault(); f != nil {
			kind = "fault." + string(f.Kind)
		} else if res.Status == abi.StatusFail {
			kind = KindGuestFail
		}
		t.deadLetter(r, kind, res.Err.Error())
		return
	}
	if len(res.Outputs) == 0 {
		t.finish(r)
		return
	}
	t.produceOutputs(r, res.Outputs)
}

// produceOutputs produces a succeeded record's outputs; the record is done
// once the broker acknowledged all of them. If one cannot be produced, the
// record is dead-lettered instead (outputs already acknowledged stay: this is
// at-least-once).
func (t *task) produceOutputs(r *kgo.Record, outs []abi.Output) {
	remaining := atomic.Int32{}
	remaining.Store(int32(len(outs)))
	var failed atomic.Pointer[error]
	for i := range outs {
		o := &outs[i]
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
		t.p.cl.Produce(context.Background(), kr, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			} else {
				t.p.stats.Outputs.Add(1)
			}
			if remaining.Add(-1) != 0 {
				return
			}
			if e := failed.Load(); e != nil {
				// Not from inside a promise: deadLetter produces again.
				go t.deadLetter(r, KindProduce, "producing an output failed: "+(*e).Error())
				return
			}
			t.finish(r)
		})
	}
}

func (t *task) finish(r *kgo.Record) {
	if t.tr.done(r.Offset) {
		t.p.stats.Done.Add(1)
	}
}

// deadLetter produces r to the dead-letter topic with headers saying why; r
// is done once that is acknowledged. A failed dead-letter produce is retried
// with backoff until it succeeds or the pipeline stops (r then stays
// uncommitted): a failed record is never dropped.
func (t *task) deadLetter(r *kgo.Record, kind, reason string) {
	info := t.p.mod.Info()
	hs := make([]kgo.RecordHeader, 0, len(r.Headers)+10)
	hs = append(hs, r.Headers...)
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderPipeline, Value: []byte(t.p.pc.Name)},
		kgo.RecordHeader{Key: HeaderErrorKind, Value: []byte(kind)},
		kgo.RecordHeader{Key: HeaderError, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderOriginalTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderOriginalPartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderOriginalOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
		kgo.RecordHeader{Key: HeaderOriginalTimestamp, Value: strconv.AppendInt(nil, r.Timestamp.UnixMilli(), 10)},
		kgo.RecordHeader{Key: HeaderAttempt, Value: []byte("1")},
		kgo.RecordHeader{Key: HeaderModuleDigest, Value: []byte(info.Digest)},
		kgo.RecordHeader{Key: HeaderFailedAt, Value: []byte(time.Now().UTC().Format(time.RFC3339Nano))},
	)
	t.p.log.Debug("dead-lettering record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "kind", kind, "err", reason)
	var attempt func(backoff time.Duration)
	attempt = func(backoff time.Duration) {
		dl := &kgo.Record{Topic: t.p.pc.DeadLetterTopic, Key: r.Key, Value: r.Value, Headers: hs, Partition: -1}
		t.p.cl.Produce(context.Background(), dl, func(_ *kgo.Record, err error) {
			if err == nil {
				t.p.stats.DeadLetter.Add(1)
				t.finish(r)
				return
			}
			if t.p.stopped.Load() {
				t.p.log.Error("dead-letter produce failed during shutdown; the record stays uncommitted", "offset", r.Offset, "err", err)
				return
			}
			t.p.log.Error("dead-letter produce failed; retrying", "topic", t.p.pc.DeadLetterTopic, "offset", r.Offset, "err", err, "backoff", backoff)
			time.AfterFunc(backoff, func() { attempt(min(backoff*2, 30*time.Second)) })
		})
	}
	attempt(time.Second)
}
