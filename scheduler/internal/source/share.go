package source

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/scheduler/internal/ledger"
)

// Share is the source of a consume: share pipeline (RATIONALE.md, "Share
// groups"; DESIGN.md, "The share path"): its members' poll loops and the
// locks of the records they hold (ledger.ShareLocks), which its ledger
// (ledger.Share) takes as records are acknowledged. Outputs and
// failure copies are produced as under offset commits (the pipeline's sink
// is a partition.PlainSink); what differs is how a record becomes durable:
// its acknowledgement instead of a watermark.
//
// A host runs up to two members of the share group per pipeline
// (MemberRecords; RATIONALE.md, "Two members, polls that overlap"): a
// member polls only once its previous poll's records are all acknowledged,
// so with one member the pool idled at every poll's barrier; with two, one
// member's poll runs while the other's records are in flight. The first
// member is the pipeline's client (Deps.Client, which also produces the
// outputs); the second is a client of its own, made by Run and closed by
// Leave, that only consumes.
type Share struct {
	d     Deps
	locks *ledger.ShareLocks
	// dial makes the second member's client, polling at most its records
	// a poll (MemberRecords); nil: one member.
	dial func(maxRecords int) (*kgo.Client, error)
	// second is the second member's client: set by Run before its poll
	// loop starts, read by the renewal loop and by Leave.
	second atomic.Pointer[kgo.Client]
	// dispatchMu serialises the members' dispatches: Deps.dispatch and
	// partition.Set.Dispatch have one caller at a time. Taken with
	// nothing held; Set.mu and task.mu are taken under it (DESIGN.md,
	// "Lock order", item 4).
	dispatchMu sync.Mutex
}

// NewShare is the source of the share pipeline d is of, holding the
// records' locks in locks; dial makes the client of a second member
// (nil: the pipeline's client is its one member).
func NewShare(d Deps, locks *ledger.ShareLocks, dial func(maxRecords int) (*kgo.Client, error)) *Share {
	return &Share{d: d, locks: locks, dial: dial}
}

// MemberRecords splits share.max_records n between a host's members of one
// pipeline: what each member's poll may acquire, the first member's first.
// Their sum is n, so the locks a host holds stay at most
// share.max_records; under 2 records a poll there is one member.
func MemberRecords(n int) []int {
	if n < ledger.MaxShareMembers {
		return []int{n}
	}
	return []int{n - n/2, n / 2}
}

// Locks are the locks of the records the source holds, and their counters.
func (c *Share) Locks() *ledger.ShareLocks { return c.locks }

// Run runs the members' poll loops (pollLoop), the renewal loop and the
// flow loop; it returns once every poll loop ended. A share group has no
// assignment callbacks, and every member may get records of every
// partition.
func (c *Share) Run(ctx context.Context) {
	d := &c.d
	d.Loops.Add(2)
	go c.renewLoop()
	go d.flowLoop()
	defer close(d.PollDone)
	c.setStartOffset(ctx)
	per := MemberRecords(d.Pipeline.Share.MaxRecords)
	var polls sync.WaitGroup
	if len(per) > 1 && c.dial != nil && ctx.Err() == nil {
		cl, err := c.dial(per[1])
		if err != nil {
			// Only the options could be refused, and the first member's
			// were the same: one member still consumes everything.
			d.Log.Warn("share group: the second member's client could not be made; one member polls", "err", err)
			per = per[:1]
		} else {
			c.second.Store(cl)
			polls.Add(1)
			go func() {
				defer polls.Done()
				c.pollLoop(ctx, 1, cl, per[1])
			}()
		}
	}
	c.pollLoop(ctx, 0, d.Client, per[0])
	polls.Wait()
}

