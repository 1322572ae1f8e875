package window

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
)

// SessionWindows are a key's bursts of activity: records less than gap
// apart (ts within gap of a session's [start, end], bounds included) join
// one session, and a record that bridges two sessions merges them. Not safe
// for concurrent use, like TimeWindows.
//
// A session's state entry is (key, name | start) → end (8 bytes big
// endian) | aggregate; its timer is (key, end + gap + grace + 1). A merge
// moves a session's end and so its close time: the old timer is left to
// fire and finds nothing due (it may be another Windows' timer too, since
// timers are one per (key, at)).
type SessionWindows struct {
	base
	gap int64
}

// Sessions returns session windows of inactivity gap (> 0).
func Sessions(gap time.Duration, opt Options) (*SessionWindows, error) {
	grace, err := opt.check()
	if err != nil {
		return nil, err
	}
	g, err := ms(gap, "gap")
	if err != nil {
		return nil, err
	}
	if g == 0 {
		return nil, errors.New("window: a session's gap must be > 0")
	}
	if overflows(g, grace+1) {
		return nil, errors.New("window: gap + grace overflows")
	}
	return &SessionWindows{base: base{opt: opt, grace: grace, prefix: subPrefix(opt.Name)}, gap: g}, nil
}

type session struct {
	start, end int64
	agg        []byte
}

// closeAt is the stream time at which s closes: KStreamSessionWindowAggregate
// keeps a session while end >= stream time - gap - grace.
func (w *SessionWindows) closeAt(end int64) int64 { return end + w.gap + w.grace + 1 }

func (w *SessionWindows) sessions(h Host, key []byte, fn func(s session) bool) error {
	var bad error
	err := h.Scan(key, w.prefix, func(sub, v []byte) bool {
		start, ok := readStart(sub, len(w.prefix))
		if !ok || len(v) < 8 {
			bad = guest.Terminal(fmt.Errorf("window: sessions %q: malformed entry %x", w.opt.Name, sub))
			return false
		}
		return fn(session{start: start, end: int64(binary.BigEndian.Uint64(v)), agg: v[8:]})
	})
	if err != nil {
		return err
	}
	return bad
}

func (w *SessionWindows) sub(start int64) []byte {
	return appendStart(append(make([]byte, 0, len(w.prefix)+8), w.prefix...), start)
}

// Add adds the record to its key's session: a new one [ts, ts], merged
// with every open session it touches. A record that would only make a
// closed session (a new one past its grace) is late.
func (w *SessionWindows) Add(h Host, r *guest.Record, out guest.Emitter) error {
	return w.classify(w.add(h, r, out))
}

func (w *SessionWindows) add(h Host, r *guest.Record, out guest.Emitter) error {
	ts, err := recordTime(r, w.opt.Name)
	if err != nil {
		return err
	}
	if overflows(ts, w.gap+w.grace+1) {
		return guest.Terminal(fmt.Errorf("window: sessions %q: timestamp %d: its close time overflows", w.opt.Name, ts))
	}
	st, err := streamTime(h, ts)
	if err != nil {
		return err
	}
	var found []session
	err = w.sessions(h, r.Key, func(s session) bool {
		if s.start > ts+w.gap {
			return false // sorted by start: no later one touches ts
		}
		if s.end >= ts-w.gap {
			found = append(found, session{start: s.start, end: s.end, agg: bytes.Clone(s.agg)})
		}
		return true
	})
	if err != nil {
		return err
	}
	merged := session{start: ts, end: ts}
	for i, s := range found {
		merged.start, merged.end = min(merged.start, s.start), max(merged.end, s.end)
		if i == 0 {
			merged.agg = s.agg
		} else if merged.agg, err = w.opt.Agg.Merge(merged.agg, s.agg); err != nil {
			return err
		}
	}
	if w.closeAt(merged.end) <= st {
		// Only a record that joins no session can land here: a session
		// still in the state is open, and merged ends at or after it.
		return w.late(r, out)
	}
	if merged.agg, err = w.opt.Agg.Add(merged.agg, r.Value); err != nil {
		return err
	}
	oldClose := int64(-1)
	for _, s := range found {
		if s.start != merged.start {
			if err := h.Delete(r.Key, w.sub(s.start)); err != nil {
				return err
			}
		} else {
			oldClose = w.closeAt(s.end)
		}
	}
	val := append(binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(merged.agg)), uint64(merged.end)), merged.agg...)
	if err := h.Put(r.Key, w.sub(merged.start), val); err != nil {
		return err
	}
	w.stats.Records++
	if c := w.closeAt(merged.end); c != oldClose {
		return h.SetTimer(r.Key, c)
	}
	return nil
}

// Fire closes key's sessions whose close time is at or before at,
// emitting their results (End is the session's last timestamp, inclusive)
// in start order and deleting them.
func (w *SessionWindows) Fire(h Host, key []byte, at int64, out guest.Emitter) error {
	return w.classify(w.fire(h, key, at, out))
}

func (w *SessionWindows) fire(h Host, key []byte, at int64, out guest.Emitter) error {
	var due []Result
	err := w.sessions(h, key, func(s session) bool {
		if w.closeAt(s.end) <= at {
			due = append(due, Result{Key: bytes.Clone(key), Start: s.start, End: s.end, Agg: bytes.Clone(s.agg)})
		}
		return true
	})
	if err != nil {
		return err
	}
	for _, res := range due {
		if err := h.Delete(key, w.sub(res.Start)); err != nil {
			return err
		}
		if err := w.emit(res, out); err != nil {
			return err
		}
	}
	return nil
}
