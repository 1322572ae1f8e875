package dashboard

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/wasmstream/wasmstream/scheduler"
)

// The event log: what changed on the host, found by comparing each sample
// with the one before (the sampler's goroutine), so nothing in the
// scheduler calls the dashboard for it. Kinds: a deploy (the version a
// pipeline runs changed), a canary's start, promotion and abort (with the
// reason), an assignment (partitions gained and lost in a rebalance), a
// restore (changelog records applied at an assignment) and broker errors
// (a broker's error count grew; while it keeps growing the same entry is
// updated, so an outage is one line, not one a second). The log is a ring
// of maxEvents; each text is at most maxEventText bytes.
const (
	maxEvents    = 100
	maxEventText = 400
	// maxErrorShown bounds an error or a reason the page shows.
	maxErrorShown = 512
)

// Event is one line of the event log.
type Event struct {
	ID       uint64 `json:"id"`
	At       int64  `json:"at"` // Unix ms; for a repeated one, the last time
	First    int64  `json:"first,omitempty"`
	Kind     string `json:"kind"`
	Pipeline string `json:"pipeline,omitempty"`
	Text     string `json:"text"`
	Count    int64  `json:"count,omitempty"` // broker errors: errors counted in this entry
	key      string // what a repeat of it is recognised by ("": none)
}

// eventLog is safe for concurrent use; its lock is a leaf.
type eventLog struct {
	mu  sync.Mutex
	buf []Event // oldest first, at most maxEvents
	seq uint64
}

func (l *eventLog) add(at int64, kind, pipeline, text string) {
	l.addKeyed(at, kind, pipeline, text, "", 0)
}

// addKeyed adds an event, or with a key equal to the newest entry of that
// key among the last few, updates that entry (its time, text and count).
func (l *eventLog) addKeyed(at int64, kind, pipeline, text, key string, n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	text = cut(text, maxEventText)
	if key != "" {
		for i := len(l.buf) - 1; i >= 0 && i >= len(l.buf)-8; i-- {
			if e := &l.buf[i]; e.key == key {
				e.At, e.Text, e.Count = at, text, e.Count+n
				return
			}
		}
	}
	l.seq++
	e := Event{ID: l.seq, At: at, First: at, Kind: kind, Pipeline: pipeline, Text: text, Count: n, key: key}
	if len(l.buf) == maxEvents {
		l.buf = slices.Delete(l.buf, 0, 1)
	}
	l.buf = append(l.buf, e)
}

// newest returns a copy, newest first.
func (l *eventLog) newest() []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Event, len(l.buf))
	for i, e := range l.buf {
		out[len(l.buf)-1-i] = e
	}
	return out
}

// watch is what the previous sample saw; the sampler's goroutine only.
type watch struct {
	seen     bool
	versions map[string]versionFrame
	parts    map[string][]string // pipeline -> "topic[p]", sorted
	restored map[string]int64
	brokers  map[string]int64 // pipeline + broker -> errors
}

// compare logs what changed between the previous sample and this one.
func (s *Server) compare(w *watch, at int64, views []scheduler.PipelineView, vs []versionFrame) {
	l := s.evlog
	first := !w.seen
	w.seen = true
	if w.versions == nil {
		w.versions, w.parts, w.restored, w.brokers = map[string]versionFrame{}, map[string][]string{}, map[string]int64{}, map[string]int64{}
	}
	for _, v := range vs {
		w.deploys(l, at, v)
	}
	for _, v := range views {
		w.assignment(l, at, v, first)
		w.restore(l, at, v)
		w.brokerErrors(l, at, v)
	}
}

