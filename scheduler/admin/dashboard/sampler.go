package dashboard

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/wasmstream/wasmstream/scheduler"
)

// frame is what one sample sends to the page (JSON, one SSE event).
type frame struct {
	At        int64           `json:"at"` // Unix ms
	Pipelines []pipelineFrame `json:"pipelines"`
	Failed    []Entry         `json:"failed"` // newest first
}

type pipelineFrame struct {
	Name       string           `json:"name"`
	Module     string           `json:"module"` // digest
	InRate     float64          `json:"in_rate"`
	OutRate    float64          `json:"out_rate"`
	DoneRate   float64          `json:"done_rate"`
	Lag        int64            `json:"lag"`
	InFlight   int64            `json:"in_flight"`
	Queued     int64            `json:"queued"`
	Done       int64            `json:"done"`
	Outputs    int64            `json:"outputs"`
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
	Deploy     *deployFrame     `json:"deploy,omitempty"`
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
}

type tierFrame struct {
	Topic   string `json:"topic"`
	Delay   string `json:"delay"`
	Backlog int64  `json:"backlog"`
	Pending int64  `json:"pending"`  // recent retries routed here, not yet due
	NextDue int64  `json:"next_due"` // the earliest of them, Unix ms (0: none)
}

type deployFrame struct {
	Active   string    `json:"active"`
	History  []string  `json:"history"` // earlier versions, newest first
	Deployed time.Time `json:"deployed"`
}

// sampler turns successive views into rates. It is used by the sampling
// goroutine only.
type sampler struct {
	prev   map[string]scheduler.Snapshot
	prevAt time.Time
}

func (s *Server) sample(sm *sampler, now time.Time) frame {
	views := s.cfg.Source.View()
	dt := now.Sub(sm.prevAt).Seconds()
	next := make(map[string]scheduler.Snapshot, len(views))
	f := frame{At: now.UnixMilli(), Failed: s.ring.newest()}
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
		pf := pipelineFrame{Name: v.Name, Module: v.Module.Digest,
			InRate: rate(v.Fetched, prev.Fetched), OutRate: rate(v.Outputs, prev.Outputs), DoneRate: rate(v.Done, prev.Done),
			Lag: v.Lag, InFlight: v.InFlight, Queued: v.Queued, Done: v.Done, Outputs: v.Outputs, Retried: v.Retried,
			DeadLetter: v.DeadLetter, Faults: v.Faults, AsyncLimit: v.AsyncLimit, AsyncWhy: v.AsyncReason, PoolWhy: v.PoolReason,
			DeadByKind: s.ring.deadByKind(v.Name), Partitions: []partitionFrame{}, Tiers: []tierFrame{}}
		pf.Instances = partitions(&pf, v.Partitions, true)
		for _, t := range v.Tiers {
			d := due[t.Topic]
			pf.Tiers = append(pf.Tiers, tierFrame{Topic: t.Topic, Delay: t.Delay.String(), Pending: d[0], NextDue: d[1]})
		}
		if ps, ok := man.Pipelines[v.Name]; ok && ps != nil {
			d := &deployFrame{Active: ps.Active, Deployed: ps.Deployed, History: []string{}}
			for i := len(ps.History) - 1; i >= 0 && len(d.History) < maxHistory; i-- {
				d.History = append(d.History, ps.History[i])
			}
			pf.Deploy = d
		}
		index[v.Name] = len(f.Pipelines)
		f.Pipelines = append(f.Pipelines, pf)
	}
	// A retry tier adds its workers and its backlog per tier topic, and
	// its faults, to its primary.
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
		for _, p := range v.Partitions {
			for j := range pf.Tiers {
				if pf.Tiers[j].Topic == p.Topic {
					pf.Tiers[j].Backlog += p.Lag
				}
			}
		}
	}
	sm.prev, sm.prevAt = next, now
	return f
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
			pf.Partitions = append(pf.Partitions, partitionFrame{p.Topic, p.Partition, p.Lag, p.InFlight, p.Committed, p.Paused})
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

// run samples every interval and publishes each frame, until stop closes.
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
			if s.hub.count() == 0 {
				// Nobody watches: no sampling. Rates start again from the
				// next sample.
				sm = sampler{}
				s.hub.forget()
				continue
			}
			s.publish(&sm, now)
		}
	}
}

func (s *Server) publish(sm *sampler, now time.Time) {
	b, err := json.Marshal(s.sample(sm, now))
	if err != nil {
		s.cfg.Log.Error("dashboard: encoding a sample", "err", err)
		return
	}
	s.hub.publish(b)
}
