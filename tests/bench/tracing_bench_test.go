//go:build integration

package bench

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/admin"
)

// BenchmarkTracing: the uppercase Go guest over the same input with tracing
// off, with 1% of healthy records sampled, and with every record traced (to
// a JSON-lines file: spans are really serialised and written), beside the
// passthrough reference, in one run.
func BenchmarkTracing(b *testing.B) {
	brokers, n, in, uppercase := uppercaseInput(b)
	var ref, off float64
	runReference(b, brokers, in, n, &ref)
	for _, mode := range []struct {
		name string
		sets []string
	}{
		{"tracing=off", nil},
		{"tracing=1%", []string{"tracing.exporter=jsonl", "tracing.sample_ratio=0.01"}},
		{"tracing=100%", []string{"tracing.exporter=jsonl", "tracing.sample_ratio=1"}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			file := filepath.Join(b.TempDir(), "spans.jsonl")
			hostSets = append(mode.sets, "tracing.file="+file)
			defer func() { hostSets = nil }()
			for i := 0; i < b.N; i++ {
				rate := float64(n) / host(b, brokers, uppercase, in, n).Seconds()
				b.ReportMetric(rate, "rec/s")
				b.ReportMetric(rate/ref, "x_ref")
				if mode.sets == nil {
					off = rate
				} else if off > 0 {
					b.ReportMetric(rate/off, "x_off")
				}
			}
			if st, err := os.Stat(file); err == nil {
				b.ReportMetric(float64(st.Size())/float64(n), "span_bytes/rec")
			} else if mode.sets != nil {
				b.Fatal(fmt.Errorf("no span file: %w", err))
			}
		})
	}
}

// BenchmarkMetrics: the uppercase Go guest over the same input with metrics
// off and on (the OpenTelemetry instruments registered, the Prometheus
// endpoint scraped every second), in one run.
func BenchmarkMetrics(b *testing.B) {
	brokers, n, in, uppercase := uppercaseInput(b)
	var off float64
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("metrics=%v", on), func(b *testing.B) {
			stop := make(chan struct{})
			if on {
				hostHook = func(r *scheduler.Runner) {
					meter, handler, mp, err := admin.NewMeter()
					if err != nil {
						b.Fatal(err)
					}
					if err := r.RegisterMetrics(meter); err != nil {
						b.Fatal(err)
					}
					go func() {
						defer mp.Shutdown(context.Background())
						t := time.NewTicker(time.Second)
						defer t.Stop()
						for {
							select {
							case <-stop:
								return
							case <-t.C:
								handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
							}
						}
					}()
				}
			}
			defer func() { hostHook = nil; close(stop) }()
			for i := 0; i < b.N; i++ {
				rate := float64(n) / host(b, brokers, uppercase, in, n).Seconds()
				b.ReportMetric(rate, "rec/s")
				if !on {
					off = rate
				} else if off > 0 {
					b.ReportMetric(rate/off, "x_off")
				}
			}
		})
	}
}
