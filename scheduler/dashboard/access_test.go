package dashboard

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/admin"
)

const accessToken = "a-test-admin-token-0123456789"

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// serve starts a dashboard with cfg behind a test server.
func serve(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Source == nil {
		cfg.Source = twoPipelines()
	}
	if cfg.Interval == 0 {
		cfg.Interval = 20 * time.Millisecond
	}
	s := New(cfg)
	srv := httptest.NewServer(s.Handler(http.NotFoundHandler()))
	t.Cleanup(func() { srv.Close(); s.Close() })
	return s, srv
}

// login posts token to the login form from the dashboard's own page and
// returns the answer.
func login(t *testing.T, srv *httptest.Server, token string, mod func(*http.Request)) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+"/dashboard/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if mod != nil {
		mod(req)
	}
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

// TestDashboardHostChecked: a loopback dashboard answers only under the
// machine's own names (any port) and those configured; a page of another
// site whose name was made to resolve to 127.0.0.1 is refused (before:
// every Host was served).
func TestDashboardHostChecked(t *testing.T) {
	s, srv := serve(t, Config{Open: true, Hosts: []string{"dash.internal"}})
	for host, want := range map[string]int{
		"evil.example:9464": http.StatusForbidden, "evil.example": http.StatusForbidden, "127.0.0.1.evil.example": http.StatusForbidden,
		"localhost:9464": 200, "LOCALHOST": 200, "127.0.0.1:8080": 200, "127.1.2.3": 200, "[::1]:9464": 200, "dash.internal:9464": 200,
	} {
		for _, path := range []string{"/dashboard", "/dashboard/record?id=1", "/dashboard/static/app.js"} {
			req, _ := http.NewRequest("GET", srv.URL+path, nil)
			req.Host = host
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if got := res.StatusCode; (want == 200) != (got != http.StatusForbidden) {
				t.Errorf("GET %s with Host %q: %d, want %d", path, host, got, want)
			}
		}
	}
	if n := s.RefusedRequests(); n != 9 {
		t.Errorf("%d refused requests counted, want 9", n)
	}
}

// stall opens an event stream on a raw connection that never reads, with
// header h if not empty.
func stall(t *testing.T, srv *httptest.Server, h string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if h != "" {
		h += "\r\n"
	}
	if _, err := fmt.Fprintf(c, "GET /dashboard/events HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", h); err != nil {
		t.Fatal(err)
	}
	return c
}

// waitJoined waits until n streams have joined the hub since it started.
func waitJoined(t *testing.T, s *Server, n uint64) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.hub.mu.Lock()
		seq := s.hub.seq
		s.hub.mu.Unlock()
		if seq >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d streams joined after 10s", seq, n)
		}
	}
}

// openPage opens an event stream as a page does and reads its first frame.
func openPage(t *testing.T, srv *httptest.Server, mod func(*http.Request)) {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+"/dashboard/events", nil)
	if mod != nil {
		mod(req)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("a page opening its event stream: %s", res.Status)
	}
	done := make(chan struct{})
	go func() { defer close(done); readFrame(t, bufio.NewReader(res.Body)) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("no frame within 10s")
	}
}

// TestDashboardStalledStreamsDoNotLockOut: sixteen connections that open
// the event stream and never read cannot keep a real page out (before: it
// got 503 until the kernel's buffers filled, 90 s and more): on a loopback
// dashboard, nor on one with the token, where a page that just logged in
// gets a stream although four sessions each hold four stalled ones.
func TestDashboardStalledStreamsDoNotLockOut(t *testing.T) {
	t.Run("loopback", func(t *testing.T) {
		s, srv := serve(t, Config{Open: true, MaxClients: 16})
		for range 16 {
			stall(t, srv, "")
		}
		waitJoined(t, s, 16)
		openPage(t, srv, nil)
	})
	t.Run("token, a fresh login", func(t *testing.T) {
		s, srv := serve(t, Config{Token: accessToken, MaxClients: 16})
		for range 4 {
			res := login(t, srv, accessToken, nil)
			if len(res.Cookies()) != 1 {
				t.Fatalf("login: %s", res.Status)
			}
			for range 4 {
				stall(t, srv, "Cookie: "+res.Cookies()[0].String())
			}
		}
		waitJoined(t, s, 16)
		if n := s.hub.count(); n != 16 {
			t.Fatalf("%d streams held, want 16 (the hub full)", n)
		}
		ck := login(t, srv, accessToken, nil).Cookies()[0]
		openPage(t, srv, func(r *http.Request) { r.AddCookie(ck) })
	})
}

