package admin

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// /metrics shows the host's own health beside wasmstream's instruments: the
// Go runtime (goroutines, heap, the live heap of the last collection) and
// the process (resident memory, fds).
func TestMetricsServeRuntimeAndProcess(t *testing.T) {
	_, handler, mp, err := NewMeter()
	if err != nil {
		t.Fatal(err)
	}
	defer mp.Shutdown(context.Background())
	srv, err := Listen("metrics.listen", "127.0.0.1:0", HealthHandler(handler, func(context.Context) error { return nil }), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	resp, err := http.Get("http://" + srv.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, b)
	}
	body := string(b)
	for _, name := range []string{
		"go_goroutines",
		"go_memstats_heap_inuse_bytes",
		"go_memstats_alloc_bytes",
		"go_gc_duration_seconds",
		"go_gc_heap_live_bytes",
		"process_resident_memory_bytes",
		"process_open_fds",
		"process_cpu_seconds_total",
	} {
		if !strings.Contains(body, "\n"+name+" ") && !strings.Contains(body, "\n"+name+"{") {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}
