// Package dashboard serves the host's live dashboard on the metrics
// listener: GET /dashboard (the page, rendered with the newest sample and
// carrying the history: page.go), /dashboard/events (server-sent events,
// one frame a second: per pipeline its rates, lag per partition, records in
// flight, instances by state, retry tiers, dead letters by error kind,
// guest faults; the deployed versions and canaries, the event log, the
// fleet's hosts; and the recent failed or retried records) and
// /dashboard/record?id=N (one failed record's path, the tree `wasmstream
// trace` prints). RATIONALE.md, "The dashboard", says why it is built so.
//
// One goroutine samples once a second (started by New, stopped by Close),
// a page connected or not, and encodes frames only for pages; the history,
// the event log and the failed-records list are rings of fixed sizes; the
// number of pages and of renders is bounded and a page that falls behind
// is dropped, never waited for.
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

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
	// OpenOn), to requests that name it localhost, a loopback address or
	// one of Hosts (metrics.dashboard_hosts); otherwise every request needs
	// Token, the admin token, and with no Token every request is refused.
	Open  bool
	Token string
	Hosts []string
	// Throttle counts the tokens presented (a Bearer header, the login
	// form): the host's one admin.Throttle, shared with the admin API, so
	// that a client throttled at one door is throttled at every one. nil:
	// a throttle of the dashboard's own.
	Throttle *admin.Throttle
	// SessionTTL is how long a login lasts (default DefaultSessionTTL).
	SessionTTL time.Duration
	// StreamMaxAge ends an event stream after this long (default
	// DefaultStreamMaxAge); the page's EventSource opens another at once.
	StreamMaxAge time.Duration
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
	cfg      Config
	token    [32]byte // admin.TokenSum(cfg.Token)
	sessions *sessions
	throttle *admin.Throttle
	origin   *http.CrossOriginProtection // the login form is posted from the dashboard's own page
	refusals *admin.RefusalLog
	ring     *ring
	hub      *hub
	deploys  atomic.Pointer[Deploys]
	fleet    atomic.Pointer[Fleet]
	traces   chan struct{} // one trace-file read at a time
	renders  chan struct{} // pages rendered at once (maxRenders)
	hist     *history
	evlog    *eventLog
	last     atomic.Pointer[frame] // the newest sample, for the page's first response
	started  time.Time

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
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.StreamMaxAge <= 0 {
		cfg.StreamMaxAge = DefaultStreamMaxAge
	}
	if cfg.Throttle == nil {
		cfg.Throttle = admin.NewThrottle()
	}
	s := &Server{cfg: cfg, token: admin.TokenSum(cfg.Token), sessions: newSessions(cfg.SessionTTL), throttle: cfg.Throttle,
		origin: http.NewCrossOriginProtection(), refusals: admin.NewRefusalLog(cfg.Log, "dashboard"),
		ring: newRing(cfg.Failed), hub: newHub(cfg.MaxClients), traces: make(chan struct{}, 1), renders: make(chan struct{}, maxRenders), stop: make(chan struct{}),
		hist: newHistory(), evlog: &eventLog{}, started: time.Now()}
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
	mux.HandleFunc("GET /dashboard", s.guard(s.page))
	mux.Handle("GET /dashboard/static/", s.guard(http.StripPrefix("/dashboard/static/", files).ServeHTTP))
	mux.HandleFunc("GET /dashboard/events", s.guard(s.events))
	mux.HandleFunc("GET /dashboard/record", s.guard(s.record))
	mux.HandleFunc("POST /dashboard/login", s.login)
	return mux
}

// guard applies the access rule and the headers every dashboard response
// carries; the handler finds who asks in the request's context (clientOf).
func (s *Server) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Cache-Control", "no-store")
		hd.Set("Referrer-Policy", "no-referrer")
		if s.cfg.Open && !s.hostAllowed(r) {
			s.refusals.Refused(r.Method, r.URL.Path, r.RemoteAddr)
			http.Error(w, "the dashboard on a loopback address answers to localhost, a loopback address or a name in metrics.dashboard_hosts", http.StatusForbidden)
			return
		}
		who, v, wait := s.authorized(r)
		if v == admin.Throttled {
			s.refusals.Refused(r.Method, r.URL.Path, r.RemoteAddr)
			hd.Set("Retry-After", admin.RetryAfter(wait))
			http.Error(w, "too many attempts with a wrong token: wait "+admin.RetryAfter(wait)+" s before trying again", http.StatusTooManyRequests)
			return
		}
		if v != admin.Accepted {
			s.refusals.Refused(r.Method, r.URL.Path, r.RemoteAddr)
			if r.URL.Path == "/dashboard" && s.cfg.Token != "" {
				hd.Set("Content-Type", "text/html; charset=utf-8")
				w.WriteHeader(http.StatusUnauthorized)
				w.Write(loginPage(""))
				return
			}
			http.Error(w, "the dashboard on this address needs the admin token", http.StatusUnauthorized)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), clientKey{}, who)))
	}
}

type clientKey struct{}

// clientOf is who asks (Server.authorized), as guard put it in r.
func clientOf(r *http.Request) string { s, _ := r.Context().Value(clientKey{}).(string); return s }

// RefusedRequests is every request refused so far: without the token, a
// wrong or throttled login, a loopback dashboard asked for under another
// name. The first few of each minute are logged, the rest counted in one
// line a minute.
func (s *Server) RefusedRequests() int64 { return s.refusals.Total() }

// RegisterMetrics exports RefusedRequests as wasmstream.dashboard.refused.
func (s *Server) RegisterMetrics(meter metric.Meter) error {
	_, err := meter.Int64ObservableCounter("wasmstream.dashboard.refused", metric.WithUnit("{request}"),
		metric.WithDescription("dashboard requests refused: without the admin token, a wrong, throttled or cross-site login, a loopback dashboard asked for under another name"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(s.refusals.Total())
			return nil
		}))
	return err
}

// DefaultStreamMaxAge is how long an event stream lasts before the page
// opens another.
const DefaultStreamMaxAge = 5 * time.Minute

// events streams frames as server-sent events until the page leaves, it
// falls behind, another stream takes its place (hub.go), it is
// StreamMaxAge old, or the server closes.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	c, last, ok := s.hub.join(clientOf(r))
	if !ok {
		http.Error(w, "the dashboard is closing", http.StatusServiceUnavailable)
		return
	}
	defer s.hub.leave(c)
	age := time.NewTimer(s.cfg.StreamMaxAge)
	defer age.Stop()
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
		case <-age.C:
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
