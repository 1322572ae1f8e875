package partition

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"

	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/fifo"
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/offsets"
	"github.com/wasmstream/wasmstream/scheduler/internal/sizing"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/scheduler/internal/version"
)

// Task owns one assigned partition: its fetched records, its offset tracker
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
// Lock order, outermost first: releaser.mu, Set.mu, task.mu, then
// leaves such as Budget.mu (DESIGN.md, "Lock order").
type Task struct {
	d         *Deps
	Topic     string
	Partition int32
	ps        *hooks.Stats     // the partition's counters (kept across assignments)
	mattrs    attribute.Set    // metric attributes
	State     *state.Partition // the partition's state (state.enabled; nil otherwise)
	rel       *releaser        // release order (ledger.releaseOrder; nil: none)
	// out is where the outcomes of the task's records are counted (Done,
	// Dropped, Outputs, and the acknowledged failure copies: DeadLetter,
	// Retried): ps, or under exactly_once the open transaction's counts,
	// which the committer moves to ps when the transaction commits
	// (CountCommitted) and which an abort drops with the task: a record
	// whose transaction aborted is processed again by a new task, and is
	// counted once, when its outcome commits.
	out *hooks.Stats

	taskOffsets // where the partition stands: done, committed, fetched, started

	mu   sync.Mutex
	q    taskQueues // guarded by mu
	pool taskPool   // guarded by mu (dispatch.go)

	life taskLife    // stopping, aborting and retiring the task
	Dead atomic.Bool // cut off (exactly_once): nothing more of it is released
}

// taskOffsets is where a task's partition stands.
type taskOffsets struct {
	Tracker offsets.Tracker
	skip    *offsets.DoneSet // offsets the previous owner recorded as done

	// Written under the committer's commitMu; Committed is read by gauges
	// without it.
	Committed     atomic.Int64
	CommittedMeta string

	HighWatermark atomic.Int64
	position      atomic.Int64 // one past the highest offset started
}

// taskQueues are a task's records (and work: work.go) waiting to start, by
// the pipeline's ordering, and its counts of records (guarded by task.mu).
type taskQueues struct {
	free     fifo.Queue[unit]  // runnable, no order constraint
	lanes    map[string]*lane  // key ordering
	single   lane              // partition ordering
	ready    fifo.Queue[*lane] // lanes with records waiting and none in progress
	queued   int               // records (and work) waiting to start
	inFlight int               // fetched, not done
	bytes    int               // key+value bytes of records in flight
	started  int               // started, not done (records and work)
	paused   bool
	stopping bool
	closed   bool
}

// taskPool is a task's workers, what dispatch knows of them and how the
// pool is sized (guarded by task.mu; dispatch.go).
type taskPool struct {
	workers   int             // live workers, not counting those retiring
	live      map[int]*worker // by slot
	idleW     []*worker       // workers waiting for work, least recently used first
	blocked   int             // workers waiting that may not take a record (async or output bounds)
	waitSince time.Time       // since when records have been runnable without pause (zero: none is)
	kick      *time.Timer     // runs dispatch when records fall due or have waited instances.grow_after
	kickAt    time.Time       // when kick fires (zero: not set)
	auto      autoSize        // instances: auto; auto.sizer is nil with a fixed pool
}

// taskLife is how a task ends: stopCh closed at stop, ctx canceled at
// abort, wg its workers, dead once it is cut off.
type taskLife struct {
	stopCh chan struct{}
	wg     workerGroup // its workers' goroutines
	ctx    context.Context
	cancel context.CancelFunc
}

// TP names a partition: the key of a pipeline's tasks and of what is
// committed for each.
type TP struct {
	Topic     string
	Partition int32
}

type lane struct {
	key    string
	q      fifo.Queue[unit]
	busy   bool // a record (or work) of the lane is in progress
	listed bool // in task.q.ready
}

