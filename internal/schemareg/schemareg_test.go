package schemareg

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/wasmstream/wasmstream/internal/schemareg/wire"
)

const userV1 = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"}]}`
const userV2 = `{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}`

func newClient(t *testing.T, reg *srfake.Registry, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{URL: reg.URL(), RequestTimeout: 2 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// counter counts the requests the fake registry gets, by path.
func counter(reg *srfake.Registry) *sync.Map {
	var m sync.Map
	reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		v, _ := m.LoadOrStore(r.URL.Path, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
		return false
	})
	return &m
}

func count(m *sync.Map, path string) int64 {
	v, ok := m.Load(path)
	if !ok {
		return 0
	}
	return v.(*atomic.Int64).Load()
}

func TestDecodeEncodeAndCache(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("users-value", 1, 7, sr.Schema{Schema: userV1, Type: sr.TypeAvro})
	reqs := counter(reg)
	c := newClient(t, reg, nil)
	ctx := context.Background()
	enc, err := c.NewEncoder(ctx, EncoderConfig{Subject: "users-value"})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	framed, err := enc.AppendFramed(nil, []byte(`{"name":"ada"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 0, 0, 0, 7, 6, 'a', 'd', 'a'}; string(framed) != string(want) {
		t.Fatalf("framed %x, want %x", framed, want)
	}
	// Many decoders at once: one request for the id (the encoder's
	// resolution already cached it: none).
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			js, d, err := c.AppendJSON(ctx, nil, framed, wire.Value, nil, 1<<10)
			if err != nil || string(js) != `{"name":"ada"}` || d.SchemaID != 7 || d.Type != sr.TypeAvro {
				t.Errorf("decode: %s %+v %v", js, d, err)
			}
		}()
	}
	wg.Wait()
	if n := count(reqs, "/schemas/ids/7"); n != 0 {
		t.Errorf("%d requests for id 7, want 0 (cached by the encoder's resolution)", n)
	}
	if h, m := c.Stats.CacheHits.Load(), c.Stats.CacheMisses.Load(); h != 20 || m != 1 {
		t.Errorf("hits %d misses %d, want 20 and 1", h, m)
	}
	// A new id costs one request, however many ask at once.
	id2, _, err := reg.RegisterSchema("other-value", sr.Schema{Schema: `{"type":"string"}`, Type: sr.TypeAvro})
	if err != nil {
		t.Fatal(err)
	}
	other := append(wire.AppendHeader(nil, id2), 4, 'h', 'i')
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if js, _, err := c.AppendJSON(ctx, nil, other, wire.Value, nil, 1<<10); err != nil || string(js) != `"hi"` {
				t.Errorf("decode other: %s %v", js, err)
			}
		}()
	}
	wg.Wait()
	if n := count(reqs, "/schemas/ids/"+strconv.Itoa(id2)); n != 1 {
		t.Errorf("%d requests for a new id, want 1", n)
	}
}

func TestLatestRefreshed(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("users-value", 1, 1, sr.Schema{Schema: userV1, Type: sr.TypeAvro})
	c := newClient(t, reg, func(c *Config) { c.RefreshPeriod = 50 * time.Millisecond })
	enc, err := c.NewEncoder(context.Background(), EncoderConfig{Subject: "users-value"})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	if _, err := enc.AppendFramed(nil, []byte(`{"name":"a","age":3}`)); err == nil || !strings.Contains(err.Error(), "field age") {
		t.Fatalf("v1 took age: %v", err)
	}
	reg.SeedSchema("users-value", 2, 2, sr.Schema{Schema: userV2, Type: sr.TypeAvro})
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := enc.AppendFramed(nil, []byte(`{"name":"a","age":3}`))
		if err == nil {
			if b[4] != 2 {
				t.Fatalf("framed with id %d, want 2", b[4])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("version 2 not picked up within 5s: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if s, v := enc.Schema(); s.ID != 2 || v != 2 {
		t.Errorf("schema %d version %d", s.ID, v)
	}
	// A pinned version is never refreshed.
	pinned, err := c.NewEncoder(context.Background(), EncoderConfig{Subject: "users-value", Version: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pinned.Close()
	time.Sleep(60 * time.Millisecond)
	if b, err := pinned.AppendFramed(nil, []byte(`{"name":"a"}`)); err != nil || b[4] != 1 {
		t.Errorf("pinned: %x %v", b, err)
	}
	// A refresh that fails keeps the schema in hand.
	reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	deadline = time.Now().Add(5 * time.Second)
	for enc.LastRefreshError() == nil {
		if _, err := enc.AppendFramed(nil, []byte(`{"name":"a","age":3}`)); err != nil {
			t.Fatalf("encode while the registry is down: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("no refresh failed within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !Retryable(enc.LastRefreshError()) || c.Stats.RefreshErrors.Load() == 0 {
		t.Errorf("refresh error %v", enc.LastRefreshError())
	}
}

func TestReferences(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("addr", 1, 1, sr.Schema{Schema: `{"type":"record","name":"Addr","namespace":"x","fields":[{"name":"city","type":"string"}]}`, Type: sr.TypeAvro})
	reg.SeedSchema("person-value", 1, 2, sr.Schema{Schema: `{"type":"record","name":"Person","namespace":"x","fields":[{"name":"home","type":"Addr"}]}`, Type: sr.TypeAvro,
		References: []sr.SchemaReference{{Name: "x.Addr", Subject: "addr", Version: 1}}})
	reg.SeedSchema("money.proto", 1, 3, sr.Schema{Schema: `syntax = "proto3"; package common; message Money { int64 units = 1; }`, Type: sr.TypeProtobuf})
	reg.SeedSchema("order-value", 1, 4, sr.Schema{Schema: `syntax = "proto3"; package shop; import "money.proto"; message Other { string s = 1; } message Order { common.Money amount = 1; }`, Type: sr.TypeProtobuf,
		References: []sr.SchemaReference{{Name: "money.proto", Subject: "money.proto", Version: 1}}})
	c := newClient(t, reg, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		cfg  EncoderConfig
		js   string
		want string
	}{
		{EncoderConfig{Subject: "person-value"}, `{"home":{"city":"Oslo"}}`, `{"home":{"city":"Oslo"}}`},
		{EncoderConfig{Subject: "order-value", Message: "Order"}, `{"amount":{"units":"5"}}`, `{"amount":{"units":"5"}}`},
	} {
		enc, err := c.NewEncoder(ctx, tc.cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := enc.AppendFramed(nil, []byte(tc.js))
		enc.Close()
		if err != nil {
			t.Fatal(err)
		}
		c2 := newClient(t, reg, nil) // a cold cache: fetches the id and its references
		js, d, err := c2.AppendJSON(ctx, nil, b, wire.Value, nil, 1<<10)
		if err != nil || string(js) != tc.want {
			t.Fatalf("%s: %s %v", tc.cfg.Subject, js, err)
		}
		if d.Type == sr.TypeProtobuf && (len(d.Index) != 1 || d.Index[0] != 1) {
			t.Errorf("message index %v, want [1]", d.Index)
		}
	}
	// References past the bounds are refused, naming the bound.
	reg.SeedSchema("zip", 1, 5, sr.Schema{Schema: `{"type":"fixed","name":"Zip","namespace":"x","size":5}`, Type: sr.TypeAvro})
	reg.SeedSchema("place", 1, 6, sr.Schema{Schema: `{"type":"record","name":"Place","namespace":"x","fields":[{"name":"a","type":"Addr"},{"name":"z","type":"Zip"}]}`, Type: sr.TypeAvro,
		References: []sr.SchemaReference{{Name: "x.Addr", Subject: "addr", Version: 1}, {Name: "x.Zip", Subject: "zip", Version: 1}}})
	reg.SeedSchema("around", 1, 8, sr.Schema{Schema: `{"type":"record","name":"Around","namespace":"x","fields":[{"name":"p","type":"Place"}]}`, Type: sr.TypeAvro,
		References: []sr.SchemaReference{{Name: "x.Place", Subject: "place", Version: 1}}})
	if _, err := newClient(t, reg, nil).SchemaByID(ctx, 8); err != nil {
		t.Fatalf("a reference of a reference: %v", err)
	}
	// JSON Schema: a reference's own $refs are relative to it, as the
	// registry keeps them ("price.json" made by parts/item.json is
	// parts/price.json to the main schema).
	reg.SeedSchema("price", 1, 9, sr.Schema{Schema: `{"type": "integer", "minimum": 0}`, Type: sr.TypeJSON})
	reg.SeedSchema("item", 1, 10, sr.Schema{Schema: `{"type": "object", "properties": {"price": {"$ref": "price.json"}}}`, Type: sr.TypeJSON,
		References: []sr.SchemaReference{{Name: "price.json", Subject: "price", Version: 1}}})
	reg.SeedSchema("shipment-value", 1, 11, sr.Schema{Schema: `{"type": "object", "properties": {"item": {"$ref": "parts/item.json"}}}`, Type: sr.TypeJSON,
		References: []sr.SchemaReference{{Name: "parts/item.json", Subject: "item", Version: 1}}})
	enc, err := newClient(t, reg, nil).NewEncoder(ctx, EncoderConfig{Subject: "shipment-value"})
	if err != nil {
		t.Fatalf("a JSON Schema reference's reference: %v", err)
	}
	defer enc.Close()
	if _, err := enc.AppendFramed(nil, []byte(`{"item": {"price": 3}}`)); err != nil {
		t.Fatalf("a value the nested reference takes: %v", err)
	}
	if _, err := enc.AppendFramed(nil, []byte(`{"item": {"price": -3}}`)); err == nil || !strings.Contains(err.Error(), "/item/price") {
		t.Fatalf("a value the nested reference refuses: %v", err)
	}
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.MaxReferences = 2 }, "more than 2 references (schema_registry.max_references)"},
		{func(c *Config) { c.MaxReferenceDepth = 1 }, "deeper than 1 (schema_registry.max_reference_depth)"},
	} {
		_, err := newClient(t, reg, tc.mod).SchemaByID(ctx, 8)
		var e *Error
		if !errors.As(err, &e) || e.Kind != BadSchema || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("reference bound: %v, want %q", err, tc.want)
		}
	}
}

func TestErrors(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("users-value", 1, 7, sr.Schema{Schema: userV1, Type: sr.TypeAvro})
	reqs := counter(reg)
	c := newClient(t, reg, nil)
	ctx := context.Background()
	check := func(name string, err error, kind Kind, retry bool, id int, words ...string) {
		t.Helper()
		var e *Error
		if !errors.As(err, &e) || e.Kind != kind || Retryable(err) != retry {
			t.Errorf("%s: %v (%#v), want kind %v retryable %v", name, err, e, kind, retry)
			return
		}
		if got, _ := SchemaID(err); got != id {
			t.Errorf("%s: schema id %d, want %d", name, got, id)
		}
		for _, w := range words {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", name, err, w)
			}
		}
	}
	// Unknown id: terminal, with the id; asked once within negativeTTL.
	for range 3 {
		_, _, err := c.AppendJSON(ctx, nil, []byte{0, 0, 0, 0x01, 0x00, 2}, wire.Value, nil, 1<<10)
		check("unknown id", err, NotFound, false, 256, "schema id 256", "404", reg.URL())
	}
	if n := count(reqs, "/schemas/ids/256"); n != 1 {
		t.Errorf("%d requests for an unknown id, want 1", n)
	}
	_, _, err := c.AppendJSON(ctx, nil, []byte(`{"name":"x"}`), wire.Value, nil, 1<<10)
	check("no frame", err, BadFrame, false, 0, "plain JSON")
	_, _, err = c.AppendJSON(ctx, nil, []byte{0, 0, 0, 0, 7}, wire.Value, func(h string) bool { return h == "__value_schema_id" }, 1<<10)
	check("header id", err, BadFrame, false, 0, "__value_schema_id")
	_, _, err = c.AppendJSON(ctx, nil, []byte{0, 0, 0, 0, 7, 0x10}, wire.Value, nil, 1<<10)
	check("does not decode", err, Decode, false, 7, "schema id 7")
	_, err = c.NewEncoder(ctx, EncoderConfig{Subject: "nope-value"})
	check("unknown subject", err, NotFound, false, 0, "subject nope-value version latest")
	enc, err := c.NewEncoder(ctx, EncoderConfig{Subject: "users-value"})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	_, err = enc.AppendFramed(nil, []byte(`{"name":5}`))
	check("does not fit", err, Encode, false, 7, "field name", "users-value")

	// Registry errors: 5xx and 429 retryable, 401/403 refused (retryable),
	// an answer too large terminal.
	for _, tc := range []struct {
		status int
		body   string
		kind   Kind
		retry  bool
		words  []string
	}{
		{500, `{"error_code":50001,"message":"store down"}`, Unavailable, true, []string{"HTTP 500", "store down", "retried"}},
		{429, ``, Unavailable, true, []string{"HTTP 429"}},
		{401, `{"error_code":401,"message":"no"}`, Refused, true, []string{"HTTP 401", "credentials"}},
		{200, `{"schema":"` + strings.Repeat("x", 3<<20) + `"}`, BadSchema, false, []string{"larger than the schema size limit"}},
	} {
		reg.ClearInterceptors()
		reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
			w.WriteHeader(tc.status)
			w.Write([]byte(tc.body))
			return true
		})
		c := newClient(t, reg, nil)
		_, _, err := c.AppendJSON(ctx, nil, []byte{0, 0, 0, 0, 7, 2, 'a'}, wire.Value, nil, 1<<10)
		check(http.StatusText(tc.status), err, tc.kind, tc.retry, 7, tc.words...)
	}
	// Down: nothing listens.
	reg.ClearInterceptors()
	down := srfake.New()
	url := down.URL()
	down.Close()
	dc, err := New(Config{URL: url, RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = dc.AppendJSON(ctx, nil, []byte{0, 0, 0, 0, 7, 2, 'a'}, wire.Value, nil, 1<<10)
	check("down", err, Unavailable, true, 7, "no answer", url)
	_, err = dc.NewEncoder(ctx, EncoderConfig{Subject: "users-value"})
	check("down at start", err, Unavailable, true, 0, "subject users-value")
}

// A registry that accepts the connection and never answers: bounded by
// the request timeout.
func TestHangBounded(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	release := make(chan struct{})
	defer close(release)
	reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return true
	})
	c := newClient(t, reg, func(c *Config) { c.RequestTimeout = 300 * time.Millisecond })
	start := time.Now()
	_, err := c.SchemaByID(context.Background(), 1)
	if !Retryable(err) || time.Since(start) > 3*time.Second || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("after %s: %v", time.Since(start), err)
	}
}

func TestAuth(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Basic auth from a file, trailing newline trimmed; re-read at each
	// request.
	pw := write("pw", "s3cret\n", 0o600)
	reg := srfake.New(srfake.WithAuth("Basic dTpzM2NyZXQ=")) // u:s3cret
	defer reg.Close()
	reg.SeedSchema("s", 1, 1, sr.Schema{Schema: `"string"`, Type: sr.TypeAvro})
	c := newClient(t, reg, func(c *Config) { c.Username, c.PasswordFile = "u", pw })
	if _, err := c.SchemaByID(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	write("pw", "hunter2x", 0o600)
	c2 := newClient(t, reg, func(c *Config) { c.Username, c.PasswordFile = "u", pw })
	_, err := c2.SchemaByID(context.Background(), 1)
	var e *Error
	if !errors.As(err, &e) || e.Kind != Refused || strings.Contains(err.Error(), "hunter2x") {
		t.Errorf("wrong password: %v (and the password must not be in it)", err)
	}
	// Bearer token from a file.
	tok := write("tok", "t0ken\n", 0o600)
	breg := srfake.New(srfake.WithAuth("Bearer t0ken"))
	defer breg.Close()
	breg.SeedSchema("s", 1, 1, sr.Schema{Schema: `"string"`, Type: sr.TypeAvro})
	bc := newClient(t, breg, func(c *Config) { c.TokenFile = tok })
	if _, err := bc.SchemaByID(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	// Config refusals, each naming its key.
	exposed := write("exposed", "x", 0o644)
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "schema_registry.url: empty"},
		{Config{URL: "ftp://x"}, "want an http:// or https:// URL"},
		{Config{URL: "http://u:p@x"}, "holds credentials"},
		{Config{URL: "http://x", TLS: TLS{CAFile: "/ca"}}, "use https://"},
		{Config{URL: "https://x", TLS: TLS{CAFile: filepath.Join(dir, "none")}}, "schema_registry.tls.ca_file"},
		{Config{URL: "https://x", TLS: TLS{CAFile: pw}}, "holds no PEM certificate"},
		{Config{URL: "http://x", Username: "u", PasswordFile: exposed}, "schema_registry.basic_auth.password_file"},
		{Config{URL: "http://x", TokenFile: exposed}, "chmod 600"},
		{Config{URL: "http://x", Password: "p"}, "username: empty"},
		{Config{URL: "http://x", Username: "u", Password: "p", PasswordFile: pw}, "both password and password_file"},
	} {
		if _, err := New(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	if w := Warnings(Config{URL: "http://x", Username: "u"}); len(w) != 1 || !strings.Contains(w[0], "clear text") {
		t.Errorf("warnings: %v", w)
	}
}

func TestCacheBounds(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	for i := 1; i <= 10; i++ {
		reg.SeedSchema("s"+strconv.Itoa(i), 1, i, sr.Schema{Schema: `{"type":"enum","name":"E` + strconv.Itoa(i) + `","symbols":["A"]}`, Type: sr.TypeAvro})
	}
	big := `{"type":"record","name":"Big","doc":"` + strings.Repeat("d", 5000) + `","fields":[]}`
	reg.SeedSchema("big", 1, 11, sr.Schema{Schema: big, Type: sr.TypeAvro})
	c := newClient(t, reg, func(c *Config) { c.CacheEntries = 4; c.CacheBytes = 4000; c.MaxSchemaBytes = 4500 })
	ctx := context.Background()
	for i := 1; i <= 10; i++ {
		if _, err := c.SchemaByID(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	if n, b := c.cache.len(); n != 4 || b > 4000 {
		t.Errorf("cache holds %d schemas, %d bytes; want 4, at most 4000", n, b)
	}
	_, err := c.SchemaByID(ctx, 11)
	var e *Error
	if !errors.As(err, &e) || e.Kind != BadSchema || !strings.Contains(err.Error(), "max_schema_bytes") {
		t.Errorf("schema too large: %v", err)
	}
}

// logBuffer is a log written by the encoder's refresh goroutine and read
// by the test.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRefreshLogged: an encoder of version latest says when it takes a new
// version, and when its refresh fails says so once (not every period) and
// again when it recovers.
func TestRefreshLogged(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	reg.SeedSchema("users-value", 1, 1, sr.Schema{Schema: userV1, Type: sr.TypeAvro})
	var logs logBuffer
	c := newClient(t, reg, func(c *Config) {
		c.RefreshPeriod = 20 * time.Millisecond
		c.Log = slog.New(slog.NewTextHandler(&logs, nil))
	})
	enc, err := c.NewEncoder(context.Background(), EncoderConfig{Subject: "users-value"})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	waitLog := func(what string, cond func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !cond(logs.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 5s; log:\n%s", what, logs.String())
			}
			if _, err := enc.AppendFramed(nil, []byte(`{"name":"a"}`)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	reg.SeedSchema("users-value", 2, 2, sr.Schema{Schema: userV2, Type: sr.TypeAvro})
	waitLog("line for version 2", func(s string) bool {
		return strings.Contains(s, "new latest version") && strings.Contains(s, "version=2 schema_id=2 previous_version=1 previous_schema_id=1")
	})
	var down atomic.Bool
	down.Store(true)
	reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		return down.Load()
	})
	waitLog("warning of the failed refresh", func(s string) bool { return strings.Contains(s, "level=WARN") })
	failures := c.Stats.RefreshErrors.Load()
	waitLog("more failed refreshes", func(string) bool { return c.Stats.RefreshErrors.Load() >= failures+3 })
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings for %d failed refreshes, want 1:\n%s", n, c.Stats.RefreshErrors.Load(), logs.String())
	}
	if !strings.Contains(logs.String(), "HTTP 503") || !strings.Contains(logs.String(), "subject=users-value version=2") {
		t.Fatalf("the warning does not say what failed:\n%s", logs.String())
	}
	down.Store(false)
	waitLog("line for the recovery", func(s string) bool { return strings.Contains(s, "refreshed again") })
	if strings.Count(logs.String(), "new latest version") != 1 {
		t.Fatalf("a new version logged without one:\n%s", logs.String())
	}
}

// TestGivenSchema: an encoder given a schema writes with the id its
// subject holds it under; with Register it registers it first, without it
// it never registers (a schema the subject does not hold fails, and the
// registry gets no registration); a schema that does not compile is
// refused before the registry is asked; a registration the registry
// refuses (a 409 from its compatibility check) fails with its reason.
func TestGivenSchema(t *testing.T) {
	reg := srfake.New()
	defer reg.Close()
	reqs := counter(reg)
	c := newClient(t, reg, nil)
	ctx := context.Background()
	given := sr.Schema{Schema: userV2, Type: sr.TypeAvro}

	_, err := c.NewEncoder(ctx, EncoderConfig{Subject: "users-value", Schema: given})
	var se *Error
	if !errors.As(err, &se) || se.Kind != NotFound || !strings.Contains(se.Error(), "does not hold the schema") {
		t.Fatalf("unregistered schema without Register: %v", err)
	}
	if n := count(reqs, "/subjects/users-value/versions"); n != 0 {
		t.Fatalf("%d registrations without Register", n)
	}

	enc, err := c.NewEncoder(ctx, EncoderConfig{Subject: "users-value", Schema: given, Register: true})
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	s, v := enc.Schema()
	if n := count(reqs, "/subjects/users-value/versions"); n != 1 || v != 1 || s.Text == "" {
		t.Fatalf("registered %d times, version %d", n, v)
	}
	b, err := enc.AppendFramed(nil, []byte(`{"name":"a","age":3}`))
	if err != nil || b[4] != byte(s.ID) {
		t.Fatalf("framed %x (%v), want id %d", b, err, s.ID)
	}
	// Registered, the same schema is looked up without Register, and an
	// encoder of it is never refreshed.
	again, err := c.NewEncoder(ctx, EncoderConfig{Subject: "users-value", Schema: given})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if s2, _ := again.Schema(); s2.ID != s.ID || again.latest {
		t.Fatalf("looked up id %d (latest %v), want %d", s2.ID, again.latest, s.ID)
	}

	before := c.Stats.Requests.Load()
	_, err = c.NewEncoder(ctx, EncoderConfig{Subject: "users-value", Schema: sr.Schema{Schema: `{"type":"record"`, Type: sr.TypeAvro}, Register: true})
	if !errors.As(err, &se) || se.Kind != BadSchema || !strings.Contains(se.Error(), "the AVRO schema given") || c.Stats.Requests.Load() != before {
		t.Fatalf("a schema that does not compile: %v (requests %d)", err, c.Stats.Requests.Load()-before)
	}

	reg.Intercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost || r.URL.Path != "/subjects/orders-value/versions" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		w.Write([]byte(`{"error_code":409,"message":"Schema being registered is incompatible with an earlier schema for subject \"orders-value\""}`))
		return true
	})
	_, err = c.NewEncoder(ctx, EncoderConfig{Subject: "orders-value", Schema: given, Register: true})
	if !errors.As(err, &se) || se.Status != http.StatusConflict || !strings.Contains(se.Error(), "incompatible with an earlier schema") || !strings.Contains(se.Error(), "registering the schema under subject orders-value") || !strings.Contains(se.Error(), "compatibility rules refuse") {
		t.Fatalf("a registration refused: %v", err)
	}
}