// deploys logs a pipeline's version deployed, rolled back or promoted, and
// its canary started, aborted or ended.
func (w *watch) deploys(l *eventLog, at int64, v versionFrame) {
	old, had := w.versions[v.Pipeline]
	w.versions[v.Pipeline] = v
	switch {
	case !had:
		l.add(at, "version", v.Pipeline, "runs "+version(v.Digest, v.Label)+deployedBy(v))
	case old.Digest != v.Digest:
		what := "deployed"
		if old.Canary != nil && old.Canary.Digest == v.Digest {
			what = "canary promoted:"
		} else if slices.ContainsFunc(v.History, func(r versionRef) bool { return r.Digest == v.Digest }) {
			what = "rolled back to"
		}
		l.add(at, "deploy", v.Pipeline, fmt.Sprintf("%s %s (was %s)%s", what, version(v.Digest, v.Label), short(old.Digest), deployedBy(v)))
	}
	if c := v.abortedCanary; had && c != nil && v.Aborted != old.Aborted &&
		(old.Canary == nil || old.Canary.Digest != c.Digest || old.Canary.Since != c.Since) {
		// A canary that began and was aborted between two looks: both
		// are told, as if each had been seen.
		l.add(at, "canary.start", v.Pipeline, fmt.Sprintf("canary %s on %d%% of the partitions", version(c.Digest, c.Label), c.Percent))
		l.add(at, "canary.abort", v.Pipeline, fmt.Sprintf("canary %s aborted: %s", short(c.Digest), v.Aborted))
	}
	if v.Canary != nil && (old.Canary == nil || old.Canary.Digest != v.Canary.Digest) {
		l.add(at, "canary.start", v.Pipeline, fmt.Sprintf("canary %s on %d%% of the partitions", version(v.Canary.Digest, v.Canary.Label), v.Canary.Percent))
	}
	if had && old.Canary != nil && v.Canary == nil && old.Canary.Digest != v.Digest {
		if v.Aborted != "" && v.Aborted != old.Aborted {
			l.add(at, "canary.abort", v.Pipeline, fmt.Sprintf("canary %s aborted: %s", short(old.Canary.Digest), v.Aborted))
		} else {
			l.add(at, "canary.end", v.Pipeline, fmt.Sprintf("canary %s ended", short(old.Canary.Digest)))
		}
	}
}

// assignment logs the partitions a pipeline gained and lost (not, on the
// first sample, that it has none yet).
func (w *watch) assignment(l *eventLog, at int64, v scheduler.PipelineView, first bool) {
	var ps []string
	for _, p := range v.Partitions {
		ps = append(ps, fmt.Sprintf("%s[%d]", p.Topic, p.Partition))
	}
	slices.Sort(ps)
	old := w.parts[v.Name]
	if slices.Equal(old, ps) {
		return
	}
	gained, lost := diff(ps, old), diff(old, ps)
	var b strings.Builder
	fmt.Fprintf(&b, "%d partition(s) assigned", len(ps))
	if len(gained) > 0 {
		b.WriteString("; gained " + list(gained))
	}
	if len(lost) > 0 {
		b.WriteString("; lost " + list(lost))
	}
	if !(first && len(ps) == 0) {
		l.add(at, "assignment", v.Name, b.String())
	}
	w.parts[v.Name] = ps
}

// restore logs the changelog records a pipeline's state restores applied.
func (w *watch) restore(l *eventLog, at int64, v scheduler.PipelineView) {
	if prev, ok := w.restored[v.Name]; ok && v.StateRestored > prev {
		l.add(at, "restore", v.Name, fmt.Sprintf("state restored: %d changelog record(s) applied", v.StateRestored-prev))
	} else if !ok && v.StateRestored > 0 {
		l.add(at, "restore", v.Name, fmt.Sprintf("state restored: %d changelog record(s) applied since start", v.StateRestored))
	}
	w.restored[v.Name] = v.StateRestored
}

// brokerErrors logs the errors a pipeline's clients met with each broker
// since the previous sample.
func (w *watch) brokerErrors(l *eventLog, at int64, v scheduler.PipelineView) {
	for _, b := range v.BrokerErrors {
		k := v.Name + "\x00" + b.Broker
		n := b.Connect + b.Request
		if prev := w.brokers[k]; n > prev {
			l.addKeyed(at, "broker.error", v.Name, fmt.Sprintf("broker %s (%s): %d connect, %d request error(s) since start; last: %s", b.Broker, b.Address, b.Connect, b.Request, b.LastError), k, n-prev)
		}
		w.brokers[k] = n
	}
}

func deployedBy(v versionFrame) string {
	if v.By != "" {
		return " by " + v.By
	}
	return ""
}

// version is a digest's first 12 characters, with its label.
func version(digest, label string) string {
	if label != "" {
		return short(digest) + " «" + label + "»"
	}
	return short(digest)
}

func short(d string) string { return d[:min(12, len(d))] }

// diff is what a has and b lacks (both sorted).
func diff(a, b []string) []string {
	var out []string
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			out = append(out, x)
		}
	}
	return out
}

func list(xs []string) string {
	if len(xs) > 16 {
		return strings.Join(xs[:16], ", ") + fmt.Sprintf(" and %d more", len(xs)-16)
	}
	return strings.Join(xs, ", ")
}

// cut is s as valid UTF-8 of at most n bytes, "…" added when cut.
func cut(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
