package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/host"
)

// testToken is the admin token of the tests' APIs.
const testToken = goodToken

// fakeDeployer accepts modules whose body contains "ok" and records deploys.
// Safe for concurrent use, like the scheduler's Runner.
type fakeDeployer struct {
	mu       sync.Mutex
	deployed [][]byte
	delay    time.Duration     // each Deploy takes up to this long, as a compile does
	labels   map[string]string // digest -> the label the API gave it (Labeler)
}

func (f *fakeDeployer) SetLabel(p, digest, label string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.labels == nil {
		f.labels = map[string]string{}
	}
	f.labels[digest] = label
}

func (f *fakeDeployer) label(digest string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.labels[digest]
}

func (f *fakeDeployer) Check(ctx context.Context, p string, wasm []byte) (host.Info, error) {
	if !bytes.Contains(wasm, []byte("ok")) {
		return host.Info{}, errors.New("incompatible module: built for wasmstream ABI v9")
	}
	return host.Info{ABIVersion: 1, Digest: Digest(wasm), Size: len(wasm)}, nil
}

func (f *fakeDeployer) Deploy(ctx context.Context, p string, wasm []byte) (host.Info, error) {
	info, err := f.Check(ctx, p, wasm)
	if err != nil {
		return info, err
	}
	if f.delay > 0 {
		time.Sleep(rand.N(f.delay)) // the compile before the swap
	}
	f.mu.Lock()
	f.deployed = append(f.deployed, wasm)
	f.mu.Unlock()
	return info, nil
}

// running is the module the last Deploy swapped in.
func (f *fakeDeployer) running() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.deployed) == 0 {
		return nil
	}
	return f.deployed[len(f.deployed)-1]
}

func (f *fakeDeployer) deploys() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.deployed)
}

func (f *fakeDeployer) PipelineNames() []string { return []string{"p"} }

func newTestAPI(t *testing.T) (*httptest.Server, *fakeDeployer, *Store) {
	srv, d, store, _ := newTestAPIWith(t, io.Discard, nil)
	return srv, d, store
}

// newTestAPIWith is newTestAPI logging to logw; tune, if not nil, adjusts
// the API before it serves.
func newTestAPIWith(t *testing.T, logw io.Writer, tune func(*API)) (*httptest.Server, *fakeDeployer, *Store, *API) {
	log := slog.New(slog.NewTextHandler(logw, nil))
	store, err := OpenStore(t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	d := &fakeDeployer{}
	api, err := NewAPI(testToken, store, d, 1024, log)
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(api)
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv, d, store, api
}

func do(t *testing.T, srv *httptest.Server, method, path, token, ctype string, body []byte) (int, string) {
	req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e errorBody
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return resp.StatusCode, e.Error
	}
	return resp.StatusCode, string(b)
}

var goodModule = append([]byte("\x00asm\x01\x00\x00\x00"), "ok"...)

func TestAPIRefusesWithoutTheToken(t *testing.T) {
	srv, d, store := newTestAPI(t)
	for _, tok := range []string{"", "wrong", "tok2", "to"} {
		for _, rq := range []struct{ method, path string }{{"GET", "/v1/pipelines"}, {"POST", "/v1/pipelines/p/modules?deploy=true"}, {"POST", "/v1/pipelines/p/rollback"}} {
			// Past admin.FreeAttempts wrong tokens the client waits
			// (TestAPIBearerGuessesThrottled): refused all the same.
			code, body := do(t, srv, rq.method, rq.path, tok, "application/wasm", goodModule)
			if !(code == http.StatusUnauthorized && strings.Contains(body, "missing or wrong bearer token")) &&
				!(code == http.StatusTooManyRequests && strings.Contains(body, "too many attempts")) {
				t.Fatalf("token %q %s %s: %d %s", tok, rq.method, rq.path, code, body)
			}
		}
	}
	if d.deploys() != 0 || len(store.Snapshot().Modules) != 0 {
		t.Fatal("an unauthorized request changed something")
	}
	if _, err := NewAPI("", store, d, 1, nil); err == nil {
		t.Fatal("an API without a token was created")
	}
}

