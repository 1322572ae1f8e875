package window_test

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/window"
	"github.com/wasmstream/wasmstream/abi/guest/window/windowtest"
	"github.com/wasmstream/wasmstream/internal/windowmodel"
)

// windows is what TimeWindows and SessionWindows have in common.
type windows interface {
	Add(h window.Host, r *guest.Record, out guest.Emitter) error
	Fire(h window.Host, key []byte, at int64, out guest.Emitter) error
	Stats() window.Stats
}

// proc is a processor of one kind of windows: each record goes to Add,
// each firing to Fire.
type proc struct{ w windows }

func (p proc) Record(h window.Host, r *guest.Record, out guest.Emitter) error {
	return p.w.Add(h, r, out)
}

func (p proc) Timer(h window.Host, key []byte, at int64, out guest.Emitter) error {
	return p.w.Fire(h, key, at, out)
}

// run feeds recs to a new partition and returns the final results (from
// the outputs) and the late records sent to "late".
func run(t *testing.T, w windows, recs []windowmodel.Record) (*windowtest.Partition, []windowmodel.Window, int) {
	t.Helper()
	p := windowtest.New()
	var finals []windowmodel.Window
	late := 0
	for i, r := range recs {
		outs, err := p.Record(proc{w}, guest.Record{Topic: "in", Offset: int64(i), Key: []byte(r.Key), Value: []byte("v"), Timestamp: time.UnixMilli(r.TS)})
		if err != nil {
			t.Fatalf("record %d %+v: %v", i, r, err)
		}
		for _, o := range outs {
			if o.Topic == "late" {
				if h, _ := header(o, window.HeaderLate); h != "w" || string(o.Key) != r.Key {
					t.Fatalf("late output %+v for record %+v", o, r)
				}
				late++
				continue
			}
			n, err := window.DecodeCount(o.Value)
			if err != nil {
				t.Fatal(err)
			}
			finals = append(finals, windowmodel.Window{Key: string(o.Key), Start: atoi(t, o, window.HeaderStart), End: atoi(t, o, window.HeaderEnd), Count: int64(n)})
		}
	}
	sort.Slice(finals, func(i, j int) bool {
		if finals[i].Key != finals[j].Key {
			return finals[i].Key < finals[j].Key
		}
		return finals[i].Start < finals[j].Start
	})
	return p, finals, late
}

func header(o guest.Output, name string) (string, bool) {
	for _, h := range o.Headers {
		if h.Key == name {
			return string(h.Value), true
		}
	}
	return "", false
}

func atoi(t *testing.T, o guest.Output, name string) int64 {
	v, ok := header(o, name)
	n, err := strconv.ParseInt(v, 10, 64)
	if !ok || err != nil {
		t.Fatalf("output %+v: header %s %q", o, name, v)
	}
	return n
}

// randomInput makes records of a few keys whose timestamps mostly rise,
// some out of order within grace and some late beyond it, with records
// exactly at window edges and close times among them (the timestamps are
// small multiples of a few ms, so edges are hit often).
func randomInput(rng *rand.Rand, grace int64) []windowmodel.Record {
	recs := make([]windowmodel.Record, rng.IntN(80))
	hi := int64(0)
	for i := range recs {
		var ts int64
		switch rng.IntN(10) {
		case 0, 1: // out of order, within grace
			ts = max(0, hi-rng.Int64N(grace+1))
		case 2: // late, beyond grace (often)
			ts = max(0, hi-grace-rng.Int64N(40))
		default:
			ts = hi + rng.Int64N(8)
		}
		hi = max(hi, ts)
		recs[i] = windowmodel.Record{Key: string(rune('a' + rng.IntN(3))), TS: ts}
	}
	return recs
}

