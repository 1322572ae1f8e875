package offsets

import (
	"math/rand"
	"testing"
)

func TestDoneMetaRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		done []int64
	}{
		{"one", []int64{105}},
		{"run", []int64{101, 102, 103, 104}},
		{"sparse", []int64{101, 5000, 90000}},
		{"alternating", func() []int64 {
			var d []int64
			for o := int64(101); o < 3000; o += 2 {
				d = append(d, o)
			}
			return d
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, n := EncodeDone(100, tc.done, 4000)
			if n != len(tc.done) || len(s) > 4000 {
				t.Fatalf("covered %d of %d, %d bytes", n, len(tc.done), len(s))
			}
			d, err := DecodeDone(s, 100)
			if err != nil {
				t.Fatal(err)
			}
			want := map[int64]bool{}
			for _, o := range tc.done {
				want[o] = true
			}
			for o := int64(90); o < tc.done[len(tc.done)-1]+10; o++ {
				if d.Has(o) != want[o] {
					t.Fatalf("offset %d: has=%v want %v", o, d.Has(o), want[o])
				}
			}
			if d.Count() != len(tc.done) {
				t.Fatalf("count %d", d.Count())
			}
		})
	}
}

// TestDoneMetaAdversarial: whatever the gaps, the encoding stays within the
// budget (real Kafka refuses metadata over offset.metadata.max.bytes, 4096 by
// default), and what it covers decodes exactly.
func TestDoneMetaAdversarial(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	gens := map[string]func() []int64{
		"every other of 100k": func() []int64 {
			var d []int64
			for o := int64(1); o < 200000; o += 2 {
				d = append(d, o)
			}
			return d
		},
		"random 30% of 1M": func() []int64 {
			var d []int64
			for o := int64(1); o < 1000000; o++ {
				if rng.Intn(10) < 3 {
					d = append(d, o)
				}
			}
			return d
		},
		"huge gaps": func() []int64 {
			var d []int64
			o := int64(1)
			for i := 0; i < 5000; i++ {
				o += rng.Int63n(1 << 40)
				d = append(d, o)
			}
			return d
		},
	}
	for name, gen := range gens {
		t.Run(name, func(t *testing.T) {
			done := gen()
			for _, budget := range []int{4096 - 100, 1024, 64} {
				s, n := EncodeDone(0, done, budget)
				if len(s) > budget {
					t.Fatalf("budget %d: %d bytes", budget, len(s))
				}
				if n == 0 {
					continue
				}
				d, err := DecodeDone(s, 0)
				if err != nil {
					t.Fatal(err)
				}
				if d.Count() != n {
					t.Fatalf("budget %d: decoded %d done offsets, encoder said %d", budget, d.Count(), n)
				}
				for _, o := range done[:n] {
					if !d.Has(o) {
						t.Fatalf("offset %d lost", o)
					}
				}
				if n < len(done) && d.Has(done[n]) {
					t.Fatal("claims an offset past what it covers")
				}
				t.Logf("budget %d: %d bytes cover %d of %d done offsets", budget, len(s), n, len(done))
			}
		})
	}
}

func TestDoneMetaRejects(t *testing.T) {
	s, _ := EncodeDone(100, []int64{102}, 4000)
	if _, err := DecodeDone(s, 101); err == nil {
		t.Fatal("metadata for another offset accepted")
	}
	if _, err := DecodeDone("something else", 100); err != ErrNotOurs {
		t.Fatalf("foreign metadata: %v", err)
	}
	for _, bad := range []string{"ws1.", "ws1.!!!", "ws1.AQ", "ws1.Av___w"} {
		if _, err := DecodeDone(bad, 0); err == nil {
			t.Fatalf("%q accepted", bad)
		}
	}
}

func FuzzDecodeDone(f *testing.F) {
	s, _ := EncodeDone(7, []int64{9, 10, 20}, 4000)
	f.Add(s[len(doneMetaPrefix):], int64(7))
	f.Fuzz(func(t *testing.T, body string, base int64) {
		d, err := DecodeDone(doneMetaPrefix+body, base)
		if err != nil || d == nil {
			return
		}
		if d.Has(base) {
			t.Fatal("committed offset decoded as done")
		}
		if d.span > maxDecodedSpan {
			t.Fatal("span over the bound")
		}
	})
}