// NewTask makes the task of one partition (or of a share pool) with what
// its pipeline gives every task (d); skip holds the offsets a previous
// owner reported done above the committed one (kafka.record_done_offsets).
func NewTask(d *Deps, topic string, partition int32, skip *offsets.DoneSet) *Task {
	ctx, cancel := context.WithCancel(context.Background())
	t := &Task{d: d, Topic: topic, Partition: partition, ps: d.PartStats(topic, partition)}
	t.out = t.ps
	pol := d.Ledger.Policy()
	if pol.CountsAtCommit {
		t.out = new(hooks.Stats)
	}
	t.skip = skip
	t.life.stopCh, t.life.ctx, t.life.cancel = make(chan struct{}), ctx, cancel
	t.Committed.Store(-1)
	// The timer's function runs on a goroutine of its own; stop stops it,
	// and a run racing with stop finds the task stopping and does nothing.
	t.pool.kick = time.AfterFunc(time.Hour, t.dispatch)
	t.pool.kick.Stop()
	if d.Role.selfSized() {
		t.pool.auto.sizer = sizing.NewPool(d.Config.Instances.Min, d.Config.Instances.Max)
		t.pool.auto.ctlAt = time.Now()
	}
	t.mattrs = attribute.NewSet(attribute.String("pipeline", d.Config.Name), attribute.String("topic", topic), attribute.Int("partition", int(partition)))
	if d.Config.Ordering == config.OrderKey {
		t.q.lanes = map[string]*lane{}
	}
	t.rel = pol.releaser(d.Sink)
	if d.State != nil {
		t.State = d.State.View(partition)
	}
	return t
}

// Start launches the task's minimum instances.
func (t *Task) Start() {
	t.mu.Lock()
	for i := 0; i < t.d.Config.Instances.Min; i++ {
		if t.d.Budget.Reserve(t.d.Inst.Bytes) {
			t.d.Log.Warn("instance budget exceeded by task minimums (host.max_instances / host.max_instance_memory)", "topic", t.Topic, "partition", t.Partition)
		}
		t.spawnLocked(false)
	}
	t.mu.Unlock()
	t.timersAtStart() // timers.go: what the restored stream time made due
}

func (t *Task) spawnLocked(borrowed bool) {
	t.pool.workers++
	t.life.wg.Add(1)
	go t.worker(borrowed)
}

// Enqueue takes a fetched batch (in offset order). Called from the poll
// loop. Its records enter the partition's offset tracker when the ledger
// tracks them (LedgerPolicy.Tracks); a share group's do not (it redelivers
// offsets below those it handed out; the acknowledgement, not a watermark,
// makes a record durable), and go to the free queue (ordering none).
func (t *Task) Enqueue(recs []*kgo.Record) {
	if t.rel != nil && t.rel.byOffset {
		// Their places in the release order, before any can be picked
		// (the releaser's lock comes before the task's).
		t.rel.reserve(recs, func(r *kgo.Record) bool { return t.skip == nil || !t.skip.Has(r.Offset) })
	}
	tracks := t.d.Ledger.Policy().Tracks
	n, nb := 0, 0
	t.mu.Lock()
	for _, r := range recs {
		if t.skip != nil && t.skipped(r) {
			continue
		}
		if tracks {
			t.Tracker.Add(r.Offset, r.LeaderEpoch)
		}
		n++
		nb += len(r.Key) + len(r.Value)
		t.placeLocked(unit{r: r}, false)
	}
	t.takenLocked(n, nb)
	t.mu.Unlock()
}

// skipped reports whether r is one a previous owner recorded as done
// (kafka.record_done_offsets): done at once, counted consumed. Past the
// last of them, the skip set goes.
func (t *Task) skipped(r *kgo.Record) bool {
	if t.skip.Has(r.Offset) {
		t.Tracker.Add(r.Offset, r.LeaderEpoch)
		t.Tracker.Done(r.Offset)
		t.ps.Skipped.Add(1)
		if p := r.Offset + 1; p > t.position.Load() {
			t.position.Store(p) // skipped records count as consumed for lag
		}
		return true
	}
	if r.Offset >= t.skip.End() {
		t.skip = nil
	}
	return false
}

// takenLocked counts n records of nb bytes of keys and values taken in
// (Enqueue) and dispatches them.
func (t *Task) takenLocked(n, nb int) {
	t.q.queued += n
	t.q.inFlight += n
	t.q.bytes += nb
	t.d.Budget.AddInFlight(int64(n))
	t.ps.Fetched.Add(int64(n))
	t.dispatchLocked()
}