// openState reads the partition's state as the open windows' counts, the
// way the SDK lays them out: a time window's sub is name | 0 | start, its
// value the count; a session's value is end | count.
func openState(t *testing.T, p *windowtest.Partition, session bool, size int64) []windowmodel.Window {
	var ws []windowmodel.Window
	for key, subs := range p.State() {
		for sub, v := range subs {
			if len(sub) != 10 || sub[:2] != "w\x00" {
				t.Fatalf("state (%q, %x): not a window's", key, sub)
			}
			start := int64(be(sub[2:]) ^ 1<<63)
			w := windowmodel.Window{Key: key, Start: start, End: start + size}
			if session {
				w.End, v = int64(be(string(v[:8]))), v[8:]
			}
			n, err := window.DecodeCount(v)
			if err != nil {
				t.Fatal(err)
			}
			w.Count = int64(n)
			ws = append(ws, w)
		}
	}
	sort.Slice(ws, func(i, j int) bool {
		if ws[i].Key != ws[j].Key {
			return ws[i].Key < ws[j].Key
		}
		return ws[i].Start < ws[j].Start
	})
	return ws
}

func be(s string) uint64 {
	var n uint64
	for i := 0; i < 8; i++ {
		n = n<<8 | uint64(s[i])
	}
	return n
}

func orEmpty(ws []windowmodel.Window) []windowmodel.Window {
	if ws == nil {
		return []windowmodel.Window{}
	}
	return ws
}

// TestTumblingCountMatchesModel is the SDK's main test: a tumbling count
// over the in-memory partition (timers, firing rule, two-part keys) emits
// exactly the model's final results, sends exactly its late records to
// the late topic, and leaves in the state exactly its open windows, each
// with one timer at its close time — a closed window leaves nothing.
func TestTumblingCountMatchesModel(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(21, 22))
	var ex exercised
	for trial := range 500 {
		size, grace := 1+rng.Int64N(20), rng.Int64N(15)
		w, err := window.Tumbling(time.Duration(size)*time.Millisecond, window.Options{Name: "w", Grace: time.Duration(grace) * time.Millisecond, LateTopic: "late"})
		if err != nil {
			t.Fatal(err)
		}
		recs := randomInput(rng, grace)
		want := windowmodel.Tumbling(recs, size, grace)
		p, finals, late := run(t, w, recs)
		compare(t, trial, recs, want, p, finals, late, w.Stats(), false, size, grace)
		ex.note(want)
	}
	ex.check(t)
}

// TestHoppingCountMatchesModel: the same, for hopping windows.
func TestHoppingCountMatchesModel(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(23, 24))
	var ex exercised
	for trial := range 500 {
		size, grace := 1+rng.Int64N(20), rng.Int64N(15)
		advance := 1 + rng.Int64N(size)
		w, err := window.Hopping(time.Duration(size)*time.Millisecond, time.Duration(advance)*time.Millisecond, window.Options{Name: "w", Grace: time.Duration(grace) * time.Millisecond, LateTopic: "late"})
		if err != nil {
			t.Fatal(err)
		}
		recs := randomInput(rng, grace)
		want := windowmodel.Hopping(recs, size, advance, grace)
		p, finals, late := run(t, w, recs)
		compare(t, trial, recs, want, p, finals, late, w.Stats(), false, size, grace)
		ex.note(want)
	}
	ex.check(t)
}

// TestSessionCountMatchesModel: the same, for session windows (a session's
// end inclusive; a merge leaves the old timer to fire and find nothing).
func TestSessionCountMatchesModel(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(25, 26))
	var ex exercised
	for trial := range 500 {
		gap, grace := 1+rng.Int64N(15), rng.Int64N(15)
		w, err := window.Sessions(time.Duration(gap)*time.Millisecond, window.Options{Name: "w", Grace: time.Duration(grace) * time.Millisecond, LateTopic: "late"})
		if err != nil {
			t.Fatal(err)
		}
		recs := randomInput(rng, grace)
		want := windowmodel.Sessions(recs, gap, grace)
		p, finals, late := run(t, w, recs)
		compare(t, trial, recs, want, p, finals, late, w.Stats(), true, gap, grace)
		ex.note(want)
	}
	ex.check(t)
}

// exercised makes sure random inputs reached what the test is about:
// final results, late records, windows left open.
type exercised struct{ final, late, open int }

