package dashboard

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/wasmstream/wasmstream/scheduler"
)

// frame is what one sample sends to the page (JSON, one SSE event).
type frame struct {
	At        int64           `json:"at"`      // Unix ms
	Started   int64           `json:"started"` // when the host (its dashboard) started, Unix ms: counters count from there
	Pipelines []pipelineFrame `json:"pipelines"`
	Failed    []Entry         `json:"failed"` // newest first
	Versions  []versionFrame  `json:"versions"`
	Events    []Event         `json:"events"` // newest first
	Hosts     *hostsFrame     `json:"hosts,omitempty"`
}

type pipelineFrame struct {
	Name       string           `json:"name"`
	Module     string           `json:"module"` // digest
	Label      string           `json:"label,omitempty"`
	InRate     float64          `json:"in_rate"`
	OutRate    float64          `json:"out_rate"`
	DoneRate   float64          `json:"done_rate"`
	Lag        int64            `json:"lag"`
	InFlight   int64            `json:"in_flight"`
	Queued     int64            `json:"queued"`
	Done       int64            `json:"done"`
	Outputs    int64            `json:"outputs"`
	Dropped    int64            `json:"dropped"` // records the module took with no output (filtered)
	Retried    int64            `json:"retried"`
	DeadLetter int64            `json:"dead_lettered"`
	Faults     int64            `json:"faults"`
	Instances  instanceCounts   `json:"instances"`
	Retry      instanceCounts   `json:"retry_workers"`
	AsyncLimit int              `json:"async_limit,omitempty"`
	AsyncWhy   string           `json:"async_reason,omitempty"`
	PoolWhy    string           `json:"pool_reason,omitempty"`
	Partitions []partitionFrame `json:"partitions"`
	Tiers      []tierFrame      `json:"tiers"`
	DeadByKind map[string]int64 `json:"dead_by_kind"`
	// Canary is the version the pipeline runs beside Module on a share
	// of its partitions (those whose partitionFrame says Canary); nil:
	// none.
	Canary *canaryFrame `json:"canary,omitempty"`
}

// KindReject is the kind of a record the module rejected on purpose (a
// terminal guest.fail): a business outcome, shown apart from faults.
const KindReject = "guest.fail"

// DeadFaulty reports whether a dead letter of p came from something other
// than a rejection (a fault, retries exhausted, "other" kinds): the card
// shows the dead letters as a problem only then. DeadByKind and
// DeadLetter are read at slightly different times, so the kinds decide.
func (p pipelineFrame) DeadFaulty() bool {
	for k, c := range p.DeadByKind {
		if k != KindReject && c > 0 {
			return true
		}
	}
	return false
}

type instanceCounts struct {
	Idle     int `json:"idle"`
	Busy     int `json:"busy"`
	Awaiting int `json:"awaiting"`
	Borrowed int `json:"borrowed"`
}

type partitionFrame struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Lag       int64  `json:"lag"`
	InFlight  int    `json:"in_flight"`
	Committed int64  `json:"committed"`
	Paused    bool   `json:"paused"`
	Canary    bool   `json:"canary,omitempty"` // the canary runs this partition
}

type tierFrame struct {
	Topic   string `json:"topic"`
	Delay   string `json:"delay"`
	Backlog int64  `json:"backlog"`
	Pending int64  `json:"pending"`  // recent retries routed here, not yet due
	NextDue int64  `json:"next_due"` // the earliest of them, Unix ms (0: none)
}

// sampler turns successive views into rates. It is used by the sampling
// goroutine only.
type sampler struct {
	prev   map[string]scheduler.Snapshot
	prevAt time.Time
	failed map[string]int64 // primary -> retried + dead-lettered, at the previous sample
	watch  watch
	kept   kept
}

func (s *Server) sample(sm *sampler, now time.Time) frame {
	views := s.cfg.Source.View()
	dt := now.Sub(sm.prevAt).Seconds()
	next := make(map[string]scheduler.Snapshot, len(views))
	f := frame{At: now.UnixMilli(), Started: s.started.UnixMilli(), Failed: s.ring.newest()}
	index := map[string]int{}
	due := s.ring.dueSummary(now)
	man := s.manifest()
	rate := func(cur, prev int64) float64 {
		if dt <= 0 || sm.prevAt.IsZero() || cur < prev {
			return 0
		}
		return float64(cur-prev) / dt
	}
	for _, v := range views {
		next[v.Name] = v.Snapshot
		if v.Primary != "" {
			continue
		}
		prev := sm.prev[v.Name]
		pf := pipelineFrame{Name: v.Name, Module: v.Module.Digest, Label: label(v.Label), Dropped: v.Dropped,
			InRate: rate(v.Fetched, prev.Fetched), OutRate: rate(v.Outputs, prev.Outputs), DoneRate: rate(v.Done, prev.Done),
			Lag: v.Lag, InFlight: v.InFlight, Queued: v.Queued, Done: v.Done, Outputs: v.Outputs, Retried: v.Retried,
			DeadLetter: v.DeadLetter, Faults: v.Faults, AsyncLimit: v.AsyncLimit, AsyncWhy: v.AsyncReason, PoolWhy: v.PoolReason,
			DeadByKind: s.ring.deadByKind(v.Name), Partitions: []partitionFrame{}, Tiers: []tierFrame{}}
		pf.Instances = partitions(&pf, v.Partitions, true)
		for _, t := range v.Tiers {
			d := due[t.Topic]
			pf.Tiers = append(pf.Tiers, tierFrame{Topic: t.Topic, Delay: duration(t.Delay), Pending: d[0], NextDue: d[1]})
		}
		index[v.Name] = len(f.Pipelines)
		f.Pipelines = append(f.Pipelines, pf)
	}
	foldRetryTiers(&f, views, index)
	names, failed := s.addHistory(sm, &f)
	f.Versions = s.versions(names, man)
	s.compare(&sm.watch, f.At, views, f.Versions)
	sm.kept.apply(f.Versions, man)
	markCanaries(&f)
	f.Events = s.evlog.newest()
	f.Hosts = s.hosts(now)
	sm.prev, sm.prevAt, sm.failed = next, now, failed
	return f
}

