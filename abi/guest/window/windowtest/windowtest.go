// Package windowtest is an in-memory partition that serves window.Host as
// ABI.md §4.2 specifies it — two-part state keys, stream time and
// event-time timers with the firing rule — so that a processor built on
// package window is unit-tested on the host, without a WASM runtime or a
// wasmstream host.
//
// The firing rule it keeps: when a record succeeds, stream time becomes
// the larger of itself and the record's timestamp, T; then every timer
// with at <= T fires, one call each, in (at, key) order, before the next
// record. A call's writes (state and timers) and outputs are kept when it
// succeeds and discarded when it fails, as the host does with a record's.
// A fired timer is gone (a firing cannot set its own again).
package windowtest

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/window"
)

// Processor is what a windowed processor does for a record and for a
// timer firing, given the Host of that call.
type Processor interface {
	Record(h window.Host, r *guest.Record, out guest.Emitter) error
	Timer(h window.Host, key []byte, at int64, out guest.Emitter) error
}

// Partition is one input partition's state, timers and stream time. Not
// safe for concurrent use.
type Partition struct {
	state  map[skey][]byte
	timers map[tkey]bool
	st     int64
	// Firings counts the timer firings so far.
	Firings int
	// MaxWrites bounds a call's state writes and timers, as
	// limits.max_outputs does on the host (a timer counts as a state
	// write): one more gets abi.ErrnoLimit. 0 means 10,000.
	MaxWrites int
}

type skey struct{ key, sub string }

type tkey struct {
	at  int64
	key string
}

// New returns an empty partition: stream time -1, no state, no timers.
func New() *Partition {
	return &Partition{state: map[skey][]byte{}, timers: map[tkey]bool{}, st: -1}
}

// StreamTime is the partition's stream time.
func (p *Partition) StreamTime() int64 { return p.st }

// State returns a copy of the state: key → sub → value.
func (p *Partition) State() map[string]map[string][]byte {
	out := map[string]map[string][]byte{}
	for k, v := range p.state {
		if out[k.key] == nil {
			out[k.key] = map[string][]byte{}
		}
		out[k.key][k.sub] = bytes.Clone(v)
	}
	return out
}

// Timer is a set timer.
type Timer struct {
	Key string
	At  int64
}

// Timers returns the set timers in (at, key) order.
func (p *Partition) Timers() []Timer {
	var ts []Timer
	for t := range p.timers {
		ts = append(ts, Timer{Key: t.key, At: t.at})
	}
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].At != ts[j].At {
			return ts[i].At < ts[j].At
		}
		return ts[i].Key < ts[j].Key
	})
	return ts
}

type collector struct{ out []guest.Output }

func (c *collector) Emit(o guest.Output) error {
	c.out = append(c.out, guest.Output{Topic: o.Topic, Key: bytes.Clone(o.Key), Value: bytes.Clone(o.Value), Headers: append([]guest.Header(nil), o.Headers...)})
	return nil
}

// Record runs proc for r, then, if it was decided, the timers it made due.
// It returns the outputs of the record and of the firings, in order, and
// the errors: a record that fails leaves no writes or outputs behind; one
// that fails terminally (dead-lettered) is decided all the same and moves
// the clock, one that fails retryably does not. A firing likewise: one
// that fails terminally is dead-lettered (its timer gone) and the round
// goes on; one that fails retryably keeps its timer and ends the round
// there (the host would retry it).
func (p *Partition) Record(proc Processor, r guest.Record) ([]guest.Output, error) {
	if r.Attempt == 0 {
		r.Attempt = 1
	}
	c := &collector{}
	call := p.begin(false, 0)
	err := proc.Record(call, &r, c)
	if err == nil {
		err = call.end()
	}
	switch {
	case err == nil:
	case guest.IsTerminal(err):
		// Dead-lettered: decided, so it moves the clock, with no writes
		// and no outputs of its own.
		p.st = max(p.st, r.Timestamp.UnixMilli())
		out, ferr := p.fire(proc, nil)
		return out, errors.Join(err, ferr)
	default:
		return nil, err // retried: not decided yet
	}
	p.st = max(p.st, r.Timestamp.UnixMilli())
	return p.fire(proc, c.out)
}

// Advance moves stream time to t (if later), as timers.idle_advance does
// for a silent partition, and fires the timers it makes due.
func (p *Partition) Advance(proc Processor, t time.Time) ([]guest.Output, error) {
	p.st = max(p.st, t.UnixMilli())
	return p.fire(proc, nil)
}

