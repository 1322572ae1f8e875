// Package schemareg is wasmstream's one way to a schema registry (the
// Confluent REST API, which Confluent's, Apicurio's ccompat, Redpanda's and
// Karapace's registries serve): it fetches schemas by id and by subject and
// version, keeps them compiled in a bounded cache, and turns framed record
// bytes into JSON (Decode) and JSON into framed record bytes (Encoder).
//
// Every request is bounded in time and in the bytes it reads; schemas are
// bounded in size, references and nesting; a registry that does not answer
// is a retryable error (Kind Unavailable), distinct from an unknown id or a
// payload that does not decode, which are terminal. Credentials come from
// files read under the rule of internal/secretfile, or from the
// environment, and never appear in an error.
package schemareg

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/wasmstream/wasmstream/internal/schemareg/avrocodec"
	"github.com/wasmstream/wasmstream/internal/schemareg/protocodec"
	"github.com/wasmstream/wasmstream/internal/secretfile"
	"github.com/wasmstream/wasmstream/internal/tlsfiles"
)

// Config is the schema_registry block. Zero bounds take the defaults.
type Config struct {
	// URL of the registry's Confluent-compatible API (for Apicurio, the
	// .../apis/ccompat/v7 path).
	URL string
	// Username and Password (or PasswordFile) for HTTP basic auth. The
	// wiring fills Password from the environment only
	// (WASMSTREAM_SCHEMA_REGISTRY_PASSWORD), as kafka.sasl.password.
	Username, Password, PasswordFile string
	// TokenFile holds a bearer token, read again at every request so a
	// refreshed token is taken.
	TokenFile string
	TLS       TLS

	// RequestTimeout bounds each request, connection included (10s).
	RequestTimeout time.Duration
	// CacheEntries and CacheBytes bound the schemas kept by id (1000
	// schemas, 64 MiB of schema text with their references).
	CacheEntries, CacheBytes int
	// MaxSchemaBytes bounds one schema text (1 MiB); MaxReferences the
	// references of one schema, transitively (64); MaxReferenceDepth how
	// deep references may chain (8).
	MaxSchemaBytes, MaxReferences, MaxReferenceDepth int
	// MaxDepth bounds the nesting of values and schemas (64).
	MaxDepth int
	// RefreshPeriod is how often an encoder of version latest asks the
	// registry for the subject's latest version (5m).
	RefreshPeriod time.Duration

	Avro     avrocodec.Options
	Protobuf protocodec.Options

	// Log, when not nil, is told what changes while the host runs: an
	// encoder of version latest taking a new version, a refresh that
	// fails (once, until one succeeds again).
	Log *slog.Logger
}

// TLS is the registry's TLS, with the rules of kafka.tls.
type TLS struct {
	CAFile, CertFile, KeyFile, ServerName string
	InsecureSkipVerify                    bool
}

const (
	defaultRequestTimeout = 10 * time.Second
	defaultCacheEntries   = 1000
	defaultCacheBytes     = 64 << 20
	defaultMaxSchemaBytes = 1 << 20
	defaultMaxReferences  = 64
	defaultMaxRefDepth    = 8
	defaultMaxDepth       = 64
	defaultRefreshPeriod  = 5 * time.Minute
	maxSecretBytes        = 64 << 10
	// negativeTTL is how long an unknown id is remembered as unknown, so
	// records with ids the registry does not have cost one request per id
	// per period, not one per record.
	negativeTTL = 30 * time.Second
)

func (c *Config) defaults() {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = defaultRequestTimeout
	}
	if c.RefreshPeriod <= 0 {
		c.RefreshPeriod = defaultRefreshPeriod
	}
	set(&c.CacheEntries, defaultCacheEntries)
	set(&c.CacheBytes, defaultCacheBytes)
	set(&c.MaxSchemaBytes, defaultMaxSchemaBytes)
	set(&c.MaxReferences, defaultMaxReferences)
	set(&c.MaxReferenceDepth, defaultMaxRefDepth)
	set(&c.MaxDepth, defaultMaxDepth)
}

// Stats are the client's counters, for the host to export.
type Stats struct {
	// CacheHits counts the schema lookups answered without a fetch of
	// their own (from the cache, or by a fetch of the same id in flight
	// that they waited for); CacheMisses those that fetched, one per new
	// id per host.
	CacheHits, CacheMisses atomic.Uint64
	// Requests counts HTTP requests sent; RequestErrors those that
	// failed (no answer, or an error status).
	Requests, RequestErrors atomic.Uint64
	// Refreshes and RefreshErrors count the latest-version refreshes.
	Refreshes, RefreshErrors atomic.Uint64
}