// fullLocked reports whether the task holds its bounds: max_in_flight
// records or max_in_flight_bytes of keys and values.
func (t *Task) fullLocked() bool {
	return t.q.inFlight >= t.d.Config.MaxInFlight || t.q.bytes >= t.d.Config.MaxInFlightBytes
}

// Demand is a task's part in the poll loop's backpressure.
type Demand int8

const (
	DemandTakes    Demand = iota // under its bounds: a poll has a taker
	DemandFull                   // at its bounds: no part in the demand, still fetched
	DemandPauseDue               // at pauseFactor times its bounds: to be paused
	DemandPaused                 // paused, or stopping
)

// PauseFactor: a task whose partition is still being polled for others
// stops its partition's fetching at this many times its bounds; flowLoop
// resumes it at half of them. Between once and PauseFactor times its bounds
// it takes no part in the demand for records but stays unpaused, taking
// what polls for the others bring. A pause costs no fetch: source.Group.poll
// takes what the client holds for the partition first.
const PauseFactor = 2

func (t *Task) DemandState() Demand {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.q.stopping || t.q.paused:
		return DemandPaused
	case t.q.inFlight >= PauseFactor*t.d.Config.MaxInFlight || t.q.bytes >= PauseFactor*t.d.Config.MaxInFlightBytes:
		return DemandPauseDue
	case t.fullLocked():
		return DemandFull
	}
	return DemandTakes
}

// Pause stops the partition's fetching (source.Group.poll); flowLoop resumes it.
func (t *Task) Pause() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.q.paused && !t.q.stopping {
		t.q.paused = true
		t.d.Stats.Pauses.Add(1)
		t.d.Fetch.Pauser.PausePartition(t.Topic, t.Partition)
	}
}

// placeLocked makes u runnable under the pipeline's ordering, at the back
// of its queue or (front) at its front.
func (t *Task) placeLocked(u unit, front bool) { t.q.place(u, t.d.Config.Ordering, front) }

// The queues' methods below are called with task.mu held.

// place makes u runnable under ordering (config.Order*), at the back of
// its queue or (front) at its front.
func (q *taskQueues) place(u unit, ordering string, front bool) {
	var ln *lane
	switch ordering {
	case config.OrderPartition:
		ln = &q.single
	case config.OrderKey:
		k := u.key()
		if k == nil {
			pushUnit(&q.free, u, front)
			return
		}
		ln = q.lanes[string(k)]
		if ln == nil {
			ln = &lane{key: string(k)}
			q.lanes[ln.key] = ln
		}
	default:
		pushUnit(&q.free, u, front)
		return
	}
	pushUnit(&ln.q, u, front)
	if !ln.busy && !ln.listed {
		ln.listed = true
		q.ready.Push(ln)
	}
}

// freeLane frees ln (nil: none) once its record (or work) is decided: it
// is listed ready again if it holds more, and dropped if it is empty.
func (q *taskQueues) freeLane(ln *lane) {
	if ln == nil {
		return
	}
	ln.busy = false
	switch {
	case ln.q.Len() > 0:
		ln.listed = true
		q.ready.Push(ln)
	case q.lanes != nil:
		delete(q.lanes, ln.key)
	}
}

// nextIsWork reports whether Task.pickLocked would take work next.
func (q *taskQueues) nextIsWork() bool {
	if u, ok := q.free.Peek(); ok && u.isWork() {
		return true
	}
	if ln, ok := q.ready.Peek(); ok {
		u, _ := ln.q.Peek()
		return u.isWork()
	}
	return false
}

func pushUnit(q *fifo.Queue[unit], u unit, front bool) {
	if front {
		q.PushFront(u)
	} else {
		q.Push(u)
	}
}

func (t *Task) runnableLocked() bool {
	return t.freeDueLocked() || t.q.ready.Len() > 0
}

// freeDueLocked reports whether the oldest record without an order
// constraint may start: under the retry tier only once it is due (records
// of a retry topic fall due in offset order, so none after it is due
// either).
func (t *Task) freeDueLocked() bool {
	u, ok := t.q.free.Peek()
	if !ok {
		return false
	}
	if u.isWork() {
		return true // work is due when placed
	}
	due := t.d.Role.due(u.r)
	return due.IsZero() || !due.After(time.Now())
}

