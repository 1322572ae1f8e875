// Package dashboard serves the host's live dashboard on the metrics
// listener: GET /dashboard (the page, embedded, plain JavaScript),
// /dashboard/events (server-sent events, one frame a second: per pipeline
// its rates, lag per partition, records in flight, instances by state,
// retry tiers, dead letters by error kind, guest faults and the deployed
// versions; and the recent failed or retried records) and
// /dashboard/record?id=N (one failed record's path, the tree `wasmstream
// trace` prints). RATIONALE.md, "The dashboard", says why it is built so.
//
// One goroutine samples (started by New, stopped by Close), and only while
// a page is connected; the failed-records list is a ring of a fixed size;
// the number of pages is bounded and a page that falls behind is dropped,
// never waited for.
package dashboard

import (
	"bytes"
	"embed"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/admin"
)

//go:embed static
var static embed.FS

// Source is what the dashboard samples: *scheduler.Runner.
type Source interface {
	View() []scheduler.PipelineView
}

// Deploys is where the deployed versions and their history are read:
// *admin.Store.
type Deploys interface {
	Snapshot() admin.Manifest
}

// Config configures a Server.
type Config struct {
	Source Source
	// Open serves the dashboard without a token (a loopback listener,
	// OpenOn); otherwise every request needs Token, the admin token, and
	// with no Token every request is refused.
	Open  bool
	Token string
	// TraceFile is tracing.file when tracing.exporter is jsonl: a record's
	// path is read there first.
	TraceFile  string
	Interval   time.Duration // sampling period (default 1s)
	MaxClients int           // pages connected at once (default 16)
	Failed     int           // failed attempts kept for the list (default 100)
	Log        *slog.Logger
}

// Server is the dashboard. Safe for concurrent use. Its locks (the ring's,
// the hub's, the trace-file semaphore) are leaves: none is held while
// another is taken.
type Server struct {
	cfg     Config
	session string // the cookie value for cfg.Token
	ring    *ring
	hub     *hub
	deploys atomic.Pointer[Deploys]
	traces  chan struct{} // one trace-file read at a time
	refusal atomic.Int64  // refused requests logged (the first few only)

	stop      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// New starts the dashboard's sampling goroutine; Close stops it.
func New(cfg Config) *Server {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = 16
	}
	if cfg.Failed <= 0 {
		cfg.Failed = 100
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, ring: newRing(cfg.Failed), hub: newHub(cfg.MaxClients), traces: make(chan struct{}, 1), stop: make(chan struct{})}
	if cfg.Token != "" {
		s.session = sessionValue(cfg.Token)
	}
	s.wg.Add(1)
	go s.run()
	return s
}

// ObserveFailure keeps e for the failed-records list
// (scheduler.FailureObserver; fast, never blocks on a page).
func (s *Server) ObserveFailure(e *scheduler.FailureEvent) { s.ring.add(e) }

// SetDeploys makes the page show the deployed versions and their history
// (the admin API's store, opened after the metrics listener).
func (s *Server) SetDeploys(d Deploys) { s.deploys.Store(&d) }

func (s *Server) manifest() admin.Manifest {
	if d := s.deploys.Load(); d != nil {
		return (*d).Snapshot()
	}
	return admin.Manifest{}
}

// Close ends every event stream and stops sampling, and waits for it.
func (s *Server) Close() {
	if s == nil {
		return
	}
	s.closeOnce.Do(func() {
		close(s.stop)
		s.hub.close()
		s.wg.Wait()
	})
}

// Handler serves the dashboard's paths and passes any other request to
// next.
func (s *Server) Handler(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(static, "static")
	files := http.FileServerFS(sub)
	mux.Handle("/", next)
	mux.HandleFunc("GET /dashboard", s.guard(func(w http.ResponseWriter, r *http.Request) {
		b, _ := static.ReadFile("static/index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(b)
	}))
	mux.Handle("GET /dashboard/static/", s.guard(http.StripPrefix("/dashboard/static/", files).ServeHTTP))
	mux.HandleFunc("GET /dashboard/events", s.guard(s.events))
	mux.HandleFunc("GET /dashboard/record", s.guard(s.record))
	mux.HandleFunc("POST /dashboard/login", s.login)
	return mux
}

// guard applies the access rule and the headers every dashboard response
// carries.
func (s *Server) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Cache-Control", "no-store")
		hd.Set("Referrer-Policy", "no-referrer")
		if !s.authorized(r) {
			s.refused(r)
			if r.URL.Path == "/dashboard" && s.cfg.Token != "" {
				hd.Set("Content-Type", "text/html; charset=utf-8")
				w.WriteHeader(http.StatusUnauthorized)
				w.Write(loginPage(""))
				return
			}
			http.Error(w, "the dashboard on this address needs the admin token", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

// refused logs the first refused requests (never what they sent).
func (s *Server) refused(r *http.Request) {
	if s.refusal.Add(1) <= 5 {
		s.cfg.Log.Warn("dashboard: request refused without the admin token", "remote", r.RemoteAddr, "path", r.URL.Path)
	}
}

// events streams frames as server-sent events until the page leaves, it
// falls behind, or the server closes.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	c, last, ok := s.hub.join()
	if !ok {
		http.Error(w, "too many dashboard pages are open", http.StatusServiceUnavailable)
		return
	}
	defer s.hub.leave(c)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	send := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(10 * time.Second))
		var buf bytes.Buffer
		buf.Grow(len(b) + 16)
		buf.WriteString("retry: 2000\ndata: ")
		buf.Write(b)
		buf.WriteString("\n\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if last != nil && !send(last) {
		return
	}
	if last == nil && rc.Flush() != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case b, ok := <-c.ch:
			if !ok || !send(b) {
				return
			}
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func parseID(s string) (uint64, bool) {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	return n, err == nil
}
