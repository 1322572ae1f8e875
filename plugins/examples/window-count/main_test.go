package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/window/windowtest"
	"github.com/wasmstream/wasmstream/internal/windowmodel"
)

// Over an in-memory partition that keeps the host's firing rule, the final
// results equal the reference model's for random timestamps, out of order
// within the grace and late beyond it.
func TestWindowCountMatchesTheModel(t *testing.T) {
	t.Setenv("WINDOW_SIZE", "1s")
	t.Setenv("WINDOW_GRACE", "300ms")
	windows = nil
	defer func() { windows = nil }()
	rng := rand.New(rand.NewPCG(7, 11))
	p := windowtest.New()
	var recs []windowmodel.Record
	var got []string
	ts := int64(0)
	for range 500 {
		ts += rng.Int64N(40)
		at := ts - rng.Int64N(500) // some within the grace, some late
		at = max(at, 0)
		key := fmt.Sprintf("k%d", rng.IntN(5))
		recs = append(recs, windowmodel.Record{Key: key, TS: at})
		outs, err := p.Record(processor{}, guest.Record{Topic: "in", Key: []byte(key), Timestamp: time.UnixMilli(at)})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range outs {
			got = append(got, fmt.Sprintf("%s %s", o.Key, o.Value))
		}
	}
	var want []string
	for _, w := range windowmodel.Tumbling(recs, 1000, 300).Final {
		want = append(want, fmt.Sprintf("%s %d %d %d", w.Key, w.Start, w.End, w.Count))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || len(want) < 10 {
		t.Fatalf("got %d results, the model %d:\n%v\n%v", len(got), len(want), got, want)
	}
}