// pickLocked takes the runnable record with the lowest offset (keeping the
// watermark moving), or work ahead of records; none when nothing is
// runnable.
func (t *Task) pickLocked() (unit, *lane) {
	var lu unit
	ln, _ := t.q.ready.Peek()
	if ln != nil {
		lu, _ = ln.q.Peek()
	}
	if fu, ok := t.q.free.Peek(); ok && t.freeDueLocked() && (lu.none() || fu.before(lu)) {
		t.q.free.Pop()
		return fu, nil
	}
	if lu.none() {
		return unit{}, nil
	}
	t.q.ready.Pop()
	ln.listed = false
	ln.busy = true
	ln.q.Pop()
	return lu, ln
}

// picked is a record (or work) taken to run and the lane it holds (nil:
// none).
type picked struct {
	unit
	ln *lane
}

// pickRunLocked appends to run up to max runnable records, taken as
// pickLocked takes them one by one; under ordering partition they are the
// partition's next records, which its one lane holds together (the run's
// records run one after another, in offset order). Work runs alone: a
// run is either one work or records up to the next work.
func (t *Task) pickRunLocked(run []picked, max int) []picked {
	for len(run) < max {
		if len(run) > 0 && run[0].ln == &t.q.single {
			if u, ok := t.q.single.q.Peek(); !ok || u.isWork() {
				break
			}
			u, _ := t.q.single.q.Pop()
			run = append(run, picked{u, &t.q.single})
			continue
		}
		if len(run) > 0 && t.q.nextIsWork() {
			break
		}
		u, ln := t.pickLocked()
		if u.none() {
			break
		}
		run = append(run, picked{u, ln})
		if u.isWork() {
			break
		}
	}
	return run
}

// runSizeLocked is how many records a worker takes in one run:
// batch_records, and under ordering key or none at most a share of the
// records runnable now as large as the pool could grow to take, so that
// one worker's run does not take what other instances could run beside it
// (records left runnable are what makes the pool grow).
func (t *Task) runSizeLocked() int {
	n := t.d.Config.BatchRecords
	if t.d.Config.Ordering != config.OrderPartition {
		pool := max(t.d.Config.Instances.Max, 1)
		runnable := t.q.free.Len() + t.q.ready.Len()
		n = min(n, max(1, (runnable+pool-1)/pool))
	}
	return n
}

// unpickLocked puts the records of rest, taken by pickRunLocked and not
// run, back at the front of their queues in offset order, and frees the
// lanes of their keys. The partition's one lane stays busy: the run's
// last record run holds it (or the caller frees it).
func (t *Task) unpickLocked(rest []picked) {
	for i := len(rest) - 1; i >= 0; i-- {
		switch p := rest[i]; {
		case p.ln == nil:
			t.q.free.PushFront(p.unit)
		case p.ln == &t.q.single:
			t.q.single.q.PushFront(p.unit)
		default:
			p.ln.q.PushFront(p.unit)
			t.releaseLocked(p.ln)
		}
	}
	t.q.queued += len(rest)
	t.q.started -= len(rest)
	t.dispatchLocked()
}

// release frees ln after its record finished processing (its produces may
// still be in flight: produce order per partition keeps outputs in order).
func (t *Task) release(ln *lane) {
	t.mu.Lock()
	t.releaseLocked(ln)
	t.mu.Unlock()
}

func (t *Task) releaseLocked(ln *lane) {
	t.q.freeLane(ln)
	t.dispatchLocked()
}

// Stop makes the task take no further record; workers finish the record in
// progress. Records not started stay uncommitted: the partition's next owner
// processes them.
func (t *Task) Stop() {
	t.mu.Lock()
	if t.q.stopping {
		t.mu.Unlock()
		return
	}
	t.q.stopping = true
	dropped := t.dropQueuedWorkLocked()
	t.q.free.Reset()
	t.q.ready.Reset()
	t.q.single.q.Reset()
	t.q.lanes = nil
	t.q.queued = 0
	t.pool.kick.Stop()
	if t.q.paused {
		t.q.paused = false
		t.d.Fetch.Pauser.ResumePartition(t.Topic, t.Partition)
	}
	t.mu.Unlock()
	for _, wk := range dropped {
		wk.Done(ErrWorkDropped)
	}
	close(t.life.stopCh)
}