// TestDashboardStreamMaxAge: a stream ends by itself after StreamMaxAge,
// whether its reader reads or not; the page's EventSource reconnects.
func TestDashboardStreamMaxAge(t *testing.T) {
	s, srv := serve(t, Config{Open: true, StreamMaxAge: 200 * time.Millisecond})
	stall(t, srv, "")
	res, err := http.Get(srv.URL + "/dashboard/events")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	ended := make(chan error, 1)
	go func() { _, err := io.Copy(io.Discard, res.Body); ended <- err }()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the stream ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end after its max age")
	}
	for deadline := time.Now().Add(10 * time.Second); s.hub.count() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d streams left, the stalled one included", s.hub.count())
		}
	}
}

// TestDashboardLoginThrottled: guesses of the token as fast as the server
// answers are looked at only a few times per client and a few a second in
// all, every refused attempt is counted, and the right token still works
// once its client's wait is over (before: 10,736 guesses in 3 s, all
// looked at, and nothing logged or counted after the fifth).
func TestDashboardLoginThrottled(t *testing.T) {
	var logs lockedLog
	s, srv := serve(t, Config{Token: accessToken, Log: logs.logger()})
	const n = 300
	checked, throttled := 0, 0
	start := time.Now()
	for i := range n {
		switch res := login(t, srv, fmt.Sprintf("guess-%d", i), nil); res.StatusCode {
		case http.StatusUnauthorized:
			checked++
		case http.StatusTooManyRequests:
			throttled++
			if res.Header.Get("Retry-After") == "" {
				t.Fatal("429 without Retry-After")
			}
		default:
			t.Fatalf("guess %d: %s", i, res.Status)
		}
	}
	took := time.Since(start)
	t.Logf("%d guesses from one client in %s: %d looked at, %d throttled; %d log lines", n, took.Round(time.Millisecond), checked, throttled, logs.lines())
	// admin.FreeAttempts, then one after each wait of 1 s, 2 s, 4 s...
	if limit := admin.FreeAttempts + 1 + int(took/time.Second); checked > limit {
		t.Errorf("%d guesses looked at in %s, want at most %d", checked, took, limit)
	}
	if got := s.RefusedRequests(); got != n {
		t.Errorf("%d refused attempts counted, want all %d", got, n)
	}
	if l := logs.lines(); l > 10 {
		t.Errorf("%d log lines for %d refused attempts, want a burst and summaries", l, n)
	}

	// Many clients: the global bucket looks at admin.GlobalBurst, then
	// admin.GlobalRate a second.
	h := s.Handler(http.NotFoundHandler())
	post := func(ip, token string) int {
		req := httptest.NewRequest("POST", "/dashboard/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = ip + ":1234"
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	start, checked = time.Now(), 0
	for i := range n {
		if post(fmt.Sprintf("10.0.%d.%d", i/256, i%256), "wrong") == http.StatusUnauthorized {
			checked++
		}
	}
	if limit := admin.GlobalBurst + int(time.Since(start).Seconds()*admin.GlobalRate) + 1; checked > limit {
		t.Errorf("%d guesses from %d clients looked at in %s, want at most %d", checked, n, time.Since(start), limit)
	}
	// The right token, from a client that guessed nothing, once the
	// bucket has refilled.
	for deadline := time.Now().Add(10 * time.Second); post("10.9.9.9", accessToken) != http.StatusSeeOther; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the right token refused for 10 s")
		}
	}
}

// lockedLog collects log lines from any goroutine.
type lockedLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) lines() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), "\n")
}