func (e *exercised) note(r windowmodel.Result) {
	e.final += min(len(r.Final), 1)
	e.late += min(r.Late, 1)
	e.open += min(len(r.Open), 1)
}

func (e *exercised) check(t *testing.T) {
	if e.final < 100 || e.late < 50 || e.open < 100 {
		t.Fatalf("the inputs exercise too little: trials with final results %d, late records %d, open windows %d", e.final, e.late, e.open)
	}
}

func compare(t *testing.T, trial int, recs []windowmodel.Record, want windowmodel.Result, p *windowtest.Partition, finals []windowmodel.Window, late int, st window.Stats, session bool, size, grace int64) {
	t.Helper()
	if !reflect.DeepEqual(orEmpty(finals), orEmpty(want.Final)) {
		t.Fatalf("trial %d (size/gap %d, grace %d): final results\n got %+v\nwant %+v\ninput %+v", trial, size, grace, finals, want.Final, recs)
	}
	if late != want.Late || int(st.Late) != want.Late {
		t.Fatalf("trial %d: %d late outputs, %d counted, want %d\ninput %+v", trial, late, st.Late, want.Late, recs)
	}
	if !session && int(st.Dropped) != want.Dropped {
		t.Fatalf("trial %d: %d dropped, want %d", trial, st.Dropped, want.Dropped)
	}
	if open := openState(t, p, session, size); !reflect.DeepEqual(orEmpty(open), orEmpty(want.Open)) {
		t.Fatalf("trial %d: state\n got %+v\nwant the open windows %+v\ninput %+v", trial, open, want.Open, recs)
	}
	if p.StreamTime() != want.StreamTime {
		t.Fatalf("trial %d: stream time %d, want %d", trial, p.StreamTime(), want.StreamTime)
	}
	// Every timer left is in the future, and every open window has its own.
	timers := map[windowtest.Timer]bool{}
	for _, tm := range p.Timers() {
		if tm.At <= p.StreamTime() {
			t.Fatalf("trial %d: timer %+v due at stream time %d did not fire", trial, tm, p.StreamTime())
		}
		timers[tm] = true
	}
	for _, w := range want.Open {
		at := w.End + grace
		if session {
			at = w.End + size + grace + 1
		}
		if !timers[windowtest.Timer{Key: w.Key, At: at}] {
			t.Fatalf("trial %d: open window %+v has no timer at %d: %+v", trial, w, at, p.Timers())
		}
	}
	if !session && len(timers) != len(want.Open) {
		t.Fatalf("trial %d: %d timers for %d open windows", trial, len(timers), len(want.Open))
	}
}