// Abort interrupts guest calls in progress (they fail as canceled and their
// records stay uncommitted).
func (t *Task) Abort() { t.life.cancel() }

// Close releases the task's share of the host's in-flight records; records
// finishing later no longer count.
func (t *Task) Close() {
	t.mu.Lock()
	first := !t.q.closed
	if first {
		t.q.closed = true
		t.d.Budget.AddInFlight(-int64(t.q.inFlight))
	}
	t.mu.Unlock()
	if first && t.rel != nil {
		// Not under t.mu: settling takes the releaser's lock, then t.mu.
		t.rel.abandon(t.d.Budget.ReleaseOutputs)
	}
}

// WaitWorkers waits for every worker to exit, until deadline; it reports
// whether they did.
func (t *Task) WaitWorkers(deadline time.Time) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-t.life.wg.done():
		return true
	case <-timer.C:
		return false
	}
}

// workerGroup is a task's worker goroutines. done's channel is closed once
// they have all exited; one goroutine per task waits for that, started by
// the first call, so a wait that times out (WaitWorkers) leaves no
// goroutine of its own behind, and the one waiting ends with the workers.
type workerGroup struct {
	sync.WaitGroup
	once sync.Once
	ch   chan struct{}
}

func (g *workerGroup) done() <-chan struct{} {
	g.once.Do(func() {
		g.ch = make(chan struct{})
		go func() { g.Wait(); close(g.ch) }()
	})
	return g.ch
}

// Retire interrupts cut-off tasks and releases their resources.
func Retire(tasks []*Task) {
	for _, t := range tasks {
		t.Abort()
	}
	for _, t := range tasks {
		t.WaitWorkers(time.Now().Add(time.Minute))
		t.Close()
	}
}

func (t *Task) StartedPending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.q.started
}

// MaybeResume resumes the partition's fetching once the task drained to half
// of its bounds.
func (t *Task) MaybeResume() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.q.paused && !t.q.stopping && t.q.inFlight <= t.d.Config.MaxInFlight/2 && t.q.bytes <= t.d.Config.MaxInFlightBytes/2 {
		t.q.paused = false
		t.d.Fetch.Pauser.ResumePartition(t.Topic, t.Partition)
	}
}

// CaughtUp takes a fetch that brought the partition no records: its
// fetch offset is at the end the client may read, end (the last stable
// offset under read_committed, else the high watermark). With nothing in
// flight every record below it was done or skipped, so that end is the
// position: without this a partition whose committed offset was already at
// its end would show its whole length as lag, no record ever moving the
// position.
func (t *Task) CaughtUp(end int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.q.inFlight == 0 && end > t.position.Load() {
		t.position.Store(end)
	}
}

func (t *Task) lag() int64 {
	l := t.HighWatermark.Load() - t.position.Load()
	if l < 0 {
		return 0
	}
	return l
}

// autoSize is what a task measures for its instances: auto controller
// (dispatch.go's controlLocked feeds internal/sizing): one window's
// queueing, and the guest calls' wait for a core against their run time.
// The fields up to ctlCalls are guarded by task.mu; the counters below are
// added to by the workers after their calls and read by the controller.
type autoSize struct {
	sizer          *sizing.Pool
	capped         int           // times records waited grow_after with the pool at the target, this window
	ctlAt          time.Time     // when the window began
	ctlWait, ctlRn int64         // callWait and callRun then
	ctlCalls       int64         // and calls
	ctlBusy        time.Duration // the host's guest-call slot time then (host.Module.CoreUse)
	// The guest calls' wait for a core and run time, in nanoseconds.
	callWait, callRun atomic.Int64
	calls             atomic.Int64 // times a worker accounted calls (one or more each)
	warm              atomic.Int32 // workers whose first instance is created
}

