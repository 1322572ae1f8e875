package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/admin"
)

// Access to the dashboard (RATIONALE.md, "The dashboard"): a listener on a
// loopback address serves it to anyone who can connect (the machine's own
// users, as /metrics), but only under a name that is the machine's own
// (localhost, a loopback address, or one in Config.Hosts): a page of
// another site whose name was made to resolve to 127.0.0.1 (DNS
// rebinding) is refused. On any other address every request needs the
// admin token, as an Authorization: Bearer header or as the session cookie
// that POST /dashboard/login sets for a browser (EventSource cannot set
// headers). The cookie holds a session — a random id and an expiry, signed
// with a key this process drew at random — never the token nor anything
// derived from it alone. Every token presented — a Bearer header, the login
// form — is throttled per client and in all by the admin.Throttle the
// admin API shares; a login is also checked to come from the dashboard's
// own page.

// OpenOn reports whether a listener on listen (host:port) serves the
// dashboard without a token: a loopback IP or "localhost". An empty host
// (every interface) is not.
func OpenOn(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	return loopbackName(host)
}

// loopbackName reports whether host (no port) names this machine's
// loopback interface: "localhost" or a loopback IP.
func loopbackName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
	return ip != nil && ip.IsLoopback()
}

// hostAllowed reports whether a request to an open (loopback) dashboard
// names it by a name of this machine: the Host header's name (any port:
// an ssh tunnel forwards another) is localhost, a loopback address or one
// of cfg.Hosts.
func (s *Server) hostAllowed(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if loopbackName(host) {
		return true
	}
	for _, h := range s.cfg.Hosts {
		if strings.EqualFold(host, h) {
			return true
		}
	}
	return false
}

const (
	cookieName = "wasmstream_dashboard"
	// DefaultSessionTTL is how long a login lasts.
	DefaultSessionTTL = 12 * time.Hour
	sessionIDBytes    = 16
	// sessionBytes: id, expiry (Unix seconds), HMAC-SHA256 of both.
	sessionBytes = sessionIDBytes + 8 + sha256.Size
)

// sessions mints and checks session cookie values. The key is drawn at
// random when the server starts: a restart ends every session (the page
// asks for the token again), and no value can be computed from the token.
type sessions struct {
	key [32]byte
	ttl time.Duration
}

func newSessions(ttl time.Duration) *sessions {
	s := &sessions{ttl: ttl}
	rand.Read(s.key[:]) // never fails (crypto/rand)
	return s
}

func (ss *sessions) mac(idAndExpiry []byte) []byte {
	m := hmac.New(sha256.New, ss.key[:])
	m.Write([]byte("wasmstream dashboard session v2\x00"))
	m.Write(idAndExpiry)
	return m.Sum(nil)
}

// mint returns a new session's cookie value, valid until now + ttl.
func (ss *sessions) mint(now time.Time) string {
	b := make([]byte, sessionIDBytes+8, sessionBytes)
	rand.Read(b[:sessionIDBytes])
	binary.BigEndian.PutUint64(b[sessionIDBytes:], uint64(now.Add(ss.ttl).Unix()))
	return base64.RawURLEncoding.EncodeToString(append(b, ss.mac(b)...))
}

// check returns the session's id if v is a value mint made and it has not
// expired.
func (ss *sessions) check(v string, now time.Time) (id string, ok bool) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) != sessionBytes {
		return "", false
	}
	body, sum := b[:sessionIDBytes+8], b[sessionIDBytes+8:]
	if !hmac.Equal(sum, ss.mac(body)) {
		return "", false
	}
	if now.Unix() >= int64(binary.BigEndian.Uint64(body[sessionIDBytes:])) {
		return "", false
	}
	return base64.RawURLEncoding.EncodeToString(body[:sessionIDBytes]), true
}

// authorized says whether r may read the dashboard, and who asks: the
// client its event streams are counted under (hub.go). A session is its
// own client; a bearer or an open listener's client is its address. A
// Bearer token is an attempt at the admin token, counted by the throttle
// the admin API shares (admin.Throttle): a client over its share is
// Throttled, its token unread. A session cookie is checked by its MAC,
// which cannot be guessed, and is not throttled.
func (s *Server) authorized(r *http.Request) (client string, v admin.Verdict, wait time.Duration) {
	ip := remoteIP(r)
	if s.cfg.Open {
		return "open " + ip, admin.Accepted, 0
	}
	if s.cfg.Token == "" {
		return "", admin.Refused, 0
	}
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		v, wait := s.throttle.Check(admin.ClientOf(r), strings.TrimPrefix(h, "Bearer "), s.token)
		return "bearer " + ip, v, wait
	}
	if c, err := r.Cookie(cookieName); err == nil {
		if id, ok := s.sessions.check(c.Value, time.Now()); ok {
			return "session " + id, admin.Accepted, 0
		}
	}
	return "", admin.Refused, 0
}

// remoteIP is the address of r's client without its port.
func remoteIP(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// login checks the token posted by the login form and sets the session
// cookie. A post from another site's page (Origin, Sec-Fetch-Site) is
// refused before the token is looked at; so is a client over its share of
// attempts (admin.Throttle), with the time to wait.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Open {
		http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
		return
	}
	if err := s.origin.Check(r); err != nil {
		s.refusals.Refused(r.Method, r.URL.Path, r.RemoteAddr)
		http.Error(w, "the login form must be posted from the dashboard's own page", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	token := r.PostFormValue("token")
	v, wait := admin.Refused, time.Duration(0)
	if s.cfg.Token != "" {
		v, wait = s.throttle.Check(admin.ClientOf(r), token, s.token)
	}
	switch v {
	case admin.Throttled:
		s.refusals.Refused(r.Method, r.URL.Path, r.RemoteAddr)
		w.Header().Set("Retry-After", admin.RetryAfter(wait))
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write(loginPage("Too many attempts: wait " + admin.RetryAfter(wait) + " s before trying again."))
		return
	case admin.Refused:
		s.refusals.Refused(r.Method, r.URL.Path, r.RemoteAddr)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write(loginPage("That is not the admin token."))
		return
	}
	now := time.Now()
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.sessions.mint(now), Path: "/dashboard",
		MaxAge: int(s.sessions.ttl / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)})
	http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
}

// overTLS reports whether the browser reached the dashboard over TLS: its
// own (a listener with TLS) or a proxy's that says so. The cookie is then
// Secure: the browser never sends it over plain HTTP. (A client that
// claims TLS falsely only keeps its own cookie from being sent.)
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func loginPage(msg string) []byte {
	return []byte(`<!doctype html><meta charset="utf-8"><title>wasmstream dashboard</title>
<body style="font-family:sans-serif;max-width:30em;margin:4em auto">
<h1>wasmstream dashboard</h1>
<p>This host's metrics listener is not on a loopback address: the dashboard needs the admin token.</p>
<p style="color:#b00">` + msg + `</p>
<form method="post" action="/dashboard/login"><input type="password" name="token" autocomplete="current-password" size="40" autofocus> <button>Open</button></form>`)
}