func (l *lockedLog) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// TestDashboardSessionCookie: the cookie a login sets is a session of its
// own — a new value each login, with an expiry, signed with this server's
// own key (another server with the same token refuses it), refused once
// tampered with or expired, Secure when the browser came over TLS (before:
// one constant HMAC of the token, never expiring, valid on every host with
// the token, never Secure).
func TestDashboardSessionCookie(t *testing.T) {
	s, srv := serve(t, Config{Token: accessToken})
	get := func(srv *httptest.Server, ck *http.Cookie) int {
		req, _ := http.NewRequest("GET", srv.URL+"/dashboard/static/app.js", nil)
		req.AddCookie(ck)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	a, b := login(t, srv, accessToken, nil).Cookies(), login(t, srv, accessToken, nil).Cookies()
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("logins set %d and %d cookies", len(a), len(b))
	}
	ck := a[0]
	if ck.Value == b[0].Value || strings.Contains(ck.Value, accessToken) {
		t.Errorf("two logins got the same session, or the token: %q", ck.Value)
	}
	if ck.MaxAge <= 0 || ck.MaxAge > int(DefaultSessionTTL/time.Second) || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/dashboard" || ck.Secure {
		t.Errorf("cookie %+v: want Max-Age of at most %s, HttpOnly, SameSite=Strict, path /dashboard, not Secure over plain HTTP", ck, DefaultSessionTTL)
	}
	if code := get(srv, ck); code != 200 {
		t.Fatalf("with the session: %d", code)
	}
	tampered := *ck
	tampered.Value = ck.Value[:5] + string(ck.Value[5]^1) + ck.Value[6:]
	expired := &http.Cookie{Name: cookieName, Value: s.sessions.mint(time.Now().Add(-DefaultSessionTTL - time.Second))}
	_, other := serve(t, Config{Token: accessToken})
	for what, code := range map[string]int{"tampered": get(srv, &tampered), "expired": get(srv, expired), "on another host with the same token": get(other, ck)} {
		if code != http.StatusUnauthorized {
			t.Errorf("a session %s: %d, want 401", what, code)
		}
	}
	if ck := login(t, srv, accessToken, func(r *http.Request) { r.Header.Set("X-Forwarded-Proto", "https") }).Cookies(); len(ck) != 1 || !ck[0].Secure {
		t.Errorf("behind a TLS proxy: cookie %+v, want Secure", ck)
	}
	tls := httptest.NewTLSServer(New(Config{Source: twoPipelines(), Token: accessToken}).Handler(http.NotFoundHandler()))
	defer tls.Close()
	req, _ := http.NewRequest("POST", tls.URL+"/dashboard/login", strings.NewReader("token="+accessToken))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	c := tls.Client()
	c.CheckRedirect = noRedirect.CheckRedirect
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if ck := res.Cookies(); len(ck) != 1 || !ck[0].Secure {
		t.Errorf("over TLS: cookie %+v, want Secure", ck)
	}
}

// TestDashboardLoginOrigin: a login form posted from another site's page
// is refused before the token is looked at, and sets no cookie (before: a
// page anywhere could post guesses, or log a visitor in).
func TestDashboardLoginOrigin(t *testing.T) {
	s, srv := serve(t, Config{Token: accessToken})
	for what, mod := range map[string]func(*http.Request){
		"Origin of another site":    func(r *http.Request) { r.Header.Set("Origin", "https://evil.example") },
		"Sec-Fetch-Site cross-site": func(r *http.Request) { r.Header.Set("Sec-Fetch-Site", "cross-site") },
	} {
		if res := login(t, srv, accessToken, mod); res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 {
			t.Errorf("%s: %s, %d cookies; want 403 and none", what, res.Status, len(res.Cookies()))
		}
	}
	if n := s.RefusedRequests(); n != 2 {
		t.Errorf("%d refused requests counted, want 2", n)
	}
	same := func(r *http.Request) { r.Header.Set("Origin", srv.URL); r.Header.Set("Sec-Fetch-Site", "same-origin") }
	if res := login(t, srv, accessToken, same); res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Errorf("from the dashboard's own page: %s", res.Status)
	}
}

// noDeployer is the admin API's Deployer for tests that only knock at it.
type noDeployer struct{}

func (noDeployer) Check(context.Context, string, []byte) (host.Info, error)  { return host.Info{}, nil }
func (noDeployer) Deploy(context.Context, string, []byte) (host.Info, error) { return host.Info{}, nil }
func (noDeployer) PipelineNames() []string                                   { return nil }

