// Package slots shares the host's guest-call slots among weighted groups.
//
// The host lets at most one guest call per core run at once (RATIONALE.md,
// "Faults and instances", on guest calls and cores): the Go scheduler cannot preempt a goroutine
// inside compiled guest code, so calls beyond the cores would sit runnable
// and miss their deadlines. A Pool is that bound; each pipeline takes its
// slots through its own Group (host.Engine makes one per pipeline name, so a
// pipeline's retry tier and every deployed version share it).
//
// # Fair share
//
// A group is active while it has calls running or waiting, and for Linger
// after its last call returned (the gap between one record and the next).
// An active group's share is slots × weight / (sum of the active groups'
// weights). When a slot is free it goes, in this order:
//
//  1. to an active group below its share, the one that used the least slot
//     time per weight first. If that group has no call waiting (it is in the
//     gap between two calls) the slot is held for it until it asks again or
//     its Linger runs out, so that a group with a call always waiting cannot
//     take the slot in that gap;
//  2. otherwise to the waiting group with the fewest running calls per
//     weight (slots are never left idle for a group above its share).
//
// Slot time is counted per group (virtual time: call durations divided by
// the weight); a group that becomes active starts level with the least
// served active group, and no group is more than MaxCredit behind the most
// served one, so time spent idle is not banked.
//
// # Worst case
//
// A call cannot be taken back once it started. A group that becomes active
// while other groups hold every slot waits until one of their calls returns,
// at most their record timeout; from then on it keeps its share of slots
// whenever it has calls to make. With more groups than slots (or one slot)
// shares are fractions of a slot: groups then take turns ordered by the slot
// time they used, and a call may wait one call of each other group.
package slots

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Options.
const (
	DefaultLinger    = 50 * time.Millisecond
	DefaultMaxCredit = time.Second
)

// Options tune a Pool; zero values take the defaults.
type Options struct {
	// Linger is how long a group stays active after its last call returned:
	// below its share, a free slot is held for it that long.
	Linger time.Duration
	// MaxCredit bounds how far a group's slot time may lag the most served
	// active group's.
	MaxCredit time.Duration
}

// Pool is n slots shared by groups. Safe for concurrent use.
type Pool struct {
	n         int
	linger    time.Duration
	maxCredit float64 // nanoseconds of virtual time

	// waiting counts calls queued for a slot, read without mu by
	// Contended.
	waiting atomic.Int32

	mu      sync.Mutex
	used    int
	busy    time.Duration // slot time held in all (∫ used dt) up to busyAt
	busyAt  time.Time
	groups  map[string]*Group
	order   []*Group // creation order: deterministic ties
	timer   *time.Timer
	timerAt time.Time // when timer fires; zero when not armed
}

// Group is one pipeline's access to the pool.
type Group struct {
	p    *Pool
	name string

	// Guarded by p.mu.
	weight      int
	running     int
	held        int // slots held for the group during one dispatch
	waiters     []*waiter
	vtime       float64 // slot time used, in nanoseconds divided by weight
	lastRelease time.Time
}

type waiter struct {
	ch      chan struct{} // receives the grant (buffered)
	granted bool
	at      time.Time
}

var waiters = sync.Pool{New: func() any { return &waiter{ch: make(chan struct{}, 1)} }}

// New returns a pool of n slots (at least 1).
func New(n int, o Options) *Pool {
	if o.Linger <= 0 {
		o.Linger = DefaultLinger
	}
	if o.MaxCredit <= 0 {
		o.MaxCredit = DefaultMaxCredit
	}
	return &Pool{n: max(n, 1), linger: o.Linger, maxCredit: float64(o.MaxCredit), groups: map[string]*Group{}}
}

// Size is the number of slots.
func (p *Pool) Size() int { return p.n }

// Group returns the group called name, creating it; weight (at least 1)
// replaces the group's previous weight.
func (p *Pool) Group(name string, weight int) *Group {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.groups[name]
	if g == nil {
		g = &Group{p: p, name: name}
		p.groups[name] = g
		p.order = append(p.order, g)
	}
	g.weight = max(weight, 1)
	return g
}

// Held is a slot taken by Acquire; call Release once the call returned.
type Held struct {
	g     *Group
	start time.Time
}

// Acquire waits for a slot of the group's share. It fails only when ctx
// ends first.
func (g *Group) Acquire(ctx context.Context) (Held, error) {
	p := g.p
	p.mu.Lock()
	now := time.Now()
	g.wake(now)
	w := waiters.Get().(*waiter)
	g.waiters = append(g.waiters, w)
	p.waiting.Add(1)
	p.dispatch(now)
	if w.granted { // granted at once: the common case
		<-w.ch
		h := Held{g, w.at}
		p.mu.Unlock()
		w.granted = false
		waiters.Put(w)
		return h, nil
	}
	p.mu.Unlock()
	select {
	case <-w.ch: // dispatch removed w from the queue and set w.at before sending
		h := Held{g, w.at}
		w.granted = false
		waiters.Put(w)
		return h, nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	if w.granted { // granted as ctx ended: give it back
		<-w.ch
		w.granted = false
		p.release(g, w.at, time.Now())
	} else {
		for i, x := range g.waiters {
			if x == w {
				g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
				p.waiting.Add(-1)
				break
			}
		}
	}
	p.mu.Unlock()
	waiters.Put(w)
	return Held{}, ctx.Err()
}

// Contended reports whether any call of any group waits for a slot: a
// holder keeping its slot across several calls gives it back then, once it
// held it for its quantum. It takes no lock.
func (g *Group) Contended() bool { return g.p.waiting.Load() > 0 }

// Release gives the slot back.
func (h Held) Release() {
	p := h.g.p
	p.mu.Lock()
	p.release(h.g, h.start, time.Now())
	p.mu.Unlock()
}

// Busy is the slot time held so far by every group together (the integral
// of the slots in use over time): over an interval, its growth divided by
// the interval's length is how many slots were in use on average, and Size
// minus that how many cores had no guest call to run.
func (p *Pool) Busy() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.account(time.Now())
	return p.busy
}

