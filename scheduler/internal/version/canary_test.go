package version

import (
	"fmt"
	"hash/fnv"
	"math"
	"testing"
)

// A canary's share is exact for any partition count, the same on every
// host (a function of pipeline, topic and count only), and differs between
// pipelines.
func TestCanaryShare(t *testing.T) {
	for _, n := range []int32{1, 3, 12, 48, 100} {
		for _, pct := range []int{1, 10, 25, 50, 99} {
			c := &Canary{Percent: pct, Counts: map[string]int32{"in": n}}
			var got []int32
			for p := range n {
				if c.In("pipe", "in", p) {
					got = append(got, p)
				}
			}
			want := int(math.Ceil(float64(pct) * float64(n) / 100))
			if len(got) != want {
				t.Errorf("%d%% of %d partitions: %d in the canary (%v), want %d", pct, n, len(got), got, want)
			}
		}
	}
	c := &Canary{Percent: 25, Counts: map[string]int32{"in": 48}}
	differ := false
	for i := range 10 {
		for p := range int32(48) {
			if c.In(fmt.Sprint("pipe-", i), "in", p) != c.In("pipe", "in", p) {
				differ = true
			}
		}
	}
	if !differ {
		t.Error("ten pipelines' canaries all take the same partitions")
	}
	if c.In("pipe", "other", 0) {
		t.Error("a topic whose partition count is unknown is in the canary")
	}
}

// TestCanaryMembershipKeepsTheFNVShare: the share's shift is FNV-1a of
// "pipeline/topic" (hosts of different builds must agree), computed without
// allocating, since a worker asks for it with every record.
func TestCanaryMembershipKeepsTheFNVShare(t *testing.T) {
	h := fnv.New32a()
	h.Write([]byte("pipe/in"))
	if got, want := fnv32a(fnv32a(fnv32a(2166136261, "pipe"), "/"), "in"), h.Sum32(); got != want {
		t.Fatalf("fnv32a = %d, hash/fnv = %d", got, want)
	}
	c := &Canary{Percent: 25, Counts: map[string]int32{"in": 48}}
	if n := testing.AllocsPerRun(100, func() { c.In("pipe", "in", 7) }); n != 0 {
		t.Fatalf("canary membership allocates %.0f times per record", n)
	}
}
