package host

import (
	"context"
	"strconv"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
)

// roomState is a mapState with room for its record's outputs (OutputRoom),
// as the scheduler's state.Record has for an output beside a changelog
// output.
type roomState struct {
	*mapState
	room  [2]abi.Output
	asked []int // the n of each OutputRoom call
}

func (s *roomState) OutputRoom(n int) []abi.Output {
	s.asked = append(s.asked, n)
	if n >= len(s.room) {
		return nil
	}
	return s.room[:0:len(s.room)]
}

// A State with room for its record's outputs (OutputRoom) gets them there,
// not in the run's slab: the count example's output of each record of a
// batch is in its own State's room, the same output as one call per
// record gives.
func TestBatchOutputsInTheStatesRoom(t *testing.T) {
	m := loadShared(t, guest(t, "plugins/examples/count"), Limits{})
	one, in := newInstance(t, m), newInstance(t, m)
	defer one.Close(context.Background())
	defer in.Close(context.Background())
	alone := &mapState{m: map[string][]byte{}, maxValue: 64 << 10}
	shared := &mapState{m: map[string][]byte{}, maxValue: 64 << 10}
	keys := []string{"a", "b", "a"}
	states := make([]*roomState, len(keys))
	recs, out := runKeyedBatch(t, in, keys, func(i int) State {
		states[i] = &roomState{mapState: shared}
		return states[i]
	})
	for i := range recs {
		want := one.ProcessState(context.Background(), &recs[i], nil, alone)
		o := out[i]
		if o.Status != abi.StatusOK || want.Status != abi.StatusOK {
			t.Fatalf("record %d: %v %v; alone: %v %v", i, o.Status, o.Err, want.Status, want.Err)
		}
		sameOutputs(t, "record "+strconv.Itoa(i), o.Outputs, want.Outputs)
		if len(states[i].asked) != 1 || states[i].asked[0] != 1 {
			t.Fatalf("record %d: OutputRoom asked %v, want once for its 1 output", i, states[i].asked)
		}
		if len(o.Outputs) != 1 || &o.Outputs[0] != &states[i].room[0] || cap(o.Outputs) != len(states[i].room) {
			t.Fatalf("record %d: its output is not in its State's room (%d outputs, cap %d)", i, len(o.Outputs), cap(o.Outputs))
		}
	}
	if string(out[2].Outputs[0].Value) != "2" {
		t.Fatalf("the second a counts %q, want 2", out[2].Outputs[0].Value)
	}
}
