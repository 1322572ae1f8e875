package scheduler

import (
	"context"
	"slices"
	"sync"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
)

// A canary's partitions are a function of the pipeline's name and the
// topic, so anyone who can produce to the input can send poison to those
// partitions only: a canary identical to the stable code then fails more
// often than the stable version, and a comparison of failure rates alone
// aborts it (RATIONALE.md, "The fleet registry"). What tells a canary's fault from
// its input's is the stable version's answer to the same record: each
// record the canary fails is run again, on this host, on the stable
// version, and counted by kind of failure as checked, and as shared when
// the stable version fails it too. The canary is judged on the failures it
// does not share (rollout.Guard, scheduler/registry/rollout).
//
// The check runs the stable version with nothing leaving the host: its
// outputs are dropped. It is done only where that is all a run does: not
// for a stable version that starts asynchronous operations (an HTTP call
// is a side effect), not for a pipeline that keeps state (the run would
// read state the canary's failed record never wrote, and a state write
// would have to be thrown away too). There the counts say so (no checks)
// and the canary is judged by kind against the stable version's rates.
//
// A check costs one guest call on one extra instance of the stable
// version per pipeline and host, one at a time, taking its guest-call slot
// like any record. At most checkQueue failed records wait for a check;
// when they are that many, a new one takes the place of a waiting one of
// the kind with the most waiting, so that every kind of failure keeps
// being checked. The failures not checked are counted as failures only:
// the judgement takes the checked ones as a sample of their kind.

// checkQueue bounds the failed records waiting for a check.
const checkQueue = 8

// canaryCheck runs the records a canary failed on the pipeline's stable
// version. Its goroutine is started with the canary and stopped when the
// canary ends or the runner stops; it owns its instance.
type canaryCheck struct {
	p   *Pipeline   // the primary pipeline: its current version is the stable one
	ver *modVersion // the canary's version, whose tally the checks go to

	mu      sync.Mutex
	waiting []checkJob    // at most checkQueue, oldest first
	wake    chan struct{} // signalled when a job is added

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

type checkJob struct {
	rec  abi.Record // a copy: the failed record moves on to its retry or dead letter
	kind string
}

// checkable reports whether records may be run on p's stable version
// without side effects (see above).
func checkable(p *Pipeline) bool {
	return !p.pc.State.Enabled && !p.mods.Current().M.Info().Async
}

func newCanaryCheck(p *Pipeline, ver *modVersion) *canaryCheck {
	c := &canaryCheck{p: p, ver: ver, wake: make(chan struct{}, 1), done: make(chan struct{})}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.run()
	return c
}

// Offer queues rec, failed by the canary with a failure of kind, for a
// check (see checkQueue for a full queue).
func (c *canaryCheck) Offer(rec *abi.Record, kind string) {
	j := checkJob{rec: *rec, kind: kind}
	j.rec.Key, j.rec.Value = slices.Clone(rec.Key), slices.Clone(rec.Value)
	j.rec.Headers = make([]abi.Header, len(rec.Headers))
	for i, h := range rec.Headers {
		j.rec.Headers[i] = abi.Header{Key: h.Key, Value: slices.Clone(h.Value)}
	}
	c.mu.Lock()
	if len(c.waiting) < checkQueue {
		c.waiting = append(c.waiting, j)
	} else if i := c.replaceable(kind); i >= 0 {
		c.waiting = append(slices.Delete(c.waiting, i, i+1), j)
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// replaceable is the index of the oldest waiting job of the kind with the
// most waiting jobs, if that kind has more than kind; -1 if none.
func (c *canaryCheck) replaceable(kind string) int {
	n := map[string]int{}
	for _, w := range c.waiting {
		n[w.kind]++
	}
	most := kind
	for k, m := range n {
		if m > n[most] || (m == n[most] && k < most) {
			most = k
		}
	}
	if n[most] <= n[kind] {
		return -1
	}
	return slices.IndexFunc(c.waiting, func(w checkJob) bool { return w.kind == most })
}

// next takes the oldest waiting job.
func (c *canaryCheck) next() (checkJob, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waiting) == 0 {
		return checkJob{}, false
	}
	j := c.waiting[0]
	c.waiting = slices.Delete(c.waiting, 0, 1)
	return j, true
}

// Stop ends the checks (a call in progress is interrupted) and waits for
// the goroutine.
func (c *canaryCheck) Stop() {
	c.once.Do(func() {
		c.cancel()
		<-c.done
	})
}

func (c *canaryCheck) run() {
	defer close(c.done)
	var in *host.Instance
	var inVer *modVersion
	closeInstance := func() {
		if in != nil {
			in.Close(context.Background())
			inVer.Release()
			in, inVer = nil, nil
		}
	}
	defer closeInstance()
	for {
		j, ok := c.next()
		if !ok {
			select {
			case <-c.ctx.Done():
				return
			case <-c.wake:
				continue
			}
		}
		if !checkable(c.p) {
			continue
		}
		v := c.p.mods.Current()
		if in == nil || inVer != v || in.Dead() {
			closeInstance()
			v.Acquire()
			var err error
			if in, err = v.M.NewInstance(c.ctx); err != nil {
				v.Release()
				in = nil
				continue
			}
			inVer = v
		}
		res := in.Process(c.ctx, &j.rec, nil)
		c.p.shared.budget.ReleaseOutputs(res.HeldBytes) // dropped: nothing of a check leaves the host
		if c.ctx.Err() != nil {
			return
		}
		if res.Status == abi.StatusPending {
			closeInstance() // not a run without side effects after all
			continue
		}
		c.ver.Tally.Checked(j.kind, res.Status != abi.StatusOK)
	}
}
