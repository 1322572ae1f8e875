package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/window/windowtest"
	"github.com/wasmstream/wasmstream/internal/windowmodel"
)

// Over an in-memory partition that keeps the host's firing rule, the final
// results equal the reference model's for random timestamps, out of order
// within the grace and late beyond it: tumbling windows (the default),
// hopping windows and sessions, as WINDOW_KIND says.
func TestWindowCountMatchesTheModel(t *testing.T) {
	for _, c := range []struct {
		kind  string
		env   map[string]string
		model func([]windowmodel.Record) windowmodel.Result
	}{
		{"tumbling", map[string]string{"WINDOW_SIZE": "1s", "WINDOW_GRACE": "300ms"},
			func(r []windowmodel.Record) windowmodel.Result { return windowmodel.Tumbling(r, 1000, 300) }},
		{"hopping", map[string]string{"WINDOW_KIND": "hopping", "WINDOW_SIZE": "1s", "WINDOW_ADVANCE": "300ms", "WINDOW_GRACE": "200ms"},
			func(r []windowmodel.Record) windowmodel.Result { return windowmodel.Hopping(r, 1000, 300, 200) }},
		{"session", map[string]string{"WINDOW_KIND": "session", "WINDOW_SIZE": "100ms", "WINDOW_GRACE": "200ms"},
			func(r []windowmodel.Record) windowmodel.Result { return windowmodel.Sessions(r, 100, 200) }},
	} {
		t.Run(c.kind, func(t *testing.T) { // not parallel: the windows are the module's one global
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			windows = nil
			defer func() { windows = nil }()
			got, recs := countRandom(t)
			var want []string
			for _, w := range c.model(recs).Final {
				want = append(want, fmt.Sprintf("%s %d %d %d", w.Key, w.Start, w.End, w.Count))
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) || len(want) < 10 {
				t.Fatalf("got %d results, the model %d:\n%v\n%v", len(got), len(want), got, want)
			}
		})
	}
}

// countRandom runs 500 records of random keys and timestamps through the
// processor on an in-memory partition: the outputs ("key value") and the
// records as the model takes them.
func countRandom(t *testing.T) (got []string, recs []windowmodel.Record) {
	rng := rand.New(rand.NewPCG(7, 11))
	p := windowtest.New()
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
	return got, recs
}

// An unknown WINDOW_KIND fails the record terminally, naming the variable.
func TestWindowCountUnknownKind(t *testing.T) {
	t.Setenv("WINDOW_KIND", "sliding")
	windows = nil
	defer func() { windows = nil }()
	_, err := windowtest.New().Record(processor{}, guest.Record{Topic: "in", Key: []byte("k"), Timestamp: time.UnixMilli(1)})
	if err == nil || !strings.Contains(err.Error(), "WINDOW_KIND") {
		t.Fatalf("WINDOW_KIND sliding: %v", err)
	}
}

// A duration in the environment that does not parse is an error naming
// its variable, not the default in silence.
func TestWindowCountBadDuration(t *testing.T) {
	for _, name := range []string{"WINDOW_SIZE", "WINDOW_GRACE", "WINDOW_ADVANCE"} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("WINDOW_KIND", "hopping")
			t.Setenv(name, "5 minutes")
			windows = nil
			defer func() { windows = nil }()
			_, err := windowtest.New().Record(processor{}, guest.Record{Topic: "in", Key: []byte("k"), Timestamp: time.UnixMilli(1)})
			if err == nil || !strings.Contains(err.Error(), name) {
				t.Fatalf("%s=\"5 minutes\": %v, want an error naming it", name, err)
			}
		})
	}
}