// TestBearerGuessesThrottled: the admin token presented as Authorization:
// Bearer is throttled as the login form is, by the one admin.Throttle the
// dashboard shares with the admin API. 2,000 Bearer guesses at the
// dashboard from one client are mostly refused with 429 and Retry-After;
// then that client's right token is refused at every door (Bearer on the
// dashboard and on the admin API, the login form) until its wait is over,
// and accepted after; another client is not held by that wait; guesses
// spread over many addresses at the admin API are looked at only up to the
// overall cap, and a client with the right token waits no longer than the
// cap's refill (before: 2,000 of 2,000 looked at in 103 ms, the right
// token accepted at once after them).
func TestBearerGuessesThrottled(t *testing.T) {
	// A token the admin API takes (random, 32 bytes).
	b := make([]byte, 32)
	rand.Read(b)
	accessToken := hex.EncodeToString(b)
	th := admin.NewThrottle()
	s, _ := serve(t, Config{Token: accessToken, Throttle: th})
	dash := s.Handler(http.NotFoundHandler())
	store, err := admin.OpenStore(t.TempDir(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	api, err := admin.NewAPI(accessToken, store, noDeployer{}, 1<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	api.UseThrottle(th)
	apiH := api.Handler()
	knock := func(h http.Handler, ip, path, token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = ip + ":40000"
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	form := func(ip, token string) int {
		req := httptest.NewRequest("POST", "/dashboard/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = ip + ":40000"
		w := httptest.NewRecorder()
		dash.ServeHTTP(w, req)
		return w.Code
	}

	const n, guesser = 2000, "203.0.113.7"
	looked, throttled := 0, 0
	var retryAfter string
	start := time.Now()
	for i := range n {
		switch w := knock(dash, guesser, "/dashboard/static/app.js", fmt.Sprintf("guess-%d", i)); w.Code {
		case http.StatusUnauthorized:
			looked++
		case http.StatusTooManyRequests:
			throttled++
			if retryAfter = w.Header().Get("Retry-After"); retryAfter == "" {
				t.Fatal("429 without Retry-After")
			}
		default:
			t.Fatalf("guess %d: %d", i, w.Code)
		}
	}
	took := time.Since(start)
	t.Logf("%d Bearer guesses from one client in %s: %d looked at, %d throttled", n, took.Round(time.Millisecond), looked, throttled)
	// FreeAttempts, then one after each wait of 1 s, 2 s, 4 s...
	if limit := admin.FreeAttempts + 1 + int(took/time.Second); looked > limit {
		t.Errorf("%d of %d Bearer guesses looked at in %s, want at most %d", looked, n, took, limit)
	}
	if got := s.RefusedRequests(); got != n {
		t.Errorf("%d refused requests counted, want %d", got, n)
	}

	// Another client right after: not held by the guesser's wait.
	if w := knock(dash, "198.51.100.9", "/dashboard/static/app.js", accessToken); w.Code != http.StatusOK {
		t.Fatalf("another client's right token on the dashboard: %d", w.Code)
	}
	if w := knock(apiH, "198.51.100.9", "/v1/pipelines", accessToken); w.Code != http.StatusOK {
		t.Fatalf("another client's right token on the admin API: %d %s", w.Code, w.Body)
	}

	// The guesser's right token, at every door, until its wait is over.
	refused, refusedUntil := false, time.Now()
	for deadline := time.Now().Add(admin.MaxBackoff + 10*time.Second); ; time.Sleep(50 * time.Millisecond) {
		d, a, f := knock(dash, guesser, "/dashboard/static/app.js", accessToken).Code, knock(apiH, guesser, "/v1/pipelines", accessToken).Code, form(guesser, accessToken)
		if d == http.StatusOK {
			if a != http.StatusOK || f != http.StatusSeeOther {
				t.Fatalf("the right token once the wait is over: dashboard %d, admin API %d, login form %d", d, a, f)
			}
			break
		}
		if d != http.StatusTooManyRequests || a != http.StatusTooManyRequests || f != http.StatusTooManyRequests {
			t.Fatalf("the guessing client's right token in its wait: dashboard %d, admin API %d, login form %d, want 429 at each", d, a, f)
		}
		refused, refusedUntil = true, time.Now()
		if time.Now().After(deadline) {
			t.Fatalf("the right token still refused %s after the guesses", time.Since(start))
		}
	}
	t.Logf("the guesser's right token refused for %s after its guesses (last Retry-After %s s)", refusedUntil.Sub(start.Add(took)).Round(time.Millisecond), retryAfter)
	if !refused {
		t.Error("the guesser's right token was accepted at once after its guesses")
	}

	// Guesses spread over many addresses at the admin API: the overall cap.
	start, looked = time.Now(), 0
	for i := range n {
		if knock(apiH, fmt.Sprintf("10.%d.%d.%d", i/65536, i/256%256, i%256), "/v1/pipelines", "wrong").Code == http.StatusUnauthorized {
			looked++
		}
	}
	if limit := admin.GlobalBurst + int(time.Since(start).Seconds()*admin.GlobalRate) + 1; looked > limit {
		t.Errorf("%d guesses from %d clients looked at in %s, want at most %d", looked, n, time.Since(start), limit)
	}
	// A client that guessed nothing: in at most the bucket's refill of
	// one attempt.
	refill := time.Duration(float64(time.Second) / admin.GlobalRate)
	start = time.Now()
	for knock(dash, "192.0.2.1", "/dashboard/static/app.js", accessToken).Code != http.StatusOK {
		if time.Since(start) > refill+2*time.Second {
			t.Fatalf("a client with the right token refused for %s after guesses from many clients, want at most %s", time.Since(start), refill)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("guesses from %d clients: %d looked at; a new client's right token accepted after %s", n, looked, time.Since(start).Round(time.Millisecond))
}