// A window's edges as Kafka Streams draws them, through the SDK: a record
// at exactly a window's end is the next window's; the window closes, and
// emits, when stream time reaches end + grace, and a record for it then is
// late.
func TestTumblingEdges(t *testing.T) {
	t.Parallel()
	w, err := window.Tumbling(10*time.Millisecond, window.Options{Name: "w", Grace: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p := windowtest.New()
	rec := func(key string, ts int64) []guest.Output {
		t.Helper()
		outs, err := p.Record(proc{w}, guest.Record{Key: []byte(key), Timestamp: time.UnixMilli(ts)})
		if err != nil {
			t.Fatal(err)
		}
		return outs
	}
	rec("k", 9)
	rec("k", 10) // [10, 20)
	if outs := rec("x", 14); len(outs) != 0 {
		t.Fatalf("stream time 14 < end+grace 15: %d outputs", len(outs))
	}
	rec("k", 3) // still in [0, 10): its close time is 15
	outs := rec("x", 15)
	if len(outs) != 1 || string(outs[0].Key) != "k" {
		t.Fatalf("stream time 15 = end+grace: outputs %+v, want [0,10) of k", outs)
	}
	if n, _ := window.DecodeCount(outs[0].Value); n != 2 {
		t.Fatalf("[0,10) counted %d, want 2 (9 and 3; 10 is the next window's)", n)
	}
	before := w.Stats().Late
	rec("k", 9) // its window closed
	if w.Stats().Late != before+1 {
		t.Fatal("a record for a closed window is not late")
	}
	if _, ok := p.State()["k"]["w\x00"+string([]byte{0x80, 0, 0, 0, 0, 0, 0, 0})]; ok {
		t.Fatal("the closed window [0,10) is still in the state")
	}
}

// A firing's outputs and writes go with the record that moved the clock,
// after its own outputs; stream time stays where the record put it.
func TestFiringFollowsTheRecord(t *testing.T) {
	t.Parallel()
	w, _ := window.Tumbling(10*time.Millisecond, window.Options{Name: "w", Output: "counts"})
	p := windowtest.New()
	for _, ts := range []int64{1, 2, 11} {
		outs, err := p.Record(proc{w}, guest.Record{Key: []byte("k"), Timestamp: time.UnixMilli(ts)})
		if err != nil {
			t.Fatal(err)
		}
		if ts < 11 && len(outs) != 0 {
			t.Fatalf("at %d: %+v", ts, outs)
		}
		if ts == 11 && (len(outs) != 1 || outs[0].Topic != "counts") {
			t.Fatalf("at 11: %+v, want [0,10)'s result on counts", outs)
		}
	}
	if p.Firings != 1 {
		t.Fatalf("%d firings, want 1", p.Firings)
	}
	// Idle advance fires the rest without a record.
	outs, err := p.Advance(proc{w}, time.UnixMilli(20))
	if err != nil || len(outs) != 1 || len(p.State()) != 0 || len(p.Timers()) != 0 {
		t.Fatalf("advance to 20: %+v %v, state %v, timers %v", outs, err, p.State(), p.Timers())
	}
}

// A record that fails leaves neither its windows' writes nor its timers.
func TestFailedRecordLeavesNothing(t *testing.T) {
	t.Parallel()
	w, _ := window.Tumbling(10*time.Millisecond, window.Options{Name: "w"})
	boom := errors.New("boom")
	failing := failAfter{proc{w}, boom}
	p := windowtest.New()
	if _, err := p.Record(failing, guest.Record{Key: []byte("k"), Timestamp: time.UnixMilli(5)}); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if len(p.State()) != 0 || len(p.Timers()) != 0 || p.StreamTime() != -1 {
		t.Fatalf("a retried record left state %v, timers %v, stream time %d", p.State(), p.Timers(), p.StreamTime())
	}
	// A terminal failure is decided (dead-lettered): it moves the clock.
	if _, err := p.Record(failAfter{proc{w}, guest.Terminal(boom)}, guest.Record{Key: []byte("k"), Timestamp: time.UnixMilli(7)}); !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if len(p.State()) != 0 || p.StreamTime() != 7 {
		t.Fatalf("a dead-lettered record: state %v, stream time %d", p.State(), p.StreamTime())
	}
}

type failAfter struct {
	proc
	err error
}

func (f failAfter) Record(h window.Host, r *guest.Record, out guest.Emitter) error {
	if err := f.proc.Record(h, r, out); err != nil {
		return err
	}
	return f.err
}

// A record before the epoch has no window: it fails terminally, naming
// the windows.
func TestNegativeTimestampFails(t *testing.T) {
	t.Parallel()
	w, _ := window.Tumbling(time.Second, window.Options{Name: "w"})
	_, err := windowtest.New().Record(proc{w}, guest.Record{Key: []byte("k"), Timestamp: time.UnixMilli(-1)})
	if !errors.Is(err, window.ErrNegativeTimestamp) || !guest.IsTerminal(err) {
		t.Fatalf("err %v, want a terminal ErrNegativeTimestamp", err)
	}
}

// Bad options are refused, naming what is wrong.
func TestOptionsRefused(t *testing.T) {
	t.Parallel()
	ok := window.Options{Name: "w"}
	for _, c := range []struct {
		name string
		err  error
	}{
		{"no name", func() error { _, err := window.Tumbling(time.Second, window.Options{}); return err }()},
		{"0 byte in name", func() error { _, err := window.Tumbling(time.Second, window.Options{Name: "a\x00"}); return err }()},
		{"zero size", func() error { _, err := window.Tumbling(0, ok); return err }()},
		{"sub-ms size", func() error { _, err := window.Tumbling(time.Microsecond, ok); return err }()},
		{"advance > size", func() error { _, err := window.Hopping(time.Second, 2*time.Second, ok); return err }()},
		{"negative grace", func() error {
			_, err := window.Tumbling(time.Second, window.Options{Name: "w", Grace: -time.Millisecond})
			return err
		}()},
		{"zero gap", func() error { _, err := window.Sessions(0, ok); return err }()},
	} {
		if c.err == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
}

// The in-memory partition refuses what the host would: a firing re-arming
// its own instant, an over-long key.
func TestPartitionRefuses(t *testing.T) {
	t.Parallel()
	p := windowtest.New()
	var got []error
	pr := hostProc{
		record: func(h window.Host) error {
			got = append(got, h.Put(make([]byte, abi.MaxStateKeyBytes+1), nil, nil))
			return h.SetTimer([]byte("k"), 3)
		},
		timer: func(h window.Host, at int64) error {
			got = append(got, h.SetTimer([]byte("k"), at), h.SetTimer([]byte("k"), at+1))
			return nil
		},
	}
	if _, err := p.Record(pr, guest.Record{Key: []byte("k"), Timestamp: time.UnixMilli(5)}); err != nil {
		t.Fatal(err)
	}
	want := []error{abi.ErrnoTooLarge, abi.ErrnoLimit, nil}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if p.Firings != 2 { // 3, then the 4 its firing set (due: stream time 5)
		t.Fatalf("%d firings, want 2", p.Firings)
	}
}

type hostProc struct {
	record func(h window.Host) error
	timer  func(h window.Host, at int64) error
}

func (p hostProc) Record(h window.Host, _ *guest.Record, _ guest.Emitter) error { return p.record(h) }

func (p hostProc) Timer(h window.Host, _ []byte, at int64, _ guest.Emitter) error {
	if at > 3 {
		return nil
	}
	return p.timer(h, at)
}

type funcProc struct {
	record func(h window.Host, r *guest.Record, out guest.Emitter) error
	timer  func(h window.Host, key []byte, at int64, out guest.Emitter) error
}

func (p funcProc) Record(h window.Host, r *guest.Record, out guest.Emitter) error {
	return p.record(h, r, out)
}

func (p funcProc) Timer(h window.Host, key []byte, at int64, out guest.Emitter) error {
	return p.timer(h, key, at, out)
}

// Firings run in (at, key) order; one that fails terminally is
// dead-lettered (its timer gone, its writes and outputs discarded) and the
// round goes on; one that fails retryably keeps its timer and ends the
// round.
func TestFiringOrderAndFailures(t *testing.T) {
	t.Parallel()
	var fired []string
	boom := errors.New("boom")
	pr := funcProc{
		record: func(h window.Host, r *guest.Record, _ guest.Emitter) error {
			for _, tm := range []struct {
				key string
				at  int64
			}{{"b", 2}, {"a", 2}, {"c", 1}, {"a", 9}, {"a", 2}} {
				if err := h.SetTimer([]byte(tm.key), tm.at); err != nil {
					return err
				}
			}
			return nil
		},
		timer: func(h window.Host, key []byte, at int64, out guest.Emitter) error {
			fired = append(fired, string(key)+strconv.FormatInt(at, 10))
			_ = h.Put(key, []byte("s"), []byte("x"))
			_ = out.Emit(guest.Output{Key: key})
			switch string(key) {
			case "b":
				return guest.Terminal(boom)
			case "c":
				if len(fired) == 1 {
					return boom // retried: the round ends, c1 still due
				}
			}
			return nil
		},
	}
	p := windowtest.New()
	outs, err := p.Record(pr, guest.Record{Key: []byte("k"), Timestamp: time.UnixMilli(5)})
	if !errors.Is(err, boom) || len(outs) != 0 || !reflect.DeepEqual(fired, []string{"c1"}) {
		t.Fatalf("first round: fired %v, outputs %d, err %v", fired, len(outs), err)
	}
	if len(p.Timers()) != 4 || len(p.State()) != 0 {
		t.Fatalf("after a retried firing: timers %v (want 4: deduplicated), state %v", p.Timers(), p.State())
	}
	outs, err = p.Advance(pr, time.UnixMilli(5))
	if !errors.Is(err, boom) || !guest.IsTerminal(err) {
		t.Fatalf("second round: err %v, want b's terminal failure", err)
	}
	if !reflect.DeepEqual(fired, []string{"c1", "c1", "a2", "b2"}) || len(outs) != 2 {
		t.Fatalf("fired %v, %d outputs; want c1 again, a2, b2 in (at, key) order and the outputs of c1, a2", fired, len(outs))
	}
	if _, ok := p.State()["b"]; ok || len(p.Timers()) != 1 || p.Timers()[0] != (windowtest.Timer{Key: "a", At: 9}) {
		t.Fatalf("state %v, timers %v: want b's write discarded, only (a, 9) left", p.State(), p.Timers())
	}
}

// An ABI error a retry cannot cure fails the record terminally, naming the
// windows; a limit stays retryable.
func TestHostErrorsClassified(t *testing.T) {
	t.Parallel()
	w, _ := window.Hopping(10*time.Millisecond, 5*time.Millisecond, window.Options{Name: "w"})
	p := windowtest.New()
	_, err := p.Record(proc{w}, guest.Record{Key: make([]byte, abi.MaxStateKeyBytes+1), Timestamp: time.UnixMilli(7)})
	if !errors.Is(err, abi.ErrnoTooLarge) || !guest.IsTerminal(err) || !strings.Contains(err.Error(), `windows "w"`) {
		t.Fatalf("over-long key: %v, want a terminal ErrnoTooLarge naming the windows", err)
	}
	p = windowtest.New()
	p.MaxWrites = 3 // a record at 7 opens two windows: two timers and two puts
	_, err = p.Record(proc{w}, guest.Record{Key: []byte("k"), Timestamp: time.UnixMilli(7)})
	if !errors.Is(err, abi.ErrnoLimit) || guest.IsTerminal(err) {
		t.Fatalf("over the writes' limit: %v, want a retryable ErrnoLimit", err)
	}
	if len(p.State()) != 0 || len(p.Timers()) != 0 {
		t.Fatalf("a failed record left state %v, timers %v", p.State(), p.Timers())
	}
}

// The firing rule is deterministic, and so are the windows over it: the
// same records give the same outputs in the same order (a replay after an
// aborted transaction must emit what the aborted attempt emitted).
func TestSameRecordsSameOutputs(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(27, 28))
	kinds := []func() windows{
		func() windows {
			w, _ := window.Tumbling(7*time.Millisecond, window.Options{Name: "w", Grace: 3 * time.Millisecond, LateTopic: "late"})
			return w
		},
		func() windows {
			w, _ := window.Hopping(9*time.Millisecond, 4*time.Millisecond, window.Options{Name: "w", Grace: 2 * time.Millisecond})
			return w
		},
		func() windows {
			w, _ := window.Sessions(5*time.Millisecond, window.Options{Name: "w", Grace: 4 * time.Millisecond})
			return w
		},
	}
	for trial := range 100 {
		recs := randomInput(rng, 3)
		for k, kind := range kinds {
			var runs [2][]guest.Output
			for i := range runs {
				p := windowtest.New()
				pr := proc{kind()}
				for j, r := range recs {
					outs, err := p.Record(pr, guest.Record{Offset: int64(j), Key: []byte(r.Key), Value: []byte("v"), Timestamp: time.UnixMilli(r.TS)})
					if err != nil {
						t.Fatal(err)
					}
					runs[i] = append(runs[i], outs...)
				}
			}
			if !reflect.DeepEqual(runs[0], runs[1]) {
				t.Fatalf("trial %d, kind %d: two runs of the same records differ:\n%+v\n%+v", trial, k, runs[0], runs[1])
			}
		}
	}
}