// Client is a registry client with its schema cache. Safe for concurrent
// use.
type Client struct {
	cfg Config
	url string // cfg.URL, for messages
	// trust names what the registry's certificate is verified against
	// (the CA file, or the system roots), for messages.
	trust string
	sr    *sr.Client
	cache *cache
	Stats Stats
}

// New checks cfg and reads the files it names (CA, client certificate and
// key, password, token), so a missing file or a secret file others may
// read is an error here, naming its key. It sends no request.
func New(cfg Config) (*Client, error) {
	cfg.defaults()
	tlsOn, err := cfg.check()
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, url: strings.TrimRight(cfg.URL, "/")}
	var tc *tls.Config
	if tlsOn {
		t, err := tlsConfig(cfg.TLS)
		if err != nil {
			return nil, err
		}
		tc, c.trust = t.TLS, t.Trust
	}
	auth, err := authHook(cfg)
	if err != nil {
		return nil, err
	}
	opts := []sr.ClientOpt{sr.URLs(cfg.URL), sr.HTTPClient(c.httpClient(tc)), sr.UserAgent("wasmstream")}
	if auth != nil {
		opts = append(opts, sr.PreReq(auth))
	}
	if c.sr, err = sr.NewClient(opts...); err != nil {
		return nil, fmt.Errorf("schema_registry: %v", err)
	}
	c.cache = newCache(cfg.CacheEntries, cfg.CacheBytes)
	return c, nil
}

// MaxSchemaBytes is the most bytes of one schema text the client takes.
func (c *Client) MaxSchemaBytes() int { return c.cfg.MaxSchemaBytes }