func TestAPIRefusesBadUploads(t *testing.T) {
	srv, d, store := newTestAPI(t)
	for _, tc := range []struct {
		name, ctype string
		body        []byte
		code        int
		want        string
	}{
		{"oversized", "application/wasm", append(append([]byte{}, goodModule...), make([]byte, 2048)...), 413, "larger than admin.max_module_bytes (1024 bytes)"},
		{"corrupt", "application/wasm", []byte("PK\x03\x04 a zip file"), 422, "not a WebAssembly module"},
		{"incompatible", "application/wasm", []byte("\x00asm\x01\x00\x00\x00 other"), 422, "module refused: incompatible module: built for wasmstream ABI v9"},
		{"not what it claims", "application/json", goodModule, 415, `Content-Type "application/json": want application/wasm`},
		{"no content type", "", goodModule, 415, "want application/wasm"},
	} {
		code, body := do(t, srv, "POST", "/v1/pipelines/p/modules?deploy=true", testToken, tc.ctype, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s; want %d %q", tc.name, code, body, tc.code, tc.want)
		}
	}
	code, body := do(t, srv, "POST", "/v1/pipelines/nope/modules", testToken, "application/wasm", goodModule)
	if code != 404 || !strings.Contains(body, `no pipeline "nope"`) {
		t.Errorf("unknown pipeline: %d %s", code, body)
	}
	for _, b := range []string{`{"digest": "xyz"}`, `{"digest": 5}`, `{"digest": "` + strings.Repeat("a", 64) + `", "extra": 1}`, `not json`} {
		if code, body := do(t, srv, "POST", "/v1/pipelines/p/deploy", testToken, "application/json", []byte(b)); code != 400 {
			t.Errorf("deploy body %s: %d %s", b, code, body)
		}
	}
	if code, body := do(t, srv, "POST", "/v1/pipelines/p/deploy", testToken, "application/json", []byte(`{"digest": "`+strings.Repeat("a", 64)+`"}`)); code != 404 || !strings.Contains(body, "upload it first") {
		t.Errorf("unknown digest: %d %s", code, body)
	}
	if code, _ := do(t, srv, "POST", "/v1/pipelines/p/rollback", testToken, "", nil); code != 409 {
		t.Errorf("rollback without history: %d", code)
	}
	if d.deploys() != 0 || len(store.Snapshot().Modules) != 0 {
		t.Fatal("a refused request changed something")
	}
}

func TestAPIDeployAndRollback(t *testing.T) {
	srv, d, store := newTestAPI(t)
	first := append(append([]byte{}, goodModule...), " v1"...)
	second := append(append([]byte{}, goodModule...), " v2"...)
	var res UploadResult
	for _, m := range [][]byte{first, second} {
		code, body := do(t, srv, "POST", "/v1/pipelines/p/modules?deploy=true", testToken, "application/wasm", m)
		if code != 201 {
			t.Fatalf("upload: %d %s", code, body)
		}
		json.Unmarshal([]byte(body), &res)
		if !res.Deployed || res.Digest != Digest(m) {
			t.Fatalf("upload result %+v", res)
		}
	}
	if a, _ := store.Active("p"); a != Digest(second) || d.deploys() != 2 {
		t.Fatalf("active %s after two deploys", a)
	}
	code, body := do(t, srv, "POST", "/v1/pipelines/p/rollback", testToken, "", nil)
	if code != 200 || !strings.Contains(body, Digest(first)) {
		t.Fatalf("rollback: %d %s", code, body)
	}
	if a, _ := store.Active("p"); a != Digest(first) || !bytes.Equal(d.deployed[2], first) {
		t.Fatal("rollback did not deploy the first version")
	}
	// The manifest survives a reopen (a restart).
	again, err := OpenStore(store.dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := again.Active("p"); a != Digest(first) {
		t.Fatalf("reopened store: active %s", a)
	}
	if b, err := again.Get(Digest(second)); err != nil || !bytes.Equal(b, second) {
		t.Fatalf("stored module: %v", err)
	}
}
