package admin

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// The meter exports for Prometheus and, with an OTLP endpoint, pushes the
// same instruments to it.
func TestMeterPrometheusAndOTLP(t *testing.T) {
	var pushes atomic.Int64
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && r.URL.Path == "/v1/metrics" {
			pushes.Add(1)
		}
	}))
	defer collector.Close()
	meter, handler, mp, err := NewMeter(OTLP{Endpoint: strings.TrimPrefix(collector.URL, "http://"), Insecure: true, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Shutdown(context.Background())
	c, _ := meter.Int64Counter("wasmstream.test.things", metric.WithUnit("{thing}"))
	c.Add(context.Background(), 3)
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "wasmstream_test_things_total 3") {
		t.Fatalf("/metrics lacks the counter:\n%s", rec.Body.String())
	}
	for end := time.Now().Add(10 * time.Second); pushes.Load() == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no OTLP push reached the collector")
		}
	}
	h := HealthHandler(handler, func(context.Context) error { return context.DeadlineExceeded })
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "not ready: context deadline exceeded") {
		t.Fatalf("readyz: %d %s", rec.Code, rec.Body.String())
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 {
		t.Fatalf("healthz %d", rec.Code)
	}
}

// TestBindThenServe: a bound server holds its address before it serves (a
// request made then is answered once it does), and one closed without
// serving frees the address.
func TestBindThenServe(t *testing.T) {
	s, err := Bind("admin.listen", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Bind("metrics.listen", s.Addr); err == nil || !strings.Contains(err.Error(), "metrics.listen") {
		t.Fatalf("binding a bound address: %v, want an error naming metrics.listen", err)
	}
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + s.Addr + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- string(b)
	}()
	time.Sleep(50 * time.Millisecond) // the request waits in the backlog
	s.Serve(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("served")) }), slog.Default())
	if g := <-got; g != "served" {
		t.Fatalf("request made before Serve: %q", g)
	}
	s.Close(context.Background())

	u, err := Bind("admin.listen", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := u.Addr
	u.Close(context.Background())
	again, err := Bind("admin.listen", addr)
	if err != nil {
		t.Fatalf("the address of a server closed unserved is still taken: %v", err)
	}
	again.Close(context.Background())
}
