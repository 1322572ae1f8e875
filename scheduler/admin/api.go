package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/verlabel"
)

// Deployer validates and deploys modules: the scheduler's Runner.
type Deployer interface {
	Check(ctx context.Context, pipeline string, wasm []byte) (host.Info, error)
	Deploy(ctx context.Context, pipeline string, wasm []byte) (host.Info, error)
	PipelineNames() []string
}

// Labeler is a Deployer that shows versions' labels (in metrics and its
// views): *scheduler.Runner. Labels are kept in the store; the API tells
// the Deployer after each switch.
type Labeler interface {
	SetLabel(pipeline, digest, label string)
}

// labelRunning tells the Deployer the label of pipeline's version digest.
func (a *API) labelRunning(pipeline, digest string) {
	if l, ok := a.d.(Labeler); ok {
		l.SetLabel(pipeline, digest, a.store.Label(digest))
	}
}

// API is the admin API. Every request must carry the bearer token. Safe
// for concurrent use: deploys and rollbacks of one pipeline run one at a
// time (switch.go).
type API struct {
	token    [32]byte // sha256 of the token: compared in constant time
	store    *Store
	d        Deployer
	maxBytes int64
	log      *slog.Logger
	locks    pipelineLocks
	refusals *refusalLog
	// throttle counts the tokens presented (throttle.go): the API's own
	// until UseThrottle shares the host's with the dashboard.
	throttle *Throttle
	// strategy is how a deploy, a rollback or a canary reaches the hosts
	// that run it (strategy.go): this host only until UseRegistry makes it
	// the fleet.
	strategy strategy
	// canaryMargin: a canary failing more often than the stable version by
	// more than this share is aborted (canary.go; 0: never).
	canaryMargin float64
	// fromConfig: the pipelines whose config decides their version, whose
	// deploys the API refuses (fromconfig.go); set before serving.
	fromConfig map[string]bool
}

// NewAPI returns the admin API; a token CheckToken refuses is refused.
func NewAPI(token string, store *Store, d Deployer, maxBytes int64, log *slog.Logger) (*API, error) {
	if token == "" {
		return nil, errors.New("admin: no token")
	}
	if err := CheckToken(token, "admin"); err != nil {
		return nil, err
	}
	a := &API{token: TokenSum(token), store: store, d: d, maxBytes: maxBytes, log: log, refusals: newRefusalLog(log), throttle: NewThrottle()}
	a.strategy = localStrategy{a}
	return a, nil
}

// UseThrottle makes the API count the tokens presented to it in t, the
// Throttle the host's other doors to the token (the dashboard) use too: a
// client throttled at one is throttled at all. Call it before Handler.
func (a *API) UseThrottle(t *Throttle) { a.throttle = t }

// RegisterMetrics registers the API's instruments on meter:
// wasmstream.admin.refused, the requests refused for a missing, wrong or
// throttled token (logged one by one only up to a rate, refusals.go).
func (a *API) RegisterMetrics(meter metric.Meter) error {
	_, err := meter.Int64ObservableCounter("wasmstream.admin.refused", metric.WithUnit("{request}"),
		metric.WithDescription("admin API requests refused for a missing, wrong or throttled bearer token"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(a.refusals.total.Load())
			return nil
		}))
	return err
}

// Handler serves the API:
//
//	GET  /v1/pipelines                       every pipeline: the version it runs, its stored versions
//	GET  /v1/pipelines/{name}                one pipeline
//	POST /v1/pipelines/{name}/modules        upload a module (Content-Type: application/wasm) [?deploy=true | ?canary=10]
//	POST /v1/pipelines/{name}/canary/promote the canary's version becomes the pipeline's everywhere
//	POST /v1/pipelines/{name}/canary/abort   every partition goes back to the stable version [{"reason": "..."}]
//	POST /v1/pipelines/{name}/deploy         {"digest": "..."}: switch to a stored version
//	POST /v1/pipelines/{name}/rollback       switch back to the version before the current one
//
// How a deploy, a rollback or a canary is carried out is the API's strategy
// (strategy.go): this host only, or with a registry the whole fleet
// (fleet.go), where ?wait=all answers once every live host runs the version.
func (a *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/pipelines", a.list)
	mux.HandleFunc("GET /v1/pipelines/{name}", a.get)
	mux.HandleFunc("POST /v1/pipelines/{name}/modules", a.upload)
	mux.HandleFunc("POST /v1/pipelines/{name}/deploy", a.deploy)
	mux.HandleFunc("POST /v1/pipelines/{name}/rollback", a.rollback)
	mux.HandleFunc("POST /v1/pipelines/{name}/canary/promote", a.canaryEnd(true))
	mux.HandleFunc("POST /v1/pipelines/{name}/canary/abort", a.canaryEnd(false))
	return a.auth(mux)
}

