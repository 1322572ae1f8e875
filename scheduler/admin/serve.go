package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// OTLP configures pushing metrics over OTLP/HTTP besides /metrics.
type OTLP struct {
	Endpoint string // host:port; "" = off
	Insecure bool
	Interval time.Duration
}

// NewMeter returns a meter whose instruments are exported for Prometheus by
// the returned handler (and pushed over OTLP when o has an endpoint), and
// the provider to shut down. The handler also serves the host's own health:
// the Go runtime's collector (go_goroutines, go_memstats_*, go_gc_*, and
// go_gc_heap_live_bytes: the heap the last collection found reachable, the
// steadiest sign of a leak, which neither the heap's sawtooth between
// collections nor the scavenger's pace moves) and the process collector
// (process_resident_memory_bytes, process_open_fds, ...).
func NewMeter(o ...OTLP) (metric.Meter, http.Handler, *sdkmetric.MeterProvider, error) {
	reg := prometheus.NewRegistry()
	live := collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)}
	if err := reg.Register(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(live))); err != nil {
		return nil, nil, nil, fmt.Errorf("metrics: go collector: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, nil, nil, fmt.Errorf("metrics: process collector: %w", err)
	}
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, nil, nil, err
	}
	opts := []sdkmetric.Option{sdkmetric.WithReader(exp)}
	for _, c := range o {
		if c.Endpoint == "" {
			continue
		}
		eo := []otlpmetrichttp.Option{otlpmetrichttp.WithEndpoint(c.Endpoint)}
		if c.Insecure {
			eo = append(eo, otlpmetrichttp.WithInsecure())
		}
		me, err := otlpmetrichttp.New(context.Background(), eo...)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("metrics.otlp: %w", err)
		}
		opts = append(opts, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me, sdkmetric.WithInterval(c.Interval))))
	}
	mp := sdkmetric.NewMeterProvider(opts...)
	return mp.Meter("github.com/wasmstream/wasmstream"), promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), mp, nil
}

// HealthHandler serves /metrics, /healthz (the process is alive) and
// /readyz (ready reports nil: modules loaded, groups joined, broker
// reachable; otherwise 503 with the reason).
func HealthHandler(metrics http.Handler, ready func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		if err := ready(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ready\n"))
	})
	return mux
}

// Server is a listening HTTP server.
type Server struct {
	key  string // the config key of its address, for errors
	ln   net.Listener
	srv  *http.Server // nil until Serve
	Addr string       // the address it listens on (port 0 resolved)
}

// Listen starts serving h on addr; key names the config key in errors.
func Listen(key, addr string, h http.Handler, log *slog.Logger) (*Server, error) {
	s, err := Bind(key, addr)
	if err != nil {
		return nil, err
	}
	s.Serve(h, log)
	return s, nil
}

// Bind takes addr without serving yet: a connection made before Serve
// waits in the listen backlog. The host binds the ports its config names
// before any port-0 listener, which the kernel could otherwise hand one of
// them, just freed by the host's previous run.
func Bind(key, addr string) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return &Server{key: key, ln: ln, Addr: ln.Addr().String()}, nil
}

// Serve serves h on the bound address; it is called once.
func (s *Server) Serve(h http.Handler, log *slog.Logger) {
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 5 * time.Minute, IdleTimeout: 2 * time.Minute}
	go func() {
		if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "key", s.key, "err", err)
		}
	}()
}

// Close stops the server (or frees the address of one never served).
func (s *Server) Close(ctx context.Context) {
	switch {
	case s == nil:
	case s.srv == nil:
		s.ln.Close()
	default:
		s.srv.Shutdown(ctx)
	}
}
