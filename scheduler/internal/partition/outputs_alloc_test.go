package partition

import (
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

// A record with two outputs (a stateful record's output and its changelog
// output) allocates once from its decision to its output records
// (outputsRare, prepareOutputs): the jobRare with the second record inside.
// It was three (the jobRare, the second record, the slice pointing at it).
// Three outputs keep the general way (three allocations). Not parallel:
// AllocsPerRun counts the whole binary's allocations.
func TestTwoOutputsOneAllocation(t *testing.T) {
	at := time.Now()
	for _, c := range []struct {
		outs int
		max  float64
	}{{2, 1}, {3, 3}} {
		outs := make([]abi.Output, c.outs)
		for i := range outs {
			outs[i] = abi.Output{Key: []byte("k"), Value: []byte("v"), Partition: -1}
		}
		var j job
		n := testing.AllocsPerRun(100, func() {
			j.rare, j.outcome.outs = nil, outs
			j.outputsRare()
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
