package admin

import (
	"context"
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