// auth lets a request through with the admin token as its bearer token.
// A token presented is an attempt the throttle counts (throttle.go): a
// client over its share gets 429 with Retry-After, its token unread. A
// request without one is refused and counted as refused, not as a guess.
func (a *API) auth(next http.Handler) http.Handler {
	throttle := a.throttle
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		v := Refused
		var wait time.Duration
		if ok {
			v, wait = throttle.Check(ClientOf(r), tok, a.token)
		}
		switch v {
		case Accepted:
			next.ServeHTTP(w, r)
			return
		case Throttled:
			w.Header().Set("Retry-After", RetryAfter(wait))
			fail(w, http.StatusTooManyRequests, "too many attempts with a wrong token: wait %s s before trying again", RetryAfter(wait))
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="wasmstream"`)
			fail(w, http.StatusUnauthorized, "missing or wrong bearer token")
		}
		a.refusals.refused(r.Method, r.URL.Path, r.RemoteAddr)
	})
}

type errorBody struct {
	Error string `json:"error"`
}

func fail(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(errorBody{Error: fmt.Sprintf(format, args...)})
}

func reply(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// PipelineView is what the API says of a pipeline.
type PipelineView struct {
	Name     string       `json:"name"`
	Active   string       `json:"active"`
	Label    string       `json:"label,omitempty"` // the active version's label (deploy --label)
	Deployed time.Time    `json:"deployed"`
	History  []string     `json:"history,omitempty"`
	Versions []ModuleMeta `json:"versions"`
	Fleet    *FleetView   `json:"fleet,omitempty"` // with a registry: what the fleet runs
}

func (a *API) view(name string) PipelineView {
	m := a.store.Snapshot()
	v := PipelineView{Name: name, Versions: a.store.Versions(name), Fleet: a.strategy.view(name)}
	if ps := m.Pipelines[name]; ps != nil {
		v.Active, v.Deployed, v.History = ps.Active, ps.Deployed, ps.History
		if mm := m.Modules[ps.Active]; mm != nil {
			v.Label = mm.Label
		}
	}
	return v
}

func (a *API) known(w http.ResponseWriter, name string) bool {
	for _, n := range a.d.PipelineNames() {
		if n == name {
			return true
		}
	}
	fail(w, http.StatusNotFound, "no pipeline %q (pipelines: %s)", name, strings.Join(a.d.PipelineNames(), ", "))
	return false
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	var out []PipelineView
	for _, n := range a.d.PipelineNames() {
		out = append(out, a.view(n))
	}
	reply(w, http.StatusOK, out)
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !a.known(w, name) {
		return
	}
	reply(w, http.StatusOK, a.view(name))
}

// UploadResult is the answer to an upload.
type UploadResult struct {
	Digest   string    `json:"digest"`
	Size     int       `json:"size"`
	Deployed bool      `json:"deployed"`
	Canary   int       `json:"canary,omitempty"` // the share of partitions it runs on as a canary
	Info     host.Info `json:"info"`
}

func (a *API) upload(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !a.known(w, name) {
		return
	}
	if qv := r.URL.Query(); (qv.Get("deploy") == "true" || qv.Get("canary") != "") && a.refuseFromConfig(w, name, "deploying") {
		return
	}
	q, ok := a.uploadQuery(w, r)
	if !ok {
		return
	}
	body, ok := a.readModule(w, r)
	if !ok {
		return
	}
	info, err := a.d.Check(r.Context(), name, body)
	if err != nil {
		fail(w, http.StatusUnprocessableEntity, "module refused: %v", err)
		return
	}
	d, err := a.store.Put(name, "upload", body)
	if err == nil {
		err = a.store.SetLabel(d, q.label)
	}
	if err != nil {
		fail(w, http.StatusInternalServerError, "storing the module: %v", err)
		return
	}
	res := UploadResult{Digest: d, Size: len(body), Info: info}
	if q.percent > 0 {
		if err := a.strategy.startCanary(r.Context(), name, d, body, q.percent); err != nil {
			fail(w, statusOf(err), "stored as %s, canary not started: %v", d[:12], err)
			return
		}
		res.Canary = q.percent
	} else if q.deploy {
		if err := a.strategy.deploy(r.Context(), name, d, body, r.URL.Query().Get("wait") == "all"); err != nil {
			fail(w, statusOf(err), "stored as %s%s: %v", d[:12], a.strategy.notDeployed(), err)
			return
		}
		res.Deployed = true
	}
	a.log.Info("admin: module uploaded", "pipeline", name, "digest", d[:12], "size", len(body), "deployed", res.Deployed)
	reply(w, http.StatusCreated, res)
}

// uploadQuery is what an upload's query asks for.
type uploadQuery struct {
	deploy  bool   // deploy=true
	label   string // label=...
	percent int    // canary=10: run it as a canary on this share
}

// uploadQuery reads an upload's query, or answers why it cannot be taken.
func (a *API) uploadQuery(w http.ResponseWriter, r *http.Request) (uploadQuery, bool) {
	var q uploadQuery
	if ct := r.Header.Get("Content-Type"); ct != "application/wasm" {
		fail(w, http.StatusUnsupportedMediaType, "Content-Type %q: want application/wasm", ct)
		return q, false
	}
	deploy := r.URL.Query().Get("deploy")
	if deploy != "" && deploy != "true" && deploy != "false" {
		fail(w, http.StatusBadRequest, "deploy=%q: want true or false", deploy)
		return q, false
	}
	q.deploy, q.label = deploy == "true", r.URL.Query().Get("label")
	if err := verlabel.Check(q.label); err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return q, false
	}
	if c := r.URL.Query().Get("canary"); c != "" {
		var err error
		if q.percent, err = parsePercent(c); err != nil {
			fail(w, http.StatusBadRequest, "%v", err)
			return q, false
		}
		if q.deploy {
			fail(w, http.StatusBadRequest, "deploy=true and canary: choose one")
			return q, false
		}
		if err := a.strategy.canaries(); err != nil {
			fail(w, statusOf(err), "%v", err)
			return q, false
		}
	}
	return q, true
}

// readModule reads an upload's body, a WebAssembly module of at most
// admin.max_module_bytes, or answers why it cannot be taken.
func (a *API) readModule(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			fail(w, http.StatusRequestEntityTooLarge, "module larger than admin.max_module_bytes (%d bytes)", a.maxBytes)
			return nil, false
		}
		fail(w, http.StatusBadRequest, "reading the body: %v", err)
		return nil, false
	}
	if r.ContentLength >= 0 && int64(len(body)) != r.ContentLength {
		fail(w, http.StatusBadRequest, "body of %d bytes, Content-Length said %d", len(body), r.ContentLength)
		return nil, false
	}
	if len(body) < 8 || !bytes.Equal(body[:4], []byte("\x00asm")) {
		fail(w, http.StatusUnprocessableEntity, "not a WebAssembly module: the body does not start with the \\0asm magic number")
		return nil, false
	}
	return body, true
}

// activate deploys digest (wasm) on pipeline name; the caller holds name's
// pipeline lock.
func (a *API) activate(ctx context.Context, name, digest string, wasm []byte) (host.Info, error) {
	return a.switchTo(ctx, name, digest, wasm, "deploy", func() error { return a.store.Activate(name, digest) })
}

type deployReq struct {
	Digest string `json:"digest"`
	Label  string `json:"label,omitempty"` // names the version (verlabel); "": keep its label
}

func (a *API) deploy(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !a.known(w, name) || a.refuseFromConfig(w, name, "deploying") {
		return
	}
	var req deployReq
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, "body: want {\"digest\": \"<sha256>\"}: %v", err)
		return
	}
	if len(req.Digest) != 64 || strings.Trim(req.Digest, "0123456789abcdef") != "" {
		fail(w, http.StatusBadRequest, "digest %q: want 64 hex digits (sha256)", req.Digest)
		return
	}
	if err := verlabel.Check(req.Label); err != nil {
		fail(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err := a.store.SetLabel(req.Digest, req.Label); errors.Is(err, ErrNotFound) {
		fail(w, http.StatusNotFound, "%v: upload it first", err)
		return
	} else if err != nil {
		fail(w, http.StatusInternalServerError, "%v", err)
		return
	}
	wasm, err := a.store.Get(req.Digest)
	if errors.Is(err, ErrNotFound) {
		fail(w, http.StatusNotFound, "%v: upload it first", err)
		return
	} else if err != nil {
		fail(w, http.StatusInternalServerError, "%v", err)
		return
	}
	if err := a.strategy.deploy(r.Context(), name, req.Digest, wasm, r.URL.Query().Get("wait") == "all"); err != nil {
		fail(w, statusOf(err), "%v", err)
		return
	}
	reply(w, http.StatusOK, a.view(name))
}

func (a *API) rollback(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !a.known(w, name) || a.refuseFromConfig(w, name, "rolling back") {
		return
	}
	if err := a.strategy.rollback(r.Context(), name, r.URL.Query().Get("wait") == "all"); err != nil {
		fail(w, statusOf(err), "%v", err)
		return
	}
	reply(w, http.StatusOK, a.view(name))
}
