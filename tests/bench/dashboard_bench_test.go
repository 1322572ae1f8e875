//go:build integration

package bench

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/dashboard"
)

// BenchmarkDashboard: the uppercase Go guest over the same input without
// the live dashboard, with it and no page (it samples once a second all
// the same, for its history and event log), and with a page connected to
// its event stream (each frame read), in one run.
func BenchmarkDashboard(b *testing.B) {
	brokers, n, in, uppercase := uppercaseInput(b)
	var off float64
	for _, mode := range []string{"off", "no_page", "page"} {
		b.Run("dashboard="+mode, func(b *testing.B) {
			var closers []func()
			if mode == "no_page" {
				hostHook = func(r *scheduler.Runner) {
					d := dashboard.New(dashboard.Config{Source: r, Open: true})
					if err := r.ObserveFailures(d); err != nil {
						b.Fatal(err)
					}
					closers = append(closers, d.Close)
				}
			}
			if mode == "page" {
				hostHook = func(r *scheduler.Runner) {
					d := dashboard.New(dashboard.Config{Source: r, Open: true})
					if err := r.ObserveFailures(d); err != nil {
						b.Fatal(err)
					}
					srv := httptest.NewServer(d.Handler(http.NotFoundHandler()))
					res, err := http.Get(srv.URL + "/dashboard/events")
					if err != nil {
						b.Fatal(err)
					}
					frames := make(chan int, 1)
					go func() { // the page: reads every frame
						sc := bufio.NewScanner(res.Body)
						sc.Buffer(nil, 1<<20)
						k := 0
						for sc.Scan() {
							k++
						}
						frames <- k
					}()
					closers = append(closers, func() { d.Close(); res.Body.Close(); srv.Close(); <-frames })
				}
			}
			defer func() {
				hostHook = nil
				for _, c := range closers {
					c()
				}
			}()
			for i := 0; i < b.N; i++ {
				rate := float64(n) / host(b, brokers, uppercase, in, n).Seconds()
				b.ReportMetric(rate, "rec/s")
				if mode == "off" {
					off = rate
				} else if off > 0 {
					b.ReportMetric(rate/off, "x_off")
				}
			}
		})
	}
}