// pollLoop is member's poll loop on cl: it polls only once every record of
// its previous poll is acknowledged (a poll accepts whatever of the
// previous one is not) and while the host is under host.max_in_flight,
// registers the records' locks, and hands the records to the pipeline's
// one task (partition.Set.Dispatch of a pool: partition.NewPool).
func (c *Share) pollLoop(ctx context.Context, member int, cl *kgo.Client, maxRecords int) {
	d := &c.d
	var lastErr time.Time
	for {
		if !c.awaitAcks(ctx, member) {
			return
		}
		fetches := cl.PollRecords(ctx, maxRecords)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			// A record this poll returned stays held: stop releases it.
			c.locks.Add(member, fetches, time.Now())
			return
		}
		c.locks.Add(member, fetches, time.Now())
		c.dispatchMu.Lock()
		d.logFetchErrors(fetches, &lastErr)
		d.dispatch(fetches)
		c.dispatchMu.Unlock()
	}
}

// setStartOffset makes kafka.start_offset the share group's
// share.auto.offset.reset (where a share group with no state starts; the
// broker's default is latest), as it is a consumer group's reset offset.
// It is set at every start, before the member's first poll; a refusal (the
// host lacks ALTER_CONFIGS on the group) is logged, not fatal.
func (c *Share) setStartOffset(ctx context.Context) {
	d := &c.d
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, d.Group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Op, cfg.Value = "share.auto.offset.reset", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr(d.Config.Kafka.StartOffset)
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, d.Client)
	if err == nil && len(resp.Resources) == 1 {
		err = kerr.ErrorForCode(resp.Resources[0].ErrorCode)
	}
	if err != nil {
		d.Log.Warn("could not set the share group's share.auto.offset.reset from kafka.start_offset (the host needs ALTER_CONFIGS on the group); a new group starts where the broker's default says",
			"group", d.Group, "start_offset", d.Config.Kafka.StartOffset, "err", err)
	}
}

// awaitAcks returns once member holds no acquired record and the host is
// under host.max_in_flight, or false when ctx ends first.
func (c *Share) awaitAcks(ctx context.Context, member int) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for c.locks.HeldBy(member) > 0 || c.d.Budget.OverInFlight() {
		select {
		case <-ctx.Done():
			return false
		case <-c.locks.Emptied(member):
		case <-tick.C:
		}
	}
	return true
}

// renewLoop keeps the held records' locks alive until the pipeline quits.
func (c *Share) renewLoop() {
	d := &c.d
	defer d.Loops.Done()
	tick := time.NewTicker(c.locks.RenewInterval())
	defer tick.Stop()
	for {
		select {
		case <-d.Quit:
			return
		case now := <-tick.C:
			if c.locks.Renew(now) > 0 {
				// Sent now, not with the next batch of acknowledgements.
				c.flushRenewals()
			}
			tick.Reset(c.locks.RenewInterval())
		}
	}
}

// flushRenewals sends the renewals of both members at once, not with
// their next batch of acknowledgements.
func (c *Share) flushRenewals() {
	ctx, cancel := context.WithTimeout(context.Background(), c.locks.RenewInterval()*5)
	defer cancel()
	for _, cl := range []*kgo.Client{c.d.Client, c.second.Load()} {
		if cl == nil {
			continue
		}
		if err := cl.FlushAcks(ctx); err != nil {
			c.d.Log.Debug("sending lock renewals", "err", err)
		}
	}
}

// Leave sends the last acknowledgements of each member
// (commit.ShareAcks.Final released what the host still held), then each
// leaves the share group; the second member's client is closed (the first
// is the pipeline's, which its committer closes). The two leave side by
// side: with the brokers down each waits out its flush's timeout, and
// one after the other would double the stop. Called after Run returned.
func (c *Share) Leave(ctx context.Context) {
	var wg sync.WaitGroup
	if cl := c.second.Load(); cl != nil {
		wg.Go(func() {
			c.leave(ctx, cl)
			cl.Close()
		})
	}
	c.leave(ctx, c.d.Client)
	wg.Wait()
}

func (c *Share) leave(ctx context.Context, cl *kgo.Client) {
	d := &c.d
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	if err := cl.FlushAcks(fctx); err != nil {
		d.Log.Warn("sending the last acknowledgements; records not acknowledged are redelivered after their lock", "err", err)
	}
	cancel()
	if err := cl.LeaveGroupContext(ctx); err != nil {
		d.Log.Warn("leaving the share group", "err", err)
	}
}
