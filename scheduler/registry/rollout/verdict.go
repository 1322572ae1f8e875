package rollout

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/wasmstream/wasmstream/scheduler/registry"
)

// When is a canary's code at fault (RATIONALE.md, "The fleet registry")? Its
// partitions are predictable, so whoever can produce to the input can send
// it poison that the stable version never sees: comparing the two
// versions' failure rates alone then aborts a canary identical to the
// stable code. What a canary is judged on is its own failures, the ones
// the stable version does not have on the same input:
//
//   - Where records can be run on the stable version without side effects
//     (scheduler/canarycheck.go), each host runs the records its canary
//     failed again on the stable version. Per kind of failure, the share
//     of checked failures the stable version did not share, times the
//     kind's failures, estimates the canary's own failures of that kind.
//     A kind is judged once CanaryMinChecks of its failures (or all of
//     them, if fewer) were checked: an estimate from a sample, which grows
//     with the failures while the checks keep up (one at a time per host,
//     every kind keeping a place in the queue). Until then the kind waits
//     and the canary is judged on its other kinds.
//   - Where they cannot (an asynchronous or stateful stable version, a
//     host from before checks), a kind's own failures are those above the
//     stable version's rate of the same kind, over the canary's records:
//     a failure of a kind the stable version does not have at all counts
//     in full. This is the weaker judgement an attacker with the
//     partitions' hash can still fool; README's canary section says so.
//
// The canary is aborted when its own failures exceed the margin
// (admin.canary_abort_margin) of its records, once it decided
// CanaryMinRecords. The abort reason names each kind with its counts, the
// partitions that failed most and the hosts that reported the failures.

// CanaryMinChecks is how many of a kind's failures (at most all of them)
// must have been run again on the stable version before the kind is
// judged by its checks.
const CanaryMinChecks = 5

// evidence is what one version decided, summed over hosts.
type evidence struct {
	records, failed int64
	kinds           map[string]registry.KindCounts
	parts           map[string]int64
	checks          bool             // a host checks the canary's failures
	hosts           map[string]int64 // host -> its failures of the version
}

func (e *evidence) add(host string, c registry.Counts) {
	e.records += c.Records
	e.failed += c.Failed
	e.checks = e.checks || c.Checks
	for k, kc := range c.Kinds {
		if e.kinds == nil {
			e.kinds = map[string]registry.KindCounts{}
		}
		s := e.kinds[k]
		s.Failed, s.Checked, s.Shared = s.Failed+kc.Failed, s.Checked+kc.Checked, s.Shared+kc.Shared
		e.kinds[k] = s
	}
	for p, n := range c.Partitions {
		if e.parts == nil {
			e.parts = map[string]int64{}
		}
		e.parts[p] += n
	}
	if c.Failed > 0 {
		if e.hosts == nil {
			e.hosts = map[string]int64{}
		}
		e.hosts[host] += c.Failed
	}
}

// kindless is the failures counted without a kind (by a host from before
// kinds were counted).
func (e *evidence) kindless() int64 {
	n := e.failed
	for _, k := range e.kinds {
		n -= k.Failed
	}
	return max(0, n)
}

// verdict is the judgement of a canary against its stable version.
type verdict struct {
	abort   bool
	pending bool    // a kind waits for its checks
	own     float64 // the canary's own failures (estimated)
	detail  string  // per kind, then partitions and hosts
}

// judge judges canary against stable with margin (a share of the canary's
// records).
func judge(stable, canary evidence, margin float64) verdict {
	var v verdict
	if canary.records < CanaryMinRecords {
		v.pending = true
		return v
	}
	rate := func(e evidence, n int64) float64 {
		if e.records == 0 {
			return 0
		}
		return float64(n) / float64(e.records)
	}
	var lines []string
	kinds := slices.SortedFunc(maps.Keys(canary.kinds), func(a, b string) int {
		if c := cmp.Compare(canary.kinds[b].Failed, canary.kinds[a].Failed); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	for _, k := range kinds {
		kc := canary.kinds[k]
		if kc.Failed == 0 {
			continue
		}
		var own float64
		switch {
		case kc.Checked > 0 || canary.checks:
			if kc.Checked < min(kc.Failed, CanaryMinChecks) {
				v.pending = true
				lines = append(lines, fmt.Sprintf("%s: %d failed, %d checked so far", k, kc.Failed, kc.Checked))
				continue
			}
			own = float64(kc.Failed) * float64(kc.Checked-kc.Shared) / float64(kc.Checked)
			lines = append(lines, fmt.Sprintf("%s: %d failed; of %d run again on the stable version, it failed %d", k, kc.Failed, kc.Checked, kc.Shared))
		default:
			sf := stable.kinds[k].Failed
			own = max(0, float64(kc.Failed)-rate(stable, sf)*float64(canary.records))
			lines = append(lines, fmt.Sprintf("%s: %d failed (%.1f%%), the stable version %d of %d (%.1f%%)", k, kc.Failed, 100*rate(canary, kc.Failed), sf, stable.records, 100*rate(stable, sf)))
		}
		v.own += own
	}
	if n := canary.kindless(); n > 0 {
		sf := stable.kindless()
		v.own += max(0, float64(n)-rate(stable, sf)*float64(canary.records))
		lines = append(lines, fmt.Sprintf("of unknown kind: %d failed (%.1f%%), the stable version %d of %d (%.1f%%)", n, 100*rate(canary, n), sf, stable.records, 100*rate(stable, sf)))
	}
	if p := top(canary.parts, 5); p != "" {
		lines = append(lines, "partitions "+p)
	}
	if h := top(canary.hosts, 5); h != "" {
		lines = append(lines, "hosts "+h)
	}
	v.detail = strings.Join(lines, "; ")
	v.abort = v.own/float64(canary.records) > margin
	return v
}

// top lists the n largest counts of m: "a (40), b (22)", and how many more.
func top(m map[string]int64, n int) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if c := cmp.Compare(m[b], m[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var out []string
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, fmt.Sprintf("%.64q (%d)", k, m[k]))
	}
	if len(keys) > n {
		out = append(out, fmt.Sprintf("%d more", len(keys)-n))
	}
	return strings.Join(out, ", ")
}
