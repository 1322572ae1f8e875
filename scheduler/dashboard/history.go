package dashboard

import (
	"sync"
	"time"
)

// History is kept by the server, so that a page opened (or reloaded) shows
// the last hour at once: per pipeline, the newest fineLen samples at the
// sampling interval (1 s: ten minutes) and, beyond, one point per
// coarseEvery samples (10 s) for coarseLen points (an hour). Each point is
// 32 bytes, so a pipeline holds (600+360)×32 B = 30 KiB, and at most
// maxHistoryPipelines pipelines are kept (pipelines come from the config,
// so this is a guard, not a limit anyone meets): 1.9 MiB at most. The
// sampler adds; a page gets a copy (frames).
const (
	fineLen             = 600
	coarseEvery         = 10
	coarseLen           = 360
	maxHistoryPipelines = 64
)

// point is one sample of a pipeline: rates in and out (records/s), lag,
// and dead letters and faults counted since the host started.
type point struct {
	At      int64   // Unix ms
	In, Out float32 // records/s
	Lag     int64
	Failed  int32 // failed attempts in this interval (fine) or in its coarseEvery samples (coarse)
}

// series is one pipeline's history: two rings.
type series struct {
	fine, coarse ring32
	acc          point // the coarse point being summed
	accN         int
}

// ring32 is a circular buffer of points.
type ring32 struct {
	buf  []point
	next int
}

func (r *ring32) add(p point, n int) {
	if len(r.buf) < n {
		r.buf = append(r.buf, p)
		return
	}
	r.buf[r.next] = p
	r.next = (r.next + 1) % n
}

// oldestFirst appends the points, oldest first, to out.
func (r *ring32) oldestFirst(out []point) []point {
	for i := range r.buf {
		out = append(out, r.buf[(r.next+i)%len(r.buf)])
	}
	return out
}

// history is safe for concurrent use (the sampler adds, pages read); its
// lock is a leaf.
type history struct {
	mu     sync.Mutex
	byName map[string]*series
}

func newHistory() *history { return &history{byName: map[string]*series{}} }

func (h *history) add(name string, p point) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.byName[name]
	if s == nil {
		if len(h.byName) >= maxHistoryPipelines {
			return
		}
		s = &series{}
		h.byName[name] = s
	}
	s.fine.add(p, fineLen)
	s.acc.In += p.In
	s.acc.Out += p.Out
	s.acc.Lag += p.Lag
	s.acc.Failed += p.Failed
	s.accN++
	if s.accN == coarseEvery {
		n := float32(coarseEvery)
		s.coarse.add(point{At: p.At, In: s.acc.In / n, Out: s.acc.Out / n, Lag: s.acc.Lag / coarseEvery, Failed: s.acc.Failed}, coarseLen)
		s.acc, s.accN = point{}, 0
	}
}

// seriesFrame is one pipeline's history as the page gets it: the coarse
// points older than the oldest fine point, then the fine points; columns,
// not objects, to keep the page small.
type seriesFrame struct {
	At     []int64   `json:"at"` // Unix ms
	In     []float32 `json:"in"`
	Out    []float32 `json:"out"`
	Lag    []int64   `json:"lag"`
	Failed []int32   `json:"failed"`
	// Fine is the index of the first point at the sampling interval
	// (before it, one point per coarseEvery samples).
	Fine int `json:"fine"`
}

func (h *history) frames() map[string]seriesFrame {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]seriesFrame, len(h.byName))
	for name, s := range h.byName {
		fine := s.fine.oldestFirst(nil)
		pts := make([]point, 0, len(fine)+len(s.coarse.buf))
		for _, p := range s.coarse.oldestFirst(nil) {
			if len(fine) == 0 || p.At < fine[0].At {
				pts = append(pts, p)
			}
		}
		f := seriesFrame{Fine: len(pts)}
		pts = append(pts, fine...)
		f.At, f.In, f.Out, f.Lag, f.Failed = make([]int64, len(pts)), make([]float32, len(pts)), make([]float32, len(pts)), make([]int64, len(pts)), make([]int32, len(pts))
		for i, p := range pts {
			f.At[i], f.In[i], f.Out[i], f.Lag[i], f.Failed[i] = p.At, p.In, p.Out, p.Lag, p.Failed
		}
		out[name] = f
	}
	return out
}

// historySpan is how far back the history reaches at the default interval.
const historySpan = coarseLen * coarseEvery * time.Second
