package host

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Guest logs are rate-limited per instance (ABI.md, "log"): a guest calling
// log in a loop must not fill the host's disk. Each instance has a token
// bucket of bytes, refilled at Limits.LogBytesPerSecond up to
// Limits.LogBurstBytes; a line costs its message (at most maxMessage bytes)
// plus logLineOverhead. A line the bucket cannot pay for is dropped and
// counted in the pipeline's guestLogStats, which the scheduler exports as
// metrics and which writes one summary line per logSummaryInterval.

// logLineOverhead is what a line costs besides its message: the timestamp,
// level and attributes the host's handler writes with it. It makes a flood
// of empty lines as bounded as a flood of long ones.
const logLineOverhead = 256

// logSummaryInterval is the least time between two "dropped N guest log
// lines" summaries of a pipeline.
const logSummaryInterval = 10 * time.Second

// logBucket is an instance's token bucket of log bytes. It belongs to the
// instance's owner goroutine (log runs inside the instance's calls).
type logBucket struct {
	tokens float64
	last   time.Time // of the previous take; zero: the bucket is full
}

// take reports whether a line of cost bytes may be written at now, and if
// so takes its cost from the bucket.
func (b *logBucket) take(now time.Time, cost, perSecond, burst int) bool {
	if b.last.IsZero() {
		b.tokens = float64(burst)
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(float64(burst), b.tokens+d.Seconds()*float64(perSecond))
	}
	b.last = now
	if b.tokens < float64(cost) {
		return false
	}
	b.tokens -= float64(cost)
	return true
}

// guestLogStats counts the guest log lines a pipeline's instances dropped.
// The engine keeps one per pipeline name, so the counts outlive a module
// replaced by a new version. Safe for concurrent use.
type guestLogStats struct {
	lines, bytes atomic.Int64 // totals since the engine started

	mu           sync.Mutex
	pendLines    int64     // dropped since the last summary
	pendBytes    int64     //
	since        time.Time // the first of those drops
	lastSummary  time.Time
	summaryEvery time.Duration
}

// drop counts a dropped line of n message bytes. When a summary is due (the
// first drop, then at most once per summaryEvery) it returns what the
// summary reports and ok.
func (s *guestLogStats) drop(now time.Time, n int) (sum logSummary, ok bool) {
	s.lines.Add(1)
	s.bytes.Add(int64(n))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pendLines == 0 {
		s.since = now
	}
	s.pendLines++
	s.pendBytes += int64(n)
	if !s.lastSummary.IsZero() && now.Sub(s.lastSummary) < s.summaryEvery {
		return logSummary{}, false
	}
	return s.takeSummary(now), true
}

// flush returns the drops not yet summarised, if any.
func (s *guestLogStats) flush(now time.Time) (sum logSummary, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pendLines == 0 {
		return logSummary{}, false
	}
	return s.takeSummary(now), true
}

func (s *guestLogStats) takeSummary(now time.Time) logSummary {
	sum := logSummary{lines: s.pendLines, bytes: s.pendBytes, over: now.Sub(s.since)}
	s.pendLines, s.pendBytes, s.lastSummary = 0, 0, now
	return sum
}

// logSummary is what one summary line reports.
type logSummary struct {
	lines, bytes int64
	over         time.Duration
}

// guestLogStats returns the drop counters of the pipeline name.
func (e *Engine) guestLogStats(name string) *guestLogStats {
	e.logMu.Lock()
	defer e.logMu.Unlock()
	s := e.logStats[name]
	if s == nil {
		if e.logStats == nil {
			e.logStats = map[string]*guestLogStats{}
		}
		s = &guestLogStats{summaryEvery: logSummaryInterval}
		e.logStats[name] = s
	}
	return s
}

// GuestLogDropped is the number of guest log lines, and their message
// bytes, that the instances of the pipeline name dropped over
// limits.log_bytes_per_second and limits.log_burst_bytes since the engine
// started. The scheduler's metrics read it.
func (e *Engine) GuestLogDropped(name string) (lines, bytes int64) {
	s := e.guestLogStats(name)
	return s.lines.Load(), s.bytes.Load()
}

// logDropped counts a line of n message bytes that an instance of m
// dropped, and writes the pipeline's summary line when one is due.
func (m *Module) logDropped(now time.Time, n int) {
	if sum, ok := m.logStats.drop(now, n); ok {
		m.logSummary(sum)
	}
}

// flushLogSummary writes the summary of drops not yet reported (Close).
func (m *Module) flushLogSummary() {
	if sum, ok := m.logStats.flush(time.Now()); ok {
		m.logSummary(sum)
	}
}

func (m *Module) logSummary(s logSummary) {
	m.log.Warn(fmt.Sprintf("dropped %d guest log lines (%d bytes) in the last %s: an instance logged faster than limits.log_bytes_per_second (%d) allows after limits.log_burst_bytes (%d)",
		s.lines, s.bytes, s.over.Round(time.Millisecond), m.limits.LogBytesPerSecond, m.limits.LogBurstBytes),
		"source", "host", "dropped_lines", s.lines, "dropped_bytes", s.bytes)
}
