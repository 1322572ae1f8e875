package source

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/wasmstream/wasmstream/scheduler/internal/ledger"
)

// Share is the source of a consume: share pipeline (RATIONALE.md, "Share
// groups"; DESIGN.md, "The share path"): its poll loop and the locks of the
// records it holds (ledger.ShareLocks), which its ledger
// (ledger.Share) takes as records are acknowledged. Outputs and
// failure copies are produced as under offset commits (the pipeline's sink
// is a partition.PlainSink); what differs is how a record becomes durable:
// its acknowledgement instead of a watermark.
type Share struct {
	d     Deps
	locks *ledger.ShareLocks
}

// NewShare is the source of the share pipeline d is of, holding the
// records' locks in locks.
func NewShare(d Deps, locks *ledger.ShareLocks) *Share { return &Share{d: d, locks: locks} }

// Locks are the locks of the records the source holds, and their counters.
func (c *Share) Locks() *ledger.ShareLocks { return c.locks }

// Run is the poll loop: it polls only once every record of the previous
// poll is acknowledged (a poll accepts whatever of the previous one is not)
// and while the host is under host.max_in_flight, registers the records'
// locks, and hands the records to the pipeline's one task (partition.Set.Dispatch of
// a pool: partition.NewPool): a share group has no assignment callbacks, and
// every member may get records of every partition.
func (c *Share) Run(ctx context.Context) {
	d := &c.d
	d.Loops.Add(2)
	go c.renewLoop()
	go d.flowLoop()
	defer close(d.PollDone)
	c.setStartOffset(ctx)
	var lastErr time.Time
	for {
		if !c.awaitAcks(ctx) {
			return
		}
		fetches := d.Client.PollRecords(ctx, d.Pipeline.Share.MaxRecords)
		if fetches.IsClientClosed() || ctx.Err() != nil {
			// A record this poll returned stays held: stop releases it.
			c.locks.Add(fetches, time.Now())
			return
		}
		d.logFetchErrors(fetches, &lastErr)
		c.locks.Add(fetches, time.Now())
		d.dispatch(fetches)
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

// awaitAcks returns once no acquired record is held and the host is under
// host.max_in_flight, or false when ctx ends first.
func (c *Share) awaitAcks(ctx context.Context) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for c.locks.Len() > 0 || c.d.Budget.OverInFlight() {
		select {
		case <-ctx.Done():
			return false
		case <-c.locks.Empty:
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
				ctx, cancel := context.WithTimeout(context.Background(), c.locks.RenewInterval()*5)
				if err := d.Client.FlushAcks(ctx); err != nil {
					d.Log.Debug("sending lock renewals", "err", err)
				}
				cancel()
			}
			tick.Reset(c.locks.RenewInterval())
		}
	}
}

// Leave sends the last acknowledgements (commit.ShareAcks.Final released
// what the host still held), then leaves the share group.
func (c *Share) Leave(ctx context.Context) {
	d := &c.d
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	if err := d.Client.FlushAcks(fctx); err != nil {
		d.Log.Warn("sending the last acknowledgements; records not acknowledged are redelivered after their lock", "err", err)
	}
	cancel()
	if err := d.Client.LeaveGroupContext(ctx); err != nil {
		d.Log.Warn("leaving the share group", "err", err)
	}
}