// account adds the slot time held since busyAt. Callers hold p.mu.
func (p *Pool) account(now time.Time) {
	if !p.busyAt.IsZero() && now.After(p.busyAt) {
		p.busy += time.Duration(p.used) * now.Sub(p.busyAt)
	}
	if now.After(p.busyAt) {
		p.busyAt = now
	}
}

// Pool is the pool the group takes its slots from.
func (g *Group) Pool() *Pool { return g.p }

// Running is the number of the group's calls holding a slot.
func (g *Group) Running() int {
	g.p.mu.Lock()
	defer g.p.mu.Unlock()
	return g.running
}

// release returns a slot of g taken at start, charges g the slot time and
// hands out what is free. Callers hold p.mu.
func (p *Pool) release(g *Group, start, now time.Time) {
	p.account(now)
	g.running--
	p.used--
	g.vtime += float64(now.Sub(start)) / float64(g.weight)
	g.lastRelease = now
	p.dispatch(now)
}

// lingering reports whether g returned a call less than Linger ago.
func (g *Group) lingering(now time.Time) bool {
	return !g.lastRelease.IsZero() && now.Sub(g.lastRelease) < g.p.linger
}

func (g *Group) active(now time.Time) bool {
	return g.running > 0 || len(g.waiters) > 0 || g.lingering(now)
}

// wake starts g's slot time level with the least served active group when
// g was inactive, so that idle time is not banked. Callers hold p.mu.
func (g *Group) wake(now time.Time) {
	if g.active(now) {
		return
	}
	least, any := 0.0, false
	for _, o := range g.p.order {
		if o != g && o.active(now) && (!any || o.vtime < least) {
			least, any = o.vtime, true
		}
	}
	if any && g.vtime < least {
		g.vtime = least
	}
}

// dispatch hands free slots out by the rules of the package comment. Callers
// hold p.mu.
func (p *Pool) dispatch(now time.Time) {
	free := p.n - p.used
	if free <= 0 {
		return
	}
	wsum, lead, waiting := 0, 0.0, false
	for _, g := range p.order {
		g.held = 0
		if g.active(now) {
			wsum += g.weight
			lead = max(lead, g.vtime)
		}
		waiting = waiting || len(g.waiters) > 0
	}
	if !waiting {
		return
	}
	for _, g := range p.order { // no group lags the most served by more than MaxCredit
		if g.active(now) && g.vtime < lead-p.maxCredit {
			g.vtime = lead - p.maxCredit
		}
	}
	var holdUntil time.Time
	for free > 0 {
		g := p.pickOwed(now, wsum)
		if g == nil {
			g = p.pickWaiting()
		}
		if g == nil {
			break
		}
		free--
		if len(g.waiters) == 0 {
			g.held++ // in the gap between its calls: keep the slot for it
			if exp := g.lastRelease.Add(p.linger); holdUntil.IsZero() || exp.Before(holdUntil) {
				holdUntil = exp
			}
			continue
		}
		// Shift rather than reslice, so that the queue keeps its backing
		// array and a call allocates nothing (queues are a few entries long).
		w := g.waiters[0]
		n := copy(g.waiters, g.waiters[1:])
		g.waiters[n] = nil
		g.waiters = g.waiters[:n]
		p.waiting.Add(-1)
		p.account(now)
		g.running++
		p.used++
		w.granted, w.at = true, now
		w.ch <- struct{}{}
	}
	if !holdUntil.IsZero() && p.anyWaiting() {
		p.wakeAt(holdUntil)
	}
}

// pickOwed returns the active group below its share, waiting or in the gap
// between calls, that used the least slot time; nil if none.
func (p *Pool) pickOwed(now time.Time, wsum int) *Group {
	var best *Group
	for _, g := range p.order {
		if len(g.waiters) == 0 && !g.lingering(now) {
			continue
		}
		if (g.running+g.held)*wsum >= p.n*g.weight {
			continue // at or above its share
		}
		if best == nil || g.vtime < best.vtime ||
			g.vtime == best.vtime && len(g.waiters) > 0 && len(best.waiters) == 0 {
			best = g
		}
	}
	return best
}

// pickWaiting returns the waiting group with the fewest slots per weight
// (then the least slot time); nil if none waits.
func (p *Pool) pickWaiting() *Group {
	var best *Group
	for _, g := range p.order {
		if len(g.waiters) == 0 {
			continue
		}
		if best == nil {
			best = g
			continue
		}
		a, b := (g.running+g.held)*best.weight, (best.running+best.held)*g.weight
		if a < b || a == b && g.vtime < best.vtime {
			best = g
		}
	}
	return best
}

func (p *Pool) anyWaiting() bool {
	for _, g := range p.order {
		if len(g.waiters) > 0 {
			return true
		}
	}
	return false
}

// wakeAt makes the pool dispatch again at t, when a held slot is released
// to the waiting groups if its group did not come back. Callers hold p.mu.
func (p *Pool) wakeAt(t time.Time) {
	if !p.timerAt.IsZero() && !t.Before(p.timerAt) {
		return
	}
	p.timerAt = t
	d := max(time.Until(t), 0)
	if p.timer == nil {
		p.timer = time.AfterFunc(d, p.onTimer)
		return
	}
	p.timer.Reset(d)
}

func (p *Pool) onTimer() {
	p.mu.Lock()
	p.timerAt = time.Time{}
	p.dispatch(time.Now())
	p.mu.Unlock()
}
