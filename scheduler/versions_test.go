package scheduler

import (
	"strings"
	"testing"
	"time"
)

// A retired version is reported for RetiredVersionRetention, with its
// label and the records still decided on it, at most MaxRetiredVersions
// per pipeline; its series sums with a running version of the same digest.
func TestRetiredVersionsKeptForAWhileAndBounded(t *testing.T) {
	var rv retiredVersions
	t0 := time.Unix(1_000_000, 0)
	canary := &modVersion{}
	l := "v2-rc1"
	canary.Label.Store(&l)
	canary.Records.Store(40)
	canary.Failed.Store(7)
	rv.keep("p", canary, strings.Repeat("c", 64), true, t0)
	canary.Records.Add(2) // records begun on it finish after the abort

	got := rv.stats("p", t0.Add(RetiredVersionRetention-time.Second))
	if len(got) != 1 || got[0].Label != "v2-rc1" || !got[0].Canary || !got[0].Retired || got[0].Records != 42 || got[0].Failed != 7 {
		t.Fatalf("retired canary: %+v", got)
	}
	if got := rv.stats("p", t0.Add(RetiredVersionRetention)); len(got) != 0 {
		t.Fatalf("kept past the retention: %+v", got)
	}
	for i := range MaxRetiredVersions + 5 {
		rv.keep("q", &modVersion{}, strings.Repeat(string(rune('a'+i)), 64), false, t0)
	}
	got = rv.stats("q", t0)
	if len(got) != MaxRetiredVersions || got[0].Digest[0] != byte('a'+5) {
		t.Fatalf("%d kept (first %q), want the newest %d", len(got), got[0].Digest[:1], MaxRetiredVersions)
	}
	series := versionSeries([]VersionStats{{Digest: got[0].Digest, Records: 5, Failed: 1}}, []VersionStats{{Digest: got[0].Digest, Records: 3, Retired: true}})
	if len(series) != 1 || series[seriesKey{digest: got[0].Digest[:12]}] != [2]int64{8, 1} {
		t.Fatalf("series %v", series)
	}
}
