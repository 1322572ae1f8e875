package registry

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The hosts topic is written by every host of the fleet, and by anyone else
// the cluster lets write it (RELIABILITY.md, "The fleet registry"). A status
// there decides what other hosts believe: which hosts are live (deploy
// --wait-all waits for each), what the fleet lists, and the counts a
// canary is judged by. So a status read is held to what a host could
// write:
//
//   - dated at most MaxClockSkew ahead of the reader's clock (a status
//     dated in 2099 would be live until then), and live only while neither
//     older than LiveFor nor further ahead than that;
//   - at most MaxStatusBytes, a failure's text at most MaxFailureText;
//   - counts that add up: failures within records, failures by kind within
//     the failures, re-runs within a kind's failures and failures shared
//     with the stable version within the re-runs, at most MaxKinds kinds
//     and MaxPartitionsListed partitions; a version whose counts do not is
//     kept without them;
//   - at most MaxHosts statuses are kept: a new host's status replaces one
//     no longer live, or is ignored while all are live.
//
// Each status refused or bounded is counted (IgnoredStatuses) and logged
// at most once a minute with the count, so a flood of them is not a flood
// of log lines.

const (
	// MaxClockSkew: a status dated further ahead of the reader's clock is
	// ignored.
	MaxClockSkew = 30 * time.Second
	// MaxStatusBytes bounds a host's status record.
	MaxStatusBytes = 64 << 10
	// MaxFailureText bounds the reason a status gives for a deployment a
	// host cannot run (longer reasons are cut).
	MaxFailureText = 512
	// MaxHosts bounds the statuses a registry keeps (CAPACITY.md: past a
	// few hundred hosts the hosts topic is the registry's limit anyway).
	MaxHosts = 1024
	// MaxKinds bounds the kinds of failure one version's counts name.
	MaxKinds = 32
	// MaxPartitionsListed bounds the partitions one version's counts name
	// (the most failing ones).
	MaxPartitionsListed = 16
)

// Counts is what one version decided on one host since the host loaded
// it: records, and of those failed, by kind of failure.
type Counts struct {
	Records int64 `json:"records"`
	Failed  int64 `json:"failed"`
	// Kinds: the failures by kind (fault.trap, guest.fail, ...); for a
	// canary, with the failures run again on the stable version.
	Kinds map[string]KindCounts `json:"kinds,omitempty"`
	// Checks: for a canary, the host runs its failed records again on the
	// stable version (scheduler/canarycheck.go); it cannot when the stable
	// version is asynchronous or the pipeline keeps state.
	Checks bool `json:"checks,omitempty"`
	// Partitions: a canary's failures by input partition ("topic/p"), the
	// most failing ones.
	Partitions map[string]int64 `json:"partitions,omitempty"`
}

// KindCounts is one kind of failure of one version on one host.
type KindCounts struct {
	Failed int64 `json:"failed"`
	// Checked: failures run again on the stable version; Shared: of those,
	// the ones the stable version failed too.
	Checked int64 `json:"checked,omitempty"`
	Shared  int64 `json:"shared,omitempty"`
}

// HostStatus is what one host runs.
type HostStatus struct {
	Host      string             `json:"host"`
	Pipelines map[string]string  `json:"pipelines"`        // name -> digest running
	Failed    map[string]Failure `json:"failed,omitempty"` // name -> the deployment it could not run
	// Versions: per pipeline, per digest, what the host decided on it
	// since it loaded it (a canary's failures are compared with the
	// stable version's across the fleet).
	Versions map[string]map[string]Counts `json:"versions,omitempty"`
	At       time.Time                    `json:"at"`
}

// Failure is a deployment a host could not run, and why.
type Failure struct {
	Digest string `json:"digest"`
	Error  string `json:"error"`
}

// MaxHostsListed bounds the hosts a listing shows (the admin API's fleet
// view, the dashboard): whoever may write the hosts topic could otherwise
// make a listing as long as the statuses the registry keeps.
const MaxHostsListed = 100

// RankHosts orders hosts by rank (lowest first: what an operator should
// see first), then by name, and keeps at most MaxHostsListed of them;
// notListed counts those left out. It sorts hosts in place.
func RankHosts(hosts []HostStatus, rank func(HostStatus) int) (listed []HostStatus, notListed int) {
	slices.SortFunc(hosts, func(x, y HostStatus) int {
		if c := cmp.Compare(rank(x), rank(y)); c != 0 {
			return c
		}
		return cmp.Compare(x.Host, y.Host)
	})
	if len(hosts) > MaxHostsListed {
		return hosts[:MaxHostsListed], len(hosts) - MaxHostsListed
	}
	return hosts, 0
}

// Live reports whether the host was heard of within LiveFor of now, by a
// status not dated further ahead than MaxClockSkew.
func (h HostStatus) Live(now time.Time) bool {
	return now.Sub(h.At) < LiveFor && h.At.Sub(now) <= MaxClockSkew
}

