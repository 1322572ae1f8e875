package host

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// timerState is a mapState2 that serves timers (Timers): "key\x00at".
type timerState struct {
	*mapState2
	timers map[string]bool
}

func newTimerState() *timerState {
	return &timerState{
		mapState2: &mapState2{mapState: &mapState{m: map[string][]byte{}, maxValue: 1 << 10, foreign: "other-"}, m2: map[string][]byte{}, time: -1},
		timers:    map[string]bool{},
	}
}

func timerName(key []byte, at int64) string { return string(key) + "\x00" + strconv.FormatInt(at, 10) }

func (s *timerState) SetTimer(key []byte, at int64) abi.Errno {
	if e := s.check(key); e != 0 {
		return e
	}
	s.timers[timerName(key, at)] = true
	return 0
}

func (s *timerState) DeleteTimer(key []byte, at int64) abi.Errno {
	if e := s.check(key); e != 0 {
		return e
	}
	s.timers[timerName(key, at)] = false
	return 0
}

func (s *timerState) WrittenTimer(key []byte, at int64) bool {
	_, ok := s.timers[timerName(key, at)]
	return ok
}

// The timer host functions (ABI.md §4.2, host/testdata/timers.wat):
// timer_set and timer_delete reach the State's Timers, a key over 1 KiB
// is -9, a timer write counts as an output (limits.max_outputs), a State
// without Timers is -11; a firing is read with record_read in §4.2's
// encoding, timer_set at or before its at is -5 and after it 0; a firing
// that returns pending is a protocol fault, one that fails carries its
// error.
func TestTimerHostFunctions(t *testing.T) {
	wasm := wt.BuildWat(t, "host/testdata/timers.wat")
	m := load(t, wasm, Limits{})
	if !m.Info().Timers {
		t.Fatal("a module importing timer_set and exporting wasmstream_on_timer is not noted as having timers")
	}
	in := newInstance(t, m)
	ctx := context.Background()
	rec := func(off, ts int64) *abi.Record {
		return &abi.Record{Offset: off, Timestamp: ts, Topic: "in", Key: []byte("k"), Attempt: 1}
	}
	st := newTimerState()
	if res := in.ProcessState(ctx, rec(0, 1700), nil, st); res.Status != abi.StatusOK || !st.timers[timerName([]byte("k"), 1700)] {
		t.Fatalf("timer_set: %v %v, timers %v", res.Status, res.Err, st.timers)
	}
	for c := int64(1); c <= 2; c++ {
		if res := in.ProcessState(ctx, rec(c, 1), nil, newTimerState()); res.Status != abi.StatusOK {
			t.Fatalf("case %d: %v %v", c, res.Status, res.Err)
		}
	}
	// Two timer writes (one timer set twice is one) and a delete: three
	// outputs' worth under limits.max_outputs 1 refuses the second.
	one := newInstance(t, load(t, wasm, Limits{MaxOutputs: 1}))
	if res := one.ProcessState(ctx, rec(2, 1), nil, newTimerState()); res.Status == abi.StatusOK {
		t.Fatal("two timer writes under limits.max_outputs 1 passed")
	}
	for _, s := range []State{st.mapState2, nil} {
		if res := in.ProcessState(ctx, rec(0, 1), nil, s); res.Status == abi.StatusOK {
			t.Fatalf("timer_set without Timers (%T) passed", s)
		}
	}

	f := &abi.TimerFiring{At: 1700, StreamTime: 1800, Partition: 2, Attempt: 1, Topic: "in", Key: []byte("k")}
	res := in.ProcessTimer(ctx, f, nil, st)
	if res.Status != abi.StatusOK || len(res.Outputs) != 1 {
		t.Fatalf("firing: %v %v %+v", res.Status, res.Err, res.Outputs)
	}
	got, err := abi.DecodeTimerFiring(res.Outputs[0].Value)
	if err != nil || got.At != 1700 || got.StreamTime != 1800 || got.Partition != 2 || got.Attempt != 1 || got.Topic != "in" || string(got.Key) != "k" {
		t.Fatalf("the firing the guest read: %+v %v", got, err)
	}
	if !st.timers[timerName([]byte("k"), 1701)] {
		t.Fatalf("timer_set after the firing's at was not made: %v", st.timers)
	}
	// A record after a firing is a record again: timer_set at any time.
	if res := in.ProcessState(ctx, rec(0, 5), nil, st); res.Status != abi.StatusOK {
		t.Fatalf("a record after a firing: %v %v", res.Status, res.Err)
	}
	if res := in.ProcessTimer(ctx, &abi.TimerFiring{At: 98, Key: []byte("k")}, nil, st); res.Status != abi.StatusFail || !strings.Contains(errString(res.Err), "failed") {
		t.Fatalf("a firing that fails: %v %v", res.Status, res.Err)
	}
	res = in.ProcessTimer(ctx, &abi.TimerFiring{At: 99, Key: []byte("k")}, nil, st)
	if f := res.Fault(); f == nil || f.Kind != FaultProtocol || !strings.Contains(f.Msg, "pending") || !in.Dead() {
		t.Fatalf("a firing that returns pending: %v %v (dead %v)", res.Status, res.Err, in.Dead())
	}
}

// A module that imports timer_set must export wasmstream_on_timer: refused
// at load, naming both. One without timers has no firing entry:
// ProcessTimer fails with a protocol fault rather than calling nothing.
func TestTimerExportRequired(t *testing.T) {
	err := loadErr(t, wt.BuildWat(t, "host/testdata/timers_noexport.wat"))
	if err == nil || !strings.Contains(err.Error(), abi.ExportOnTimer) || !strings.Contains(err.Error(), abi.ImportTimerSet) {
		t.Fatalf("load: %v", err)
	}
	in := newInstance(t, load(t, wt.BuildWat(t, "host/testdata/state2.wat"), Limits{}))
	res := in.ProcessTimer(context.Background(), &abi.TimerFiring{At: 1}, nil, newTimerState())
	if f := res.Fault(); f == nil || f.Kind != FaultProtocol || !strings.Contains(f.Msg, abi.ExportOnTimer) {
		t.Fatalf("ProcessTimer without the export: %v %v", res.Status, res.Err)
	}
}