// foldRetryTiers adds a retry tier's workers and its backlog per tier
// topic, and its faults, to its primary's frame.
func foldRetryTiers(f *frame, views []scheduler.PipelineView, index map[string]int) {
	for _, v := range views {
		i, ok := index[v.Primary]
		if v.Primary == "" || !ok {
			continue
		}
		pf := &f.Pipelines[i]
		pf.Retry = partitions(nil, v.Partitions, false)
		pf.Faults += v.Faults
		pf.DeadLetter += v.DeadLetter
		pf.Retried += v.Retried
		pf.Dropped += v.Dropped
		for _, p := range v.Partitions {
			for j := range pf.Tiers {
				if pf.Tiers[j].Topic == p.Topic {
					pf.Tiers[j].Backlog += p.Lag
				}
			}
		}
	}
}

// addHistory records each pipeline's point of the chart history and
// returns the pipelines' names and their failed counts so far.
func (s *Server) addHistory(sm *sampler, f *frame) ([]string, map[string]int64) {
	names := make([]string, len(f.Pipelines))
	failed := make(map[string]int64, len(f.Pipelines))
	for i, pf := range f.Pipelines {
		names[i] = pf.Name
		n := pf.Retried + pf.DeadLetter
		failed[pf.Name] = n
		d := n - sm.failed[pf.Name]
		if sm.failed == nil || d < 0 {
			d = 0
		}
		s.hist.add(pf.Name, point{At: f.At, In: float32(pf.InRate), Out: float32(pf.OutRate), Lag: pf.Lag, Failed: int32(min(d, 1<<31-1))})
	}
	return names, failed
}

// markCanaries gives each pipeline's frame its canary, and its label when
// the view had none.
func markCanaries(f *frame) {
	for i := range f.Pipelines {
		pf := &f.Pipelines[i]
		for _, v := range f.Versions {
			if v.Pipeline == pf.Name {
				pf.Canary = v.Canary
				if pf.Label == "" && v.Digest == pf.Module {
					pf.Label = v.Label
				}
			}
		}
	}
}

// maxHistory bounds the earlier versions listed per pipeline.
const maxHistory = 10

// partitions sums p's instances by state and, with list, lists them in
// pf sorted by topic and partition.
func partitions(pf *pipelineFrame, ps []scheduler.PartitionView, list bool) instanceCounts {
	var c instanceCounts
	for _, p := range ps {
		c.Idle += p.Idle
		c.Busy += p.Busy
		c.Awaiting += p.Awaiting
		c.Borrowed += p.Borrowed
		if list {
			pf.Partitions = append(pf.Partitions, partitionFrame{p.Topic, p.Partition, p.Lag, p.InFlight, p.Committed, p.Paused, p.Canary})
		}
	}
	if list {
		sort.Slice(pf.Partitions, func(i, j int) bool {
			a, b := pf.Partitions[i], pf.Partitions[j]
			return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
		})
	}
	return c
}

// run samples every interval, whether a page watches or not (the history
// and the event log are the host's, kept for the next page), keeps the
// newest frame for a page's first response and sends it to the pages
// connected, until stop closes.
func (s *Server) run() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	var sm sampler
	for {
		select {
		case <-s.stop:
			return
		case now := <-tick.C:
			s.tick(&sm, now)
		}
	}
}

func (s *Server) tick(sm *sampler, now time.Time) {
	f := s.sample(sm, now)
	s.last.Store(&f)
	if s.hub.count() == 0 {
		// Nobody watches: nothing encoded, and no stale frame for the next.
		s.hub.forget()
		return
	}
	b, err := json.Marshal(f)
	if err != nil {
		s.cfg.Log.Error("dashboard: encoding a sample", "err", err)
		return
	}
	s.hub.publish(b)
}