// consistent reports whether c's counts add up (see the comment above).
func (c Counts) consistent() bool {
	if c.Records < 0 || c.Failed < 0 || c.Failed > c.Records || len(c.Kinds) > MaxKinds || len(c.Partitions) > MaxPartitionsListed {
		return false
	}
	var sum int64
	for _, k := range c.Kinds {
		if k.Failed < 0 || k.Checked < 0 || k.Shared < 0 || k.Checked > k.Failed || k.Shared > k.Checked {
			return false
		}
		sum += k.Failed
		if sum > c.Failed {
			return false
		}
	}
	for _, n := range c.Partitions {
		if n < 0 || n > c.Failed {
			return false
		}
	}
	return true
}

// bound holds h to what a host could write; it reports why h is refused
// ("" if it is not) and whether counts were dropped.
func bound(h *HostStatus, now time.Time) (refused string, dropped bool) {
	if h.At.Sub(now) > MaxClockSkew {
		return fmt.Sprintf("dated %s, ahead of this host's clock by more than %s", h.At.Format(time.RFC3339), MaxClockSkew), false
	}
	for name, f := range h.Failed {
		if len(f.Error) > MaxFailureText {
			cut := MaxFailureText
			for cut > 0 && !utf8.RuneStart(f.Error[cut]) {
				cut--
			}
			f.Error = f.Error[:cut] + "…"
			h.Failed[name] = f
		}
	}
	for _, vs := range h.Versions {
		for digest, c := range vs {
			if !c.consistent() {
				delete(vs, digest)
				dropped = true
			}
		}
	}
	return "", dropped
}

// readHostLocked takes a record of the hosts topic; r.mu is held.
func (r *Registry) readHostLocked(rec *kgo.Record) {
	key := string(rec.Key)
	if len(rec.Value) == 0 {
		delete(r.hosts, key)
		return
	}
	now := time.Now()
	if len(rec.Value) > MaxStatusBytes {
		r.ignored.note(r.log, now, key, fmt.Sprintf("%d bytes, over %d", len(rec.Value), MaxStatusBytes))
		return
	}
	var h HostStatus
	if err := json.Unmarshal(rec.Value, &h); err != nil || h.Host != key {
		r.ignored.note(r.log, now, key, "does not parse as this host's status")
		return
	}
	refused, dropped := bound(&h, now)
	if refused != "" {
		r.ignored.note(r.log, now, key, refused)
		return
	}
	if dropped {
		r.ignored.note(r.log, now, key, "counts that do not add up (dropped; the rest of the status kept)")
	}
	if _, known := r.hosts[key]; !known && len(r.hosts) >= MaxHosts && !r.evictLocked(now) {
		r.ignored.note(r.log, now, key, fmt.Sprintf("a new host while %d live hosts are known (at most %d kept)", len(r.hosts), MaxHosts))
		return
	}
	r.hosts[key] = h
}

// evictLocked removes the status heard of longest ago among those no
// longer live; false if every status is live. While every status is live
// it does not look again before the first could stop being live
// (r.noneStale): a flood of new hosts costs one look, not one per record.
func (r *Registry) evictLocked(now time.Time) bool {
	if now.Before(r.noneStale) {
		return false
	}
	oldest, first := "", time.Time{}
	for k, h := range r.hosts {
		if !h.Live(now) && (oldest == "" || h.At.Before(r.hosts[oldest].At)) {
			oldest = k
		}
		if first.IsZero() || h.At.Before(first) {
			first = h.At
		}
	}
	if oldest == "" {
		r.noneStale = first.Add(LiveFor) // statuses only move later
		return false
	}
	delete(r.hosts, oldest)
	return true
}

// HostsStatus is the status of every host heard of (at most MaxHosts).
func (r *Registry) HostsStatus() []HostStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]HostStatus, 0, len(r.hosts))
	for _, h := range r.hosts {
		out = append(out, h)
	}
	return out
}

// OwnStatus is the status this host wrote last: its own counts, which
// need no trust in what other hosts write.
func (r *Registry) OwnStatus() HostStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, _ := json.Marshal(r.status)
	var h HostStatus
	json.Unmarshal(b, &h)
	return h
}

// IgnoredStatuses is how many status records were refused or had counts
// dropped since the registry opened.
func (r *Registry) IgnoredStatuses() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ignored.total
}

// ignoredStatuses counts the status records refused or bounded, and logs
// them at most once a minute. Guarded by Registry.mu.
type ignoredStatuses struct {
	total    int64
	logged   time.Time
	sinceLog int64
}

func (s *ignoredStatuses) note(log *slog.Logger, now time.Time, host, why string) {
	s.total++
	s.sinceLog++
	if now.Sub(s.logged) < time.Minute {
		return
	}
	log.Warn("admin.registry: a host status not believed as written (who may write the hosts topic: RELIABILITY.md)", "host", fmt.Sprintf("%.64q", host), "why", why, "count", s.sinceLog, "total", s.total)
	s.logged, s.sinceLog = now, 0
}
