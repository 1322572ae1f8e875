package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/lookupsrv"
)

// scrapeNames runs a pipeline on the in-process broker through healthy,
// retried and dead-lettered records, and a lookup pipeline with
// async.max_in_flight: auto against a local HTTP service, with their
// metrics on the host's Prometheus exporter, and returns every sample name
// /metrics shows.
func scrapeNames(t *testing.T) map[string]bool {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq", "g.p.retry.200ms", "lookup-out", "lookup-dlq")
	const n = 100
	kafkatest.Produce(t, brokers, "in", n, retryInput)
	lsrv := lookupsrv.New(t, nil)
	lookup := fmt.Sprintf(`  - name: lookup
    module: %s
    inputs: [in]
    output: lookup-out
    dead_letter_topic: lookup-dlq
    retry: {max_attempts: 1}
`, guestPath(t, "lookup")) + asyncKeys(lsrv, "      max_in_flight: auto")
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "enrich"), "in", "out", "dlq",
		"    ordering: none\n    instances: {max: auto}\n    retry: {max_attempts: 3, backoff: [200ms]}\n"+lookup, "")
	r := newRunner(t, cfg)
	handler := servedMetricsOf(t, r)
	r.Start()
	defer r.Stop(context.Background())
	kafkatest.Eventually(t, time.Minute, "every record decided", func() bool {
		s := r.Snapshots()
		return s[0].Done == n && s[1].DeadLetter == 1 && s[2].Done == n
	})
	srv := httptest.NewServer(handler)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	names := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		names[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
	}
	return names
}

// Every query of the Grafana dashboard shipped with wasmstream names
// metrics the host exports: a renamed or removed metric fails here, not on
// an operator's empty panel.
func TestGrafanaDashboardQueriesExportedMetrics(t *testing.T) {
	b, err := os.ReadFile("admin/grafana/wasmstream.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct {
				Name, Type string
				Query      any
			}
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("admin/grafana/wasmstream.json: %v", err)
	}
	names := scrapeNames(t)
	metric := regexp.MustCompile(`\b(?:wasmstream|go|process)_[a-z0-9_]+\b`)
	queries := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			if tg.Expr == "" {
				continue
			}
			queries++
			found := metric.FindAllString(tg.Expr, -1)
			if len(found) == 0 {
				t.Errorf("panel %q: query %q names no metric", p.Title, tg.Expr)
			}
			for _, m := range found {
				if !names[m] {
					t.Errorf("panel %q: %s is not exported (query %q)", p.Title, m, tg.Expr)
				}
			}
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok && v.Type == "query" {
			queries++
			for _, m := range metric.FindAllString(q, -1) {
				if !names[m] {
					t.Errorf("variable %s: %s is not exported (query %q)", v.Name, m, q)
				}
			}
		}
	}
	if queries < 10 {
		t.Fatalf("%d queries in the dashboard, want its panels", queries)
	}
	if t.Failed() {
		var all []string
		for n := range names {
			all = append(all, n)
		}
		sort.Strings(all)
		t.Logf("exported: %s", strings.Join(all, " "))
	}
}