// check refuses a config that cannot work, naming its key, and reports
// whether the registry is reached over TLS.
func (cfg *Config) check() (tlsOn bool, err error) {
	u, err := url.Parse(cfg.URL)
	switch {
	case cfg.URL == "":
		return false, errors.New("schema_registry.url: empty: give the registry's URL (for Apicurio, http(s)://host:port/apis/ccompat/v7)")
	case err != nil:
		return false, fmt.Errorf("schema_registry.url: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return false, fmt.Errorf("schema_registry.url: %q: want an http:// or https:// URL", cfg.URL)
	case u.Host == "":
		return false, fmt.Errorf("schema_registry.url: %q has no host", cfg.URL)
	case u.User != nil:
		return false, errors.New("schema_registry.url: holds credentials (user:password@): they would be logged with the URL; give them in schema_registry.basic_auth instead")
	}
	tlsOn = u.Scheme == "https"
	switch {
	case !tlsOn && (cfg.TLS.CAFile != "" || cfg.TLS.CertFile != "" || cfg.TLS.KeyFile != ""):
		return false, fmt.Errorf("schema_registry.tls: files are set but schema_registry.url %s is http://: use https://", cfg.URL)
	case cfg.Password != "" && cfg.PasswordFile != "":
		return false, errors.New("schema_registry.basic_auth.password: both password and password_file are set: keep one")
	case (cfg.Password != "" || cfg.PasswordFile != "") && cfg.Username == "":
		return false, errors.New("schema_registry.basic_auth.username: empty, but a password is set")
	case cfg.Username != "" && cfg.TokenFile != "":
		return false, errors.New("schema_registry: both basic_auth and token_file are set: keep one")
	}
	return tlsOn, nil
}

// httpClient is the client the registry requests go through: every request
// bounded by request_timeout (dial, handshake, headers, the whole
// exchange), answers counted and capped, redirects followed on the same
// scheme only (credentials never go to http from https).
func (c *Client) httpClient(tc *tls.Config) *http.Client {
	cfg := &c.cfg
	d := &net.Dialer{Timeout: cfg.RequestTimeout}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		TLSClientConfig:       tc,
		TLSHandshakeTimeout:   cfg.RequestTimeout,
		ResponseHeaderTimeout: cfg.RequestTimeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       90 * time.Second,
	}
	return &http.Client{
		Timeout:   cfg.RequestTimeout,
		Transport: &counting{c: c, next: tr, max: int64(cfg.MaxSchemaBytes)*2 + 64<<10},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 3 || (via[0].URL.Scheme == "https" && req.URL.Scheme != "https") {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
}

// Warnings are what a process using cfg says at every start: settings that
// weaken the registry connection's security.
func Warnings(cfg Config) []string {
	var w []string
	plain := strings.HasPrefix(cfg.URL, "http://")
	if plain && (cfg.Username != "" || cfg.TokenFile != "") {
		w = append(w, "schema_registry.url is http:// with credentials: the password or token crosses the network in clear text; use https://")
	}
	if cfg.TLS.InsecureSkipVerify {
		w = append(w, "schema_registry.tls.insecure_skip_verify is true: the registry's certificate is not verified, so anyone on the network path can serve schemas; for tests only")
	}
	return w
}

// authHook sets the Authorization header of each request from the
// password or token, read from its file at every request (requests are
// rare: one per new schema id, one per refresh), so a rotated secret is
// taken without a restart. Each file is read once here too, so a missing
// or exposed file fails at start.
func authHook(cfg Config) (func(*http.Request) error, error) {
	switch {
	case cfg.TokenFile != "":
		token := func() (string, error) {
			b, err := secretfile.Read(cfg.TokenFile, "schema_registry.token_file", "the registry's bearer token", maxSecretBytes)
			return strings.TrimSpace(string(b)), err
		}
		if _, err := token(); err != nil {
			return nil, err
		}
		return func(r *http.Request) error {
			t, err := token()
			if err != nil {
				return err
			}
			r.Header.Set("Authorization", "Bearer "+t)
			return nil
		}, nil
	case cfg.Username != "":
		password := func() (string, error) {
			if cfg.PasswordFile == "" {
				return cfg.Password, nil
			}
			b, err := secretfile.Read(cfg.PasswordFile, "schema_registry.basic_auth.password_file", "the registry password", maxSecretBytes)
			// A trailing newline (echo > file) is no part of the password.
			return strings.TrimRight(string(b), "\r\n"), err
		}
		if _, err := password(); err != nil {
			return nil, err
		}
		return func(r *http.Request) error {
			pw, err := password()
			if err != nil {
				return err
			}
			r.SetBasicAuth(cfg.Username, pw)
			return nil
		}, nil
	}
	return nil, nil
}

// tlsConfig reads the TLS files as kafka.tls's are read (internal/tlsfiles:
// a CA file of PEM certificates replaces the system roots; the client key
// is a secret file), each error naming its schema_registry.tls key.
func tlsConfig(t TLS) (*tlsfiles.Config, error) {
	return tlsfiles.Load(tlsfiles.Files{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile,
		ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}, "schema_registry.tls")
}

// errBodyTooLarge is an answer longer than any schema the client takes.
var errBodyTooLarge = errors.New("the registry's answer is larger than the schema size limit")

// counting counts requests and bounds what is read of each answer.
type counting struct {
	c    *Client
	next http.RoundTripper
	max  int64
}

func (t *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	t.c.Stats.Requests.Add(1)
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		t.c.Stats.RequestErrors.Add(1)
		return nil, err
	}
	if resp.StatusCode >= 300 {
		t.c.Stats.RequestErrors.Add(1)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left <= 0 && err == nil {
		// Exactly at the limit: more is too much, the end is fine.
		var one [1]byte
		if m, _ := b.rc.Read(one[:]); m > 0 {
			return n, errBodyTooLarge
		}
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }

// classify turns an error of a request into an *Error naming what was
// asked (what), the URL and the status, and saying what to do.
func (c *Client) classify(err error, id int, subject string, version int, what string) *Error {
	return c.classifyThen(err, id, subject, version, what, "records are retried")
}

// classifyThen is classify, its message of a failure that may pass ending
// with then: what follows ("records are retried"; nothing at start, which
// fails).
func (c *Client) classifyThen(err error, id int, subject string, version int, what, then string) *Error {
	if then != "" {
		then = "; " + then
	}
	e := &Error{SchemaID: id, Subject: subject, Version: version, URL: c.url, Err: err}
	var re *sr.ResponseError
	switch {
	case errors.Is(err, errBodyTooLarge):
		e.Kind = BadSchema
		e.Msg = fmt.Sprintf("schema registry %s: %s: %v (schema_registry.max_schema_bytes is %d)", c.url, what, errBodyTooLarge, c.cfg.MaxSchemaBytes)
	case errors.As(err, &re):
		e.Status = re.StatusCode
		msg := re.Message
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		switch s := re.StatusCode; {
		case s == http.StatusNotFound:
			e.Kind = NotFound
			e.Msg = fmt.Sprintf("schema registry %s: %s: not found (HTTP 404: %s)", c.url, what, msg)
		case s == http.StatusUnauthorized || s == http.StatusForbidden:
			e.Kind = Refused
			e.Msg = fmt.Sprintf("schema registry %s: %s: HTTP %d: %s%s", c.url, what, s, c.refusal(s), then)
		case s == http.StatusTooManyRequests || s >= 500:
			e.Kind = Unavailable
			e.Msg = fmt.Sprintf("schema registry %s: %s: HTTP %d (%s): the registry is unavailable%s", c.url, what, s, msg, then)
		default:
			e.Kind = BadSchema
			e.Msg = fmt.Sprintf("schema registry %s: %s: HTTP %d: %s", c.url, what, s, msg)
		}
	default:
		e.Kind = Unavailable
		if why, ok := c.tlsFailure(err); ok {
			e.Msg = fmt.Sprintf("schema registry %s: %s: %s%s", c.url, what, why, then)
			break
		}
		e.Msg = fmt.Sprintf("schema registry %s: %s: %s: is the registry up, and is schema_registry.url right%s", c.url, what, describeTransport(err, c.cfg.RequestTimeout), then)
	}
	return e
}

// refusal says what an HTTP 401 or 403 means under the client's
// credentials, naming the key to fix.
func (c *Client) refusal(status int) string {
	cfg := &c.cfg
	var whose string
	switch {
	case cfg.Username != "":
		whose = fmt.Sprintf("user %q (schema_registry.basic_auth)", cfg.Username)
	case cfg.TokenFile != "":
		whose = "the bearer token of schema_registry.token_file"
	case status == http.StatusUnauthorized:
		return "the registry wants credentials and none are set: set schema_registry.basic_auth or schema_registry.token_file"
	default:
		return "the registry refused the request without credentials: set schema_registry.basic_auth or schema_registry.token_file"
	}
	if status == http.StatusUnauthorized {
		if cfg.Username != "" {
			return "the registry refused the credentials of " + whose + ": wrong username or password"
		}
		return "the registry refused " + whose + ": a wrong or expired token"
	}
	return "the registry refused " + whose + " access: the user has no read access to the registry's schemas"
}

// Check asks the registry one small question (the schema types it
// serves) with the client's credentials, so that a process fails its
// start at once, naming the key to fix, when the registry cannot be
// reached or does not answer within schema_registry.request_timeout, its
// certificate is not trusted, or it refuses the credentials (HTTP 401) —
// rather than at its first record. Any other answer passes: a 404 is a
// registry without that endpoint, a 403 credentials it accepted but does
// not grant that question; the connection and the credentials are what
// Check checks. Bounded by request_timeout and by ctx.
func (c *Client) Check(ctx context.Context) error {
	_, err := c.sr.SupportedTypes(ctx)
	if err == nil {
		return nil
	}
	e := c.classifyThen(err, 0, "", 0, "checking the registry at start (GET /schemas/types)", "")
	if ctxErr := ctx.Err(); ctxErr != nil && e.Kind == Unavailable {
		// The caller gave up first: request_timeout is not what passed.
		e.Msg = fmt.Sprintf("schema registry %s: checking the registry at start (GET /schemas/types): %v before it answered", c.url, ctxErr)
	}
	if e.Kind == Unavailable || e.Status == http.StatusUnauthorized {
		return e
	}
	return nil
}

// tlsFailure says in the user's words why the TLS handshake with the
// registry failed, naming the schema_registry.tls key to fix; ok is false
// when err is no TLS failure.
func (c *Client) tlsFailure(err error) (why string, ok bool) {
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	var rec tls.RecordHeaderError
	var alert tls.AlertError
	switch {
	case isUntrusted(err):
		leaf, _ := tlsfiles.Untrusted(err)
		return fmt.Sprintf("the registry's certificate (%s) is not trusted: it is not signed by %s (x509: certificate signed by unknown authority); set schema_registry.tls.ca_file to the CA that signed it", tlsfiles.Describe(leaf), c.trust), true
	case errors.As(err, &host):
		return fmt.Sprintf("the registry's certificate is not valid for the name %q (it names %s): connect by a name it carries, or set schema_registry.tls.server_name", host.Host, tlsfiles.Names(host.Certificate)), true
	case errors.As(err, &invalid):
		return fmt.Sprintf("the registry's certificate (%s) is not valid: %v", tlsfiles.Describe(invalid.Cert), invalid), true
	case errors.As(err, &rec) || strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		// (net/http turns the record header error into that text.)
		return "the registry answered without TLS: schema_registry.url is https:// but the registry serves http:// there", true
	case errors.As(err, &alert) || strings.Contains(err.Error(), "remote error: tls:"):
		// The alert as the handshake got it, without the request's URL.
		msg := err.Error()
		if i := strings.Index(msg, "remote error: tls:"); i >= 0 {
			msg = msg[i:]
		}
		if c.cfg.TLS.CertFile == "" {
			return fmt.Sprintf("the registry refused the TLS handshake (%s): it may require a client certificate: set schema_registry.tls.cert_file and schema_registry.tls.key_file", msg), true
		}
		return fmt.Sprintf("the registry refused the TLS handshake (%s): is the client certificate (schema_registry.tls.cert_file) signed by a CA the registry trusts?", msg), true
	}
	return "", false
}

// isUntrusted: a certificate signed by no CA the client trusts.
func isUntrusted(err error) bool {
	_, ok := tlsfiles.Untrusted(err)
	return ok
}

// describeTransport says why a request got no answer in the user's words.
func describeTransport(err error, timeout time.Duration) string {
	var t interface{ Timeout() bool }
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &t) && t.Timeout()) {
		return fmt.Sprintf("no answer within %s (schema_registry.request_timeout)", timeout)
	}
	return "no answer: " + err.Error()
}
