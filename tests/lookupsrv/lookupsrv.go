// Package lookupsrv is a real HTTP lookup service for tests and benchmarks
// of asynchronous operations: GET /users/<key> answers {"id": key} after a
// delay, with latency, errors and hangs injected by key, and counts the
// requests in progress.
//
// Keys: "hang…" never answers (until the server closes); "slow…" answers
// after 400ms; "fail…" answers 503 on the first request for the key and
// normally after; "gone…" answers 404. Any other key answers after
// Delay(key).
package lookupsrv

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Server is a running lookup service.
type Server struct {
	*httptest.Server
	Cur, Peak, Total atomic.Int64
	delay            func(key string) time.Duration
	stop             chan struct{}
	mu               sync.Mutex
	failed           map[string]bool
}

// New starts a server closed when the test ends; delay may be nil.
func New(t testing.TB, delay func(key string) time.Duration) *Server {
	s := Handler(delay)
	s.Server = httptest.NewServer(s)
	t.Cleanup(s.Shutdown)
	return s
}

// Handler is the service without a listener (Server's embedded
// httptest.Server is nil): cmd/lookupsrv serves it in a process of its own.
func Handler(delay func(key string) time.Duration) *Server {
	return &Server{delay: delay, stop: make(chan struct{}), failed: map[string]bool{}}
}

var shutdownOnce sync.Map

// Shutdown releases hanging requests and closes the server.
func (s *Server) Shutdown() {
	if _, done := shutdownOnce.LoadOrStore(s, true); done {
		return
	}
	close(s.stop)
	s.Server.Close()
}

// Host is the server's host:port, for an allow list.
func (s *Server) Host() string { return strings.TrimPrefix(s.URL, "http://") }

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.Cur.Add(1)
	defer s.Cur.Add(-1)
	s.Total.Add(1)
	for p := s.Peak.Load(); n > p && !s.Peak.CompareAndSwap(p, n); p = s.Peak.Load() {
	}
	key := strings.TrimPrefix(r.URL.Path, "/users/")
	var d time.Duration
	switch {
	case strings.HasPrefix(key, "hang"):
		d = 24 * time.Hour
	case strings.HasPrefix(key, "slow"):
		d = 400 * time.Millisecond
	case s.delay != nil:
		d = s.delay(key)
	}
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.stop:
			return
		case <-r.Context().Done():
			return
		}
	}
	switch {
	case strings.HasPrefix(key, "gone"):
		w.WriteHeader(http.StatusNotFound)
		return
	case strings.HasPrefix(key, "fail"):
		s.mu.Lock()
		first := !s.failed[key]
		s.failed[key] = true
		s.mu.Unlock()
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"id": key})
}
