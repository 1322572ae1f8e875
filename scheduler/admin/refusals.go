package admin

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Refused requests are logged at a bounded rate: a client without the token
// decides how many requests it sends and how long their paths are, so
// neither may decide how much the host writes to its log.
const (
	refusalBurst     = 5           // refused requests logged one by one per interval
	refusalInterval  = time.Minute // after the burst, one summary line per interval
	maxLoggedPathLen = 128         // a longer path is cut in the log
)

// refusalLog logs the admin API's refused requests: the first refusalBurst
// of each interval one line each, the others counted and reported in one
// summary line when the interval ends. The API's auth handler calls refused
// from any request goroutine; the summary is written from a time.AfterFunc
// timer armed by the first request left unlogged in an interval. Safe for
// concurrent use.
type refusalLog struct {
	log      *slog.Logger
	what     string // names the endpoint in the lines: "admin"
	burst    int
	interval time.Duration
	total    atomic.Int64 // every refused request (the metric)

	mu         sync.Mutex
	start      time.Time   // of the current interval
	logged     int         // lines written in the current interval
	suppressed int         // requests not logged since the last summary
	timer      *time.Timer // armed while suppressed > 0
}

func newRefusalLog(log *slog.Logger) *refusalLog {
	return &refusalLog{log: log, what: "admin", burst: refusalBurst, interval: refusalInterval}
}

// RefusalLog logs another endpoint's refused requests the way the admin
// API's are logged (the dashboard's): a burst of lines an interval, then
// one summary line with the count. Safe for concurrent use.
type RefusalLog struct{ l *refusalLog }

// NewRefusalLog returns a RefusalLog whose lines begin with what.
func NewRefusalLog(log *slog.Logger, what string) *RefusalLog {
	l := newRefusalLog(log)
	l.what = what
	return &RefusalLog{l}
}

// Refused records one refused request.
func (r *RefusalLog) Refused(method, path, remote string) { r.l.refused(method, path, remote) }

// Total is every request refused so far.
func (r *RefusalLog) Total() int64 { return r.l.total.Load() }

// refused records one refused request.
func (l *refusalLog) refused(method, path, remote string) {
	l.total.Add(1)
	now := time.Now()
	l.mu.Lock()
	if now.Sub(l.start) >= l.interval {
		l.start, l.logged = now, 0
	}
	if l.logged < l.burst {
		l.logged++
		l.mu.Unlock()
		if len(path) > maxLoggedPathLen {
			path = path[:maxLoggedPathLen] + "..."
		}
		l.log.Warn(l.what+": unauthorized request", "method", clip(method), "path", path, "remote", remote)
		return
	}
	l.suppressed++
	if l.timer == nil {
		l.timer = time.AfterFunc(l.start.Add(l.interval).Sub(now), l.summary)
	}
	l.mu.Unlock()
}

// summary writes the count of requests refused without a line of their own.
func (l *refusalLog) summary() {
	l.mu.Lock()
	n := l.suppressed
	l.suppressed, l.timer = 0, nil
	l.mu.Unlock()
	if n > 0 {
		l.log.Warn(l.what+": more unauthorized requests refused (not logged one by one)", "count", n, "interval", l.interval)
	}
}

func clip(s string) string {
	if len(s) > 16 {
		return s[:16] + "..."
	}
	return s
}