// TaskGauges is a task at one moment: what Pipeline.Snapshot sums and
// metrics report, read under the task's lock in one go so that neither
// reaches into the task's fields.
type TaskGauges struct {
	Topic     string
	Partition int32

	Workers, Busy    int
	InFlight, Queued int
	Paused           bool
	Committed        int64 // -1: nothing committed by this owner yet
	Watermark        int64
	HasWatermark     bool
	Lag              int64
	States           [3]int64 // workers by state (workerIdle, workerBusy, workerAwaiting)
	Slots            []SlotGauges
	Sized            bool // instances: auto; the fields below are set
	Target           int
	Reason, Detail   string
	ChangedAt        time.Time
}

// SlotGauges is one instance of a task.
type SlotGauges struct {
	Slot                   int
	Handled, Faults, Pages int64
}

// Gauges returns the task's gauges; withSlots adds one entry per instance.
func (t *Task) Gauges(withSlots bool) TaskGauges {
	g := TaskGauges{Topic: t.Topic, Partition: t.Partition, Committed: t.Committed.Load(), Lag: t.lag()}
	g.Watermark, _, g.HasWatermark = t.Tracker.Watermark()
	t.mu.Lock()
	defer t.mu.Unlock()
	g.Workers, g.Busy, g.InFlight, g.Queued, g.Paused = t.pool.workers, t.pool.workers-len(t.pool.idleW), t.q.inFlight, t.q.queued, t.q.paused
	if t.pool.auto.sizer != nil {
		g.Sized, g.Target, g.Reason, g.Detail, g.ChangedAt = true, t.pool.auto.sizer.Target, t.pool.auto.sizer.Reason, t.pool.auto.sizer.Detail, t.pool.auto.sizer.ChangedAt
	}
	for slot, w := range t.pool.live {
		g.States[w.g.state.Load()]++
		if withSlots {
			g.Slots = append(g.Slots, SlotGauges{slot, w.g.handled.Load(), w.g.faults.Load(), w.g.pages.Load()})
		}
	}
	return g
}

// Finish counts r done once its outcome is durable; false when it was
// already (Ledger.Done), or when r triggered timer firings not yet durable
// under at_least_once (the last of them finishes it: timers.go).
func (t *Task) Finish(r *kgo.Record) bool {
	if t.rel != nil && t.rel.timers.holdFinish(r) {
		return false // finished with its round's firings (timers.go)
	}
	if !t.d.Ledger.Done(&t.Tracker, r) {
		return false
	}
	t.out.Done.Add(1)
	t.mu.Lock()
	t.q.inFlight--
	t.q.started--
	t.q.bytes -= len(r.Key) + len(r.Value)
	if !t.q.closed {
		t.d.Budget.AddInFlight(-1)
	}
	paused := t.q.paused
	t.mu.Unlock()
	if paused {
		t.d.Fetch.Flow.SignalFlow()
	}
	if t.d.Fetch.Flow.Awaiting.Load() {
		t.d.Fetch.Flow.SignalDemand()
	}
	return true
}

// CountCommitted moves the outcomes counted since the last call (under
// exactly_once: the records the task released into the transaction that
// just committed) to the partition's counters. The committer calls it
// after a commit with every release held back (the transaction's gate)
// and every produce of the transaction answered; at_least_once counts
// there at once, and it does nothing.
func (t *Task) CountCommitted() {
	if t.out == t.ps {
		return
	}
	for _, c := range committedCounters {
		if n := c(t.out).Swap(0); n != 0 {
			c(t.ps).Add(n)
		}
	}
}

// committedCounters are the outcome counters a task counts in out.
var committedCounters = [...]hooks.Counter{
	func(s *hooks.Stats) *atomic.Int64 { return &s.Done },
	func(s *hooks.Stats) *atomic.Int64 { return &s.Dropped },
	func(s *hooks.Stats) *atomic.Int64 { return &s.Outputs },
	func(s *hooks.Stats) *atomic.Int64 { return &s.DeadLetter },
	func(s *hooks.Stats) *atomic.Int64 { return &s.Retried },
}

// version is the version the task's records run on: the canary's if its
// partition is in the canary's share, else the pipeline's current one.
func (t *Task) version() *version.Version {
	if c := t.d.Mods.Canary.Load(); c != nil && c.In(t.d.Config.Name, t.Topic, t.Partition) {
		return c.Ver
	}
	return t.d.Mods.Current()
}
