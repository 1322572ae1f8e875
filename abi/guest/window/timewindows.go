package window

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
)

// TimeWindows are tumbling (Advance = Size) or hopping (Advance < Size)
// windows of a fixed size. Not safe for concurrent use: an instance runs
// one call at a time (ABI.md §2), and so does its TimeWindows.
type TimeWindows struct {
	base
	size, advance int64
	// sub is the room of a window's sub key, made once: Add runs a
	// record at a time (a TimeWindows is not for concurrent use, as its
	// counts are not), and the host copies what it is given.
	sub []byte
}

// Tumbling returns windows of size, each record in exactly one:
// [n·size, (n+1)·size).
func Tumbling(size time.Duration, opt Options) (*TimeWindows, error) {
	return Hopping(size, size, opt)
}

// Hopping returns windows of size starting every advance (0 < advance <=
// size): a record is in each window [n·advance, n·advance+size) that holds
// its timestamp.
func Hopping(size, advance time.Duration, opt Options) (*TimeWindows, error) {
	grace, err := opt.check()
	if err != nil {
		return nil, err
	}
	s, err := ms(size, "size")
	if err != nil {
		return nil, err
	}
	a, err := ms(advance, "advance")
	if err != nil {
		return nil, err
	}
	if s == 0 || a == 0 || a > s {
		return nil, fmt.Errorf("window: size %v, advance %v: need 0 < advance <= size", size, advance)
	}
	if overflows(s, grace) {
		return nil, errors.New("window: size + grace overflows")
	}
	return &TimeWindows{base: base{opt: opt, grace: grace, prefix: subPrefix(opt.Name)}, size: s, advance: a}, nil
}

// Add adds the record to its windows (r.Key's, at r.Timestamp): each
// still open takes it; a window it opens sets the timer that will close
// it. A record no window takes is late. Call it from the processor's
// function, with the Host of the record's call.
func (w *TimeWindows) Add(h Host, r *guest.Record, out guest.Emitter) error {
	return w.classify(w.add(h, r, out))
}

func (w *TimeWindows) add(h Host, r *guest.Record, out guest.Emitter) error {
	ts, err := recordTime(r, w.opt.Name)
	if err != nil {
		return err
	}
	if overflows(ts, w.size+w.grace) {
		return guest.Terminal(fmt.Errorf("window: windows %q: timestamp %d: its window's close time overflows", w.opt.Name, ts))
	}
	st, err := streamTime(h, ts)
	if err != nil {
		return err
	}
	took := false
	// The start of every window holding ts, earliest first: Kafka
	// Streams' TimeWindows.windowsFor, whose first start is clamped at 0
	// (no window starts before the epoch). A loop, not a function taking
	// a closure: the closure was an allocation of every record's.
	for start := max(0, ts-w.size+w.advance) / w.advance * w.advance; start <= ts; start += w.advance {
		end := start + w.size
		if end+w.grace <= st { // closed: KStreamWindowAggregate's windowEnd <= closeTime
			w.stats.Dropped++
			continue
		}
		took = true
		w.sub = appendStart(append(w.sub[:0], w.prefix...), start)
		agg, ok, err := h.Get(r.Key, w.sub)
		if err != nil {
			return err
		}
		if !ok {
			agg = nil
			if err := h.SetTimer(r.Key, end+w.grace); err != nil {
				return err
			}
		}
		if agg, err = w.opt.Agg.Add(agg, r.Value); err != nil {
			return err
		}
		if err := h.Put(r.Key, w.sub, agg); err != nil {
			return err
		}
	}
	if !took {
		return w.late(r, out)
	}
	w.stats.Records++
	return nil
}

// Fire closes key's windows whose close time (end + grace) is at or
// before at: it emits their results, in start order, and deletes them.
// Call it from the timer function with the firing's key and at; a timer
// that closes none of these windows (another Windows' timer, or one
// whose window a session merge moved) does nothing.
func (w *TimeWindows) Fire(h Host, key []byte, at int64, out guest.Emitter) error {
	return w.classify(w.fire(h, key, at, out))
}

func (w *TimeWindows) fire(h Host, key []byte, at int64, out guest.Emitter) error {
	// The window the timer was set for, whose close time is at: read
	// alone (a scan costs the host a store read of its own). Every window
	// has a timer at its close time, and the timers fire in time order, so
	// when it is there no other window of key is due. When it is not (the
	// timer is another Windows', or a window's size or grace changed since
	// it was set), the scan below finds what is due.
	if start := at - w.grace - w.size; start <= at {
		w.sub = appendStart(append(w.sub[:0], w.prefix...), start)
		agg, ok, err := h.Get(key, w.sub)
		if err != nil {
			return err
		}
		if ok {
			if err := h.Delete(key, w.sub); err != nil {
				return err
			}
			return w.emit(Result{Key: bytes.Clone(key), Start: start, End: start + w.size, Agg: agg}, out)
		}
	}
	var due []Result
	var scanErr error
	err := h.Scan(key, w.prefix, func(sub, agg []byte) bool {
		start, ok := readStart(sub, len(w.prefix))
		if !ok {
			scanErr = guest.Terminal(fmt.Errorf("window: windows %q: malformed sub key %x", w.opt.Name, sub))
			return false
		}
		if start+w.size+w.grace > at {
			return false // sub keys sort by start, and so by close time
		}
		due = append(due, Result{Key: bytes.Clone(key), Start: start, End: start + w.size, Agg: bytes.Clone(agg)})
		return true
	})
	if err == nil {
		err = scanErr
	}
	if err != nil {
		return err
	}
	sub := make([]byte, 0, len(w.prefix)+8)
	for _, res := range due {
		if err := h.Delete(key, appendStart(append(sub[:0], w.prefix...), res.Start)); err != nil {
			return err
		}
		if err := w.emit(res, out); err != nil {
			return err
		}
	}
	return nil
}
