package rollout

import (
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/scheduler/registry"
)

func ev(records, failed int64, checks bool, kinds map[string]registry.KindCounts, parts map[string]int64) evidence {
	var e evidence
	e.add("h1", registry.Counts{Records: records, Failed: failed, Checks: checks, Kinds: kinds, Partitions: parts})
	return e
}

// TestJudgePoisonOnTheCanarysPartitions: the figures of a canary identical
// to the stable code with poison produced to its partitions only: 62 of
// its 62 records failed (guest.fail, "not a JSON object"), the stable
// version 202 of 4,202. Comparing rates aborted it (100% against 4.8%, a
// margin of 5 points). With checks, the stable version failed every one
// of the canary's failed records too: none is the canary's own, it is
// kept. Without checks (a stable version that cannot be run without side
// effects), the kind's rate is compared, and the canary is aborted: the
// limit README's canary section states.
func TestJudgePoisonOnTheCanarysPartitions(t *testing.T) {
	stable := ev(4202, 202, false, map[string]registry.KindCounts{"guest.fail": {Failed: 202}}, nil)
	poisoned := map[string]registry.KindCounts{"guest.fail": {Failed: 62, Checked: 62, Shared: 62}}
	if v := judge(stable, ev(62, 62, true, poisoned, map[string]int64{"in/3": 40, "in/7": 22}), 0.05); v.abort || v.own != 0 {
		t.Fatalf("a canary failing only the stable version's failures aborted: %+v", v)
	}
	// A sample of them checked is enough.
	sampled := map[string]registry.KindCounts{"guest.fail": {Failed: 62, Checked: 12, Shared: 12}}
	if v := judge(stable, ev(62, 62, true, sampled, nil), 0.05); v.abort {
		t.Fatalf("sampled checks: %+v", v)
	}
	unchecked := map[string]registry.KindCounts{"guest.fail": {Failed: 62}}
	v := judge(stable, ev(62, 62, false, unchecked, nil), 0.05)
	if !v.abort || !strings.Contains(v.detail, "guest.fail: 62 failed (100.0%), the stable version 202 of 4202 (4.8%)") {
		t.Fatalf("without checks: %+v", v)
	}
}

// TestJudgeACanaryThatFails: a canary that traps on every record, checked
// on the stable version which runs them fine, is aborted, and the detail
// names the kind, its counts, the partitions and the hosts; beside
// poison, a canary failing 10% of good records of another kind is
// aborted on that kind; a kind whose checks have not come yet waits.
func TestJudgeACanaryThatFails(t *testing.T) {
	stable := ev(4202, 202, true, map[string]registry.KindCounts{"guest.fail": {Failed: 202}}, nil)
	broken := ev(62, 62, true, map[string]registry.KindCounts{"fault.trap": {Failed: 62, Checked: 20}}, map[string]int64{"in/3": 40, "in/7": 22})
	v := judge(stable, broken, 0.05)
	for _, want := range []string{`fault.trap: 62 failed; of 20 run again on the stable version, it failed 0`, `partitions "in/3" (40), "in/7" (22)`, `hosts "h1" (62)`} {
		if !v.abort || !strings.Contains(v.detail, want) {
			t.Fatalf("a canary trapping on every record: %+v; want %q", v, want)
		}
	}
	mixed := ev(1000, 160, true, map[string]registry.KindCounts{
		"guest.fail": {Failed: 60, Checked: 60, Shared: 60}, // poison
		"fault.trap": {Failed: 100, Checked: 30, Shared: 0}, // its own
	}, nil)
	if v := judge(stable, mixed, 0.05); !v.abort || v.own != 100 {
		t.Fatalf("poison and a 10%% fault: %+v", v)
	}
	waiting := ev(1000, 100, true, map[string]registry.KindCounts{"fault.trap": {Failed: 100, Checked: 3}}, nil)
	if v := judge(stable, waiting, 0.05); v.abort || !v.pending {
		t.Fatalf("3 of 100 checked: %+v", v)
	}
	if v := judge(stable, ev(40, 40, true, map[string]registry.KindCounts{"fault.trap": {Failed: 40, Checked: 40}}, nil), 0.05); v.abort {
		t.Fatalf("judged under %d records: %+v", CanaryMinRecords, v)
	}
}
