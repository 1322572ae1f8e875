package partition

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

// A record with two outputs (a stateful record's output and its changelog
// output) allocates nothing of its own from its decision to its output
// records (outputRecords, prepareOutputs): its second record is carved from
// the worker's slab (one allocation for recSlab records). It was one (a
// jobRare holding the second record), and three before that (the jobRare,
// the second record, the slice pointing at it). Three outputs keep the
// general way (three allocations). Not parallel: AllocsPerRun counts the
// whole binary's allocations.
func TestTwoOutputsAllocateNothing(t *testing.T) {
	at := time.Now()
	var w worker
	for _, c := range []struct {
		outs int
		max  float64
	}{{2, 0}, {3, 3}} {
		outs := make([]abi.Output, c.outs)
		for i := range outs {
			outs[i] = abi.Output{Key: []byte("k"), Value: []byte("v"), Partition: -1}
		}
		var j job
		n := testing.AllocsPerRun(100, func() {
			j.rare, j.outcome.outs, j.outcome.second = nil, outs, nil
			w.outputRecords(&j)
			j.prepareOutputs("out", at)
		})
		if n > c.max {
			t.Errorf("a record with %d outputs allocates %.0f times on its way to the sink, want at most %.0f", c.outs, n, c.max)
		}
		for i := range outs {
			if r := j.outputRecord(i); r.Topic != "out" || string(r.Value) != "v" || !r.Timestamp.Equal(at) {
				t.Fatalf("output %d of %d is produced as %+v", i, c.outs, r)
			}
		}
	}
}

// A stateful record's second output record is its state batch's
// (state.Batch.ProduceRoom), which a flush gives to the next record with
// its Record, not one of the worker's slab.
func TestStatefulSecondOutputInItsBatch(t *testing.T) {
	st, err := statestore.Open(filepath.Join(t.TempDir(), "s.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts := state.NewPartition(st, 0, 1, state.Limits{MaxValueBytes: 64, Changelog: "c"})
	rs := ts.Begin()
	rs.Put([]byte("k"), []byte("v"))
	b, outs := ts.Commit(0, rs, []abi.Output{{Key: []byte("k"), Value: []byte("1"), Partition: -1}})
	var w worker
	j := job{sb: b}
	j.outcome.outs = outs
	w.outputRecords(&j)
	j.prepareOutputs("out", time.Now())
	if j.outcome.second != b.ProduceRoom() || len(w.slabs.recs) != 0 {
		t.Fatalf("the second output's record is %p, want its batch's %p (the worker's slab: %d left)", j.outcome.second, b.ProduceRoom(), len(w.slabs.recs))
	}
	if r := j.outputRecord(1); r.Topic != "c" || string(r.Value) != "v" {
		t.Fatalf("the changelog output is produced as %+v", r)
	}
}
