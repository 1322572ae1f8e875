package source

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
)

// TestDispatchPlainValues: a poll reaches the task map as plain values —
// a partition's records to its task, the high watermark noted, the end a
// fetch with no records reached (its last stable offset under
// read_committed, else its high watermark) taken as caught up, and a
// fetch error taken as neither.
func TestDispatchPlainValues(t *testing.T) {
	t.Parallel()
	g, _, set := newMember(t, nil)
	g.Assigned(context.Background(), map[string][]int32{"in": {0, 1, 2, 3}})
	fetches := kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "in", Partitions: []kgo.FetchPartition{
		{Partition: 0, HighWatermark: 9, LastStableOffset: -1, Records: []*kgo.Record{{Topic: "in", Partition: 0, Offset: 7}, {Topic: "in", Partition: 0, Offset: 8}}},
		{Partition: 1, HighWatermark: 50, LastStableOffset: 40},
		{Partition: 2, HighWatermark: 30, LastStableOffset: -1},
		{Partition: 3, HighWatermark: 60, LastStableOffset: -1, Err: errors.New("broken")},
	}}}}}
	g.d.dispatch(fetches)
	lag := func(p int32) int64 { return set.Get(partition.TP{Topic: "in", Partition: p}).Gauges(false).Lag }
	if g := set.Get(partition.TP{Topic: "in", Partition: 0}).Gauges(false); g.InFlight != 2 {
		t.Errorf("partition 0 has %d records in flight, want the 2 fetched", g.InFlight)
	}
	for _, c := range []struct {
		p    int32
		want int64
	}{{1, 10}, {2, 0}, {3, 60}} {
		if got := lag(c.p); got != c.want {
			t.Errorf("partition %d's lag %d, want %d", c.p, got, c.want)
		}
	}
	if len(g.d.fetched) != 0 || cap(g.d.fetched) < 4 {
		t.Errorf("the dispatch buffer is %d long, %d cap: want kept for the next poll, emptied", len(g.d.fetched), cap(g.d.fetched))
	}
}
