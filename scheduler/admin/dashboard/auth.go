package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
)

// Access to the dashboard (RATIONALE.md, "The dashboard"): a listener on a
// loopback address serves it to anyone who can connect (the machine's own
// users, as /metrics); on any other address every request needs the admin
// token, as an Authorization: Bearer header or as the session cookie that
// POST /dashboard/login sets for a browser. The cookie holds an HMAC of
// the token, never the token; EventSource sends it (it cannot set headers).

// OpenOn reports whether a listener on listen (host:port) serves the
// dashboard without a token: a loopback IP or "localhost". An empty host
// (every interface) is not.
func OpenOn(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

const cookieName = "wasmstream_dashboard"

// sessionValue is what the cookie holds for token.
func sessionValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("wasmstream dashboard session v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// authorized reports whether r may read the dashboard.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Open {
		return true
	}
	if s.cfg.Token == "" {
		return false
	}
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return subtle.ConstantTimeCompare([]byte(strings.TrimPrefix(h, "Bearer ")), []byte(s.cfg.Token)) == 1
	}
	if c, err := r.Cookie(cookieName); err == nil {
		return subtle.ConstantTimeCompare([]byte(c.Value), []byte(s.session)) == 1
	}
	return false
}

// login checks the token posted by the login form and sets the session
// cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Open {
		http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	tok := r.PostFormValue("token")
	if s.cfg.Token == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) != 1 {
		s.refused(r)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusUnauthorized)
		w.Write(loginPage("That is not the admin token."))
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.session, Path: "/dashboard", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/dashboard", http.StatusSeeOther)
}

func loginPage(msg string) []byte {
	return []byte(`<!doctype html><meta charset="utf-8"><title>wasmstream dashboard</title>
<body style="font-family:sans-serif;max-width:30em;margin:4em auto">
<h1>wasmstream dashboard</h1>
<p>This host's metrics listener is not on a loopback address: the dashboard needs the admin token.</p>
<p style="color:#b00">` + msg + `</p>
<form method="post" action="/dashboard/login"><input type="password" name="token" autocomplete="current-password" size="40" autofocus> <button>Open</button></form>`)
}
