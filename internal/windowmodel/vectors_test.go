package windowmodel

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
)

// vectorsFile holds the model's results on random inputs, for the SDKs
// written in other languages to be held to this model rather than to a
// port of it: the Rust SDK's window tests
// (abi/sdk/rust/wasmstream/src/window_tests.rs) read it, check their port
// of the model against it and run their windows on its inputs.
const vectorsFile = "testdata/vectors.txt"

// TestVectorsFile: vectorsFile is what the model makes of its inputs now
// (WINDOWMODEL_UPDATE=1 writes it after a change to the model).
func TestVectorsFile(t *testing.T) {
	t.Parallel()
	got := vectors()
	if os.Getenv("WINDOWMODEL_UPDATE") == "1" {
		if err := os.WriteFile(vectorsFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatalf("%v (WINDOWMODEL_UPDATE=1 go test -run TestVectorsFile ./internal/windowmodel/ writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not the model's results (the model changed? WINDOWMODEL_UPDATE=1 rewrites it)", vectorsFile)
	}
}

// vectors renders cases of each kind of window, one line a fact:
//
//	case tumbling|hopping|sessions SIZE ADVANCE GRACE   (sessions: SIZE is the gap, ADVANCE 0)
//	rec KEY TS                                          (the input, in order)
//	final|open KEY START END COUNT                      (sorted by key, start)
//	late N / dropped N / stream_time N / end
func vectors() []byte {
	var b bytes.Buffer
	rng := rand.New(rand.NewPCG(58, 3))
	for _, kind := range []string{"tumbling", "hopping", "sessions"} {
		for range 60 {
			size, grace := 1+rng.Int64N(20), rng.Int64N(15)
			advance := size
			if kind == "hopping" {
				advance = 1 + rng.Int64N(size)
			}
			recs := vectorInput(rng, grace)
			var r Result
			switch kind {
			case "sessions":
				advance = 0
				r = Sessions(recs, size, grace)
			default:
				r = Hopping(recs, size, advance, grace)
			}
			fmt.Fprintf(&b, "case %s %d %d %d\n", kind, size, advance, grace)
			for _, rec := range recs {
				fmt.Fprintf(&b, "rec %s %d\n", rec.Key, rec.TS)
			}
			for _, w := range r.Final {
				fmt.Fprintf(&b, "final %s %d %d %d\n", w.Key, w.Start, w.End, w.Count)
			}
			for _, w := range r.Open {
				fmt.Fprintf(&b, "open %s %d %d %d\n", w.Key, w.Start, w.End, w.Count)
			}
			fmt.Fprintf(&b, "late %d\ndropped %d\nstream_time %d\nend\n", r.Late, r.Dropped, r.StreamTime)
		}
	}
	return b.Bytes()
}

// vectorInput: records of a few keys whose timestamps mostly rise, some
// out of order within grace, some late beyond it, small steps so that
// window edges and close times are hit often.
func vectorInput(rng *rand.Rand, grace int64) []Record {
	recs := make([]Record, rng.IntN(60))
	hi := int64(0)
	for i := range recs {
		var ts int64
		switch rng.IntN(10) {
		case 0, 1:
			ts = max(0, hi-rng.Int64N(grace+1))
		case 2:
			ts = max(0, hi-grace-rng.Int64N(40))
		default:
			ts = hi + rng.Int64N(8)
		}
		hi = max(hi, ts)
		recs[i] = Record{Key: string(rune('a' + rng.IntN(3))), TS: ts}
	}
	return recs
}