func (p *Partition) fire(proc Processor, out []guest.Output) ([]guest.Output, error) {
	var failed error
	for {
		ts := p.Timers()
		if len(ts) == 0 || ts[0].At > p.st {
			return out, failed
		}
		t := ts[0]
		delete(p.timers, tkey{at: t.At, key: t.Key})
		p.Firings++
		c := &collector{}
		call := p.begin(true, t.At)
		err := proc.Timer(call, []byte(t.Key), t.At, c)
		if err == nil {
			err = call.end()
		}
		switch {
		case err == nil:
			out = append(out, c.out...)
		case guest.IsTerminal(err):
			// Dead-lettered: the timer is gone, its writes and outputs
			// discarded, and the round goes on.
			failed = errors.Join(failed, fmt.Errorf("timer (%q, %d): %w", t.Key, t.At, err))
		default:
			// Retried by the host: the timer is still due.
			p.timers[tkey{at: t.At, key: t.Key}] = true
			return out, errors.Join(failed, fmt.Errorf("timer (%q, %d): %w", t.Key, t.At, err))
		}
	}
}

// call is the Host of one record or firing: its writes are pending until
// it ends.
type call struct {
	p      *Partition
	firing bool            // a timer firing's call, not a record's
	at     int64           // the firing's at
	state  map[skey][]byte // nil value: deleted
	timers map[tkey]bool   // false: deleted
	writes int
	done   bool
}

func (p *Partition) begin(firing bool, at int64) *call {
	return &call{p: p, firing: firing, at: at, state: map[skey][]byte{}, timers: map[tkey]bool{}}
}

var errEnded = errors.New("windowtest: Host used after its call ended")

func (c *call) end() error {
	if c.done {
		return errEnded
	}
	c.done = true
	for k, v := range c.state {
		if v == nil {
			delete(c.p.state, k)
		} else {
			c.p.state[k] = v
		}
	}
	for k, set := range c.timers {
		if set {
			c.p.timers[k] = true
		} else {
			delete(c.p.timers, k)
		}
	}
	return nil
}

func (c *call) check(key, sub []byte) error {
	if c.done {
		return errEnded
	}
	if len(key) > abi.MaxStateKeyBytes || len(sub) > abi.MaxStateKeyBytes {
		return abi.ErrnoTooLarge
	}
	return nil
}

func (c *call) write() error {
	limit := c.p.MaxWrites
	if limit == 0 {
		limit = 10000
	}
	if c.writes >= limit {
		return abi.ErrnoLimit
	}
	c.writes++
	return nil
}

func (c *call) StreamTime() (int64, error) {
	if c.done {
		return 0, errEnded
	}
	return c.p.st, nil
}

func (c *call) Get(key, sub []byte) ([]byte, bool, error) {
	if err := c.check(key, sub); err != nil {
		return nil, false, err
	}
	k := skey{string(key), string(sub)}
	if v, ok := c.state[k]; ok {
		return bytes.Clone(v), v != nil, nil
	}
	v, ok := c.p.state[k]
	return bytes.Clone(v), ok, nil
}

func (c *call) Put(key, sub, value []byte) error {
	if err := c.check(key, sub); err != nil {
		return err
	}
	if err := c.write(); err != nil {
		return err
	}
	c.state[skey{string(key), string(sub)}] = append([]byte{}, value...)
	return nil
}

func (c *call) Delete(key, sub []byte) error {
	if err := c.check(key, sub); err != nil {
		return err
	}
	if err := c.write(); err != nil {
		return err
	}
	c.state[skey{string(key), string(sub)}] = nil
	return nil
}

func (c *call) Scan(key, prefix []byte, fn func(sub, value []byte) bool) error {
	if err := c.check(key, prefix); err != nil {
		return err
	}
	merged := map[string][]byte{}
	for k, v := range c.p.state {
		if k.key == string(key) && bytes.HasPrefix([]byte(k.sub), prefix) {
			merged[k.sub] = v
		}
	}
	for k, v := range c.state {
		if k.key != string(key) || !bytes.HasPrefix([]byte(k.sub), prefix) {
			continue
		}
		if v == nil {
			delete(merged, k.sub)
		} else {
			merged[k.sub] = v
		}
	}
	subs := make([]string, 0, len(merged))
	for s := range merged {
		subs = append(subs, s)
	}
	sort.Strings(subs)
	for _, s := range subs {
		if !fn([]byte(s), bytes.Clone(merged[s])) {
			return nil
		}
	}
	return nil
}

func (c *call) SetTimer(key []byte, at int64) error {
	if err := c.check(key, nil); err != nil {
		return err
	}
	if c.firing && at <= c.at {
		return abi.ErrnoLimit // ABI.md §4.2: a firing cannot re-arm its own instant or an earlier one
	}
	if err := c.write(); err != nil {
		return err
	}
	c.timers[tkey{at: at, key: string(key)}] = true
	return nil
}

func (c *call) DeleteTimer(key []byte, at int64) error {
	if err := c.check(key, nil); err != nil {
		return err
	}
	if err := c.write(); err != nil {
		return err
	}
	c.timers[tkey{at: at, key: string(key)}] = false
	return nil
}
