package sr

import (
	"errors"
	"fmt"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
)

// Process registers fn as the module's processor (guest.Process), with
// the schema lookups its Decode and Encode calls need done for it: a run
// of fn that returns a *MissingError (as it is or wrapped) has its
// outputs dropped, the schema is looked up, and fn runs again on the
// same record once the guest holds it. A record runs fn at most 8 times
// (each run past the first follows a lookup); a lookup the host refuses
// (the pipeline does not grant the registry, an unknown id or subject)
// fails the record terminally, and a registry that does not answer fails
// it retryably.
//
// To drop a run's outputs, what fn emits is held (copied) until fn
// returns, and handed to the host then: an output the host refuses (a
// limit, a topic not allowed) fails the record when fn returns instead of
// being Emit's error, as in the guest's batch entry. Once fn returns
// guest.Pending (it awaits operations of its own), what it emitted so far
// goes to the host, and its continuations' outputs go straight through;
// a continuation whose Decode or Encode misses a schema answers it with
// Resolve.
func Process(fn guest.Func) {
	guest.Process(func(r *guest.Record, out guest.Emitter) error { return run(fn, r, out, 1) })
}

// run is the n-th run of fn on r.
func run(fn guest.Func, r *guest.Record, out guest.Emitter, n int) error {
	h := spare
	if h == nil {
		h = &holding{}
	}
	spare = nil
	h.out = out
	err := fn(r, h)
	if err == nil {
		err = h.flush()
		h.reset()
		spare = h
		return err
	}
	var m *MissingError
	if errors.As(err, &m) {
		h.reset()
		spare = h
		if n >= maxRuns {
			return guest.Terminal(fmt.Errorf("sr: the processor ran %d times on the record, each time missing a schema: %w", n, err))
		}
		return lookup(m, func() error { return run(fn, r, out, n+1) })
	}
	if errors.Is(err, guest.Pending) {
		// The record waits: its continuations may emit through h, which
		// is theirs from now on.
		if ferr := h.flush(); ferr != nil {
			return ferr
		}
		h.reset()
		h.out, h.direct = out, true
		return err
	}
	// A failure: the host discards the record's outputs.
	h.reset()
	spare = h
	return err
}

// Resolve answers a *MissingError in err: it looks the schema up and
// returns what again returns once the guest holds it (again runs in the
// lookup's continuation: it is where the processor decodes or encodes
// again). Any other err is returned as it is. Return what Resolve
// returns, as with guest.Await:
//
//	return guest.Await(guest.Get(url), func(resp *guest.HTTPResponse, err error) error {
//		var encode func() error
//		encode = func() error {
//			v, err := sr.Encode("enriched-value", &e)
//			if err != nil {
//				return sr.Resolve(err, encode)
//			}
//			return out.Emit(guest.Output{Key: r.Key, Value: v})
//		}
//		return encode()
//	})
func Resolve(err error, again func() error) error {
	var m *MissingError
	if !errors.As(err, &m) {
		return err
	}
	return lookup(m, again)
}

// lookup looks up what m misses, keeps it and returns then().
func lookup(m *MissingError, then func() error) error {
	if m.Subject == "" {
		id := m.ID
		return guest.Await(guest.SchemaByID(id), func(s *guest.Schema, err error) error {
			if err != nil {
				return lookupFailed(fmt.Sprintf("schema %d", id), err)
			}
			c, err := compile(id, s)
			if err != nil {
				return guest.Terminal(err)
			}
			keep(id, c)
			return then()
		})
	}
	subject, stale := m.Subject, m.stale
	return guest.Await(guest.SchemaBySubject(subject, guest.SchemaLatest), func(ss *guest.SubjectSchema, err error) error {
		if err != nil {
			if old := bySubject[subject]; stale && old != nil && !guest.IsRefused(err) {
				// A refresh the registry did not answer: the schema in
				// hand serves until the next one.
				old.fetched = time.Now()
				return then()
			}
			return lookupFailed(fmt.Sprintf("the latest schema of subject %q", subject), err)
		}
		c := byID[ss.ID]
		if c == nil {
			if c, err = compile(ss.ID, &ss.SchemaDef); err != nil {
				return guest.Terminal(fmt.Errorf("%w (subject %q version %d)", err, subject, ss.Version))
			}
			keep(ss.ID, c)
		}
		if len(bySubject) >= MaxSchemas {
			clear(bySubject)
		}
		bySubject[subject] = &subjectSchema{id: ss.ID, schema: c, fetched: time.Now()}
		forgetLast()
		return then()
	})
}

// lookupFailed is the record's error for a lookup that failed: terminal
// when the host refused it (the same answer every time), else retryable.
func lookupFailed(what string, err error) error {
	err = fmt.Errorf("sr: look up %s: %w", what, err)
	if guest.IsRefused(err) {
		return guest.Terminal(err)
	}
	return err
}

// spare is the holding emitter of the last record decided in its first
// call, reused by the next record: a record that waits keeps its own.
var spare *holding

// holding is an emitter that holds a run's outputs, copied, until the run
// returns (direct: it passes them straight to out).
type holding struct {
	out    guest.Emitter
	direct bool
	outs   []guest.Output
	buf    []byte         // the outputs' keys, values and header values
	hdrs   []guest.Header // the outputs' headers
}

func (h *holding) Emit(o guest.Output) error {
	if h.direct {
		return h.out.Emit(o)
	}
	o.Key, o.Value = h.copy(o.Key), h.copy(o.Value)
	if len(o.Headers) > 0 {
		first := len(h.hdrs)
		for _, hd := range o.Headers {
			h.hdrs = append(h.hdrs, guest.Header{Key: hd.Key, Value: h.copy(hd.Value)})
		}
		o.Headers = h.hdrs[first:len(h.hdrs):len(h.hdrs)]
	}
	h.outs = append(h.outs, o)
	return nil
}

// copy copies b into h.buf (nil stays nil). A full buf is replaced, not
// grown: the outputs held so far point into it.
func (h *holding) copy(b []byte) []byte {
	if b == nil {
		return nil
	}
	if cap(h.buf)-len(h.buf) < len(b) {
		h.buf = make([]byte, 0, max(2*cap(h.buf), len(b), 4096))
	}
	n := len(h.buf)
	h.buf = append(h.buf, b...)
	return h.buf[n:len(h.buf):len(h.buf)]
}

// flush hands the held outputs to the host.
func (h *holding) flush() error {
	for i := range h.outs {
		if err := h.out.Emit(h.outs[i]); err != nil {
			return err
		}
	}
	return nil
}

func (h *holding) reset() {
	clear(h.outs)
	h.outs, h.buf, h.hdrs = h.outs[:0], h.buf[:0], h.hdrs[:0]
	h.out = nil
}
