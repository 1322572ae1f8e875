//go:build integration

package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/lookupsrv"
)

// TestDashboardInBrowser opens the live dashboard of a running host in
// headless Chromium (Debian's chromium, driven by chromedp) while records
// flow on the real broker: the pipelines show non-zero rates; the lookup
// pipeline (slower than its input on purpose) shows lag, which falls once
// production stops; a poison record the enrich example fails on appears in
// the failed list, and clicking it opens its path. The page's screenshot is
// saved in $TEST_ARTEFACTS (else the test's temporary directory) and,
// with UPDATE_SCREENSHOT=1, as docs/dashboard.png.
//
// It fails, never skips, when Chromium cannot be started.
func TestDashboardInBrowser(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	srv := lookupsrv.New(t, func(string) time.Duration { return 40 * time.Millisecond })
	n := fmt.Sprintf("dash%d", time.Now().UnixNano()%1e6) // short: the names show in the screenshot
	in := n + "-in"
	kafkatest.CreateTopic(t, brokers, 4, in, n+"-enriched", n+"-enriched.dlq", n+"-profiles", n+"-profiles.dlq", n+".e.1s", n+".l.1s")
	dir := t.TempDir()
	metrics := freePort(t)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  commit_interval: 200ms
  session_timeout: 10s
pipelines:
  - name: enrich
    module: %s
    inputs: [%s]
    output: %s-enriched
    dead_letter_topic: %s-enriched.dlq
    ordering: key
    instances: {min: 1, max: 2}
    retry: {max_attempts: 2, backoff: [1s], topic_prefix: %s.e}
    limits: {record_timeout: 10s, memory_pages: 256}
  - name: lookup
    module: %s
    inputs: [%s]
    output: %s-profiles
    dead_letter_topic: %s-profiles.dlq
    env: {LOOKUP_URL: "%s/users/"}
    async:
      max_in_flight: 2
      http: {allow_hosts: [%q]}
    retry: {max_attempts: 2, backoff: [1s], topic_prefix: %s.l}
    limits: {record_timeout: 10s, memory_pages: 256}
tracing:
  exporter: jsonl
  file: %s
shutdown:
  drain_timeout: 5s
metrics:
  listen: %s
admin:
  enabled: false
`, strings.Join(brokers, ","), n, modules["enrich"], in, n, n, n, modules["lookup"], in, n, n, srv.URL, srv.Host(), n,
		filepath.Join(dir, "traces.jsonl"), metrics)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, "run", "--config", cfg)
	defer p.stop(t, 30*time.Second)

	// Production: about 300 records/s, above what lookup can take
	// (4 partitions × 2 lookups of 40 ms in flight ≈ 200/s), so its lag
	// grows until production stops. Every 50th key is one the lookup
	// service fails once (a retried record).
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(5*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prodCtx, stopProducing := context.WithCancel(ctx)
	var produced atomic.Int64
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; prodCtx.Err() == nil; i++ {
			key := fmt.Sprint("user-", i%97)
			if i%50 == 49 {
				key = fmt.Sprint("fail-", i)
			}
			for j := range 3 {
				cl.Produce(prodCtx, &kgo.Record{Topic: in, Key: []byte(key), Value: []byte(fmt.Sprintf(`{"n":%d,"user":%q,"text":"hello %d"}`, i, key, j))}, nil)
			}
			produced.Add(3)
			select {
			case <-prodCtx.Done():
			case <-tick.C:
			}
		}
	}()
	defer func() { stopProducing(); <-prodDone }()

	bctx := browser(t, ctx)
	url := "http://" + metrics + "/dashboard"
	kafkatest.Eventually(t, time.Minute, "the host's metrics listener", func() bool {
		if !p.alive() {
			t.Fatal("wasmstream exited")
		}
		return readyz(metrics)
	})
	if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("chromium could not be started or could not open %s: %v", url, err)
	}

	type pipe struct {
		In, Out float64
		Lag     int64
	}
	var shown map[string]pipe
	read := func() map[string]pipe {
		var err error
		shown, err = chromedp.Run(bctx, chromedp.Evaluate[map[string]pipe](`(() => { const r = {}; const num = (s, c) => Number(s.querySelector(c + " b").textContent.replace(/,/g, ""));
			document.querySelectorAll("section.pipeline").forEach((s) => { r[s.dataset.name] = {In: num(s, ".in-rate"), Out: num(s, ".out-rate"), Lag: num(s, ".lag")}; });
			return r; })()`))
		if err != nil {
			t.Fatalf("reading the page: %v", err)
		}
		return shown
	}
	poll := func(d time.Duration, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(d)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("the page did not show %s within %v; it shows %+v", what, d, shown)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	poll(time.Minute, "both pipelines with non-zero rates in and out", func() bool {
		s := read()
		return s["enrich"].In > 0 && s["enrich"].Out > 0 && s["lookup"].In > 0 && s["lookup"].Out > 0
	})
	art := os.Getenv("TEST_ARTEFACTS")
	if art == "" {
		art = t.TempDir()
	}
	if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	firstPaint(t, bctx, url, art)
	var peak int64
	poll(time.Minute, "lookup lagging while production goes on", func() bool {
		peak = max(peak, read()["lookup"].Lag)
		return peak >= 300
	})
	stopProducing()
	<-prodDone
	t.Logf("produced %d records; lookup lag shown at most %d", produced.Load(), peak)
	poll(2*time.Minute, "lookup's lag falling once production stopped", func() bool { return read()["lookup"].Lag < peak/4 })

	// A poison record: the enrich example fails it terminally (guest.fail),
	// so its one attempt goes straight to the dead-letter topic.
	poison := &kgo.Record{Topic: in, Key: []byte("poison-" + n), Value: []byte(`{"n":-1,"user":"ada","text":"please misbehave","fault":"fail"}`)}
	if err := cl.ProduceSync(ctx, poison).FirstErr(); err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`#failed tbody tr[data-kind="guest.fail"][data-record="%s[%d]@%d"]`, poison.Topic, poison.Partition, poison.Offset)
	if err := chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(row)), chromedp.Click(chromedp.CSS(row))); err != nil {
		t.Fatalf("the poison record %s[%d]@%d in the failed list: %v", poison.Topic, poison.Partition, poison.Offset, err)
	}
	// Its row shows the error message, the key, the value and the
	// version; times are ISO 8601 in UTC.
	cells, err := chromedp.Run(bctx, chromedp.Evaluate[map[string]string](`(() => { const r = document.querySelector(`+"`"+row+"`"+`); const c = (k) => r.querySelector("td." + k).textContent;
		return {time: r.cells[0].textContent, key: c("key"), error: c("error"), value: c("value"), version: c("digest")}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	if cells["key"] != "poison-"+n || cells["error"] == "" || cells["error"] == "guest.fail" || !strings.Contains(cells["value"], `"fault":"fail"`) || len(cells["version"]) != 12 ||
		!regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(cells["time"]) {
		t.Errorf("the poison record's row shows %q", cells)
	}
	var tree, title string
	poll(30*time.Second, "the poison record's path", func() bool {
		var err error
		if tree, err = chromedp.Run(bctx, chromedp.TextContent(chromedp.CSS("#path-tree"))); err != nil {
			t.Fatal(err)
		}
		if title, err = chromedp.Run(bctx, chromedp.TextContent(chromedp.CSS("#path-title"))); err != nil {
			t.Fatal(err)
		}
		return strings.Contains(tree, "attempt 1 · dead_letter") && strings.Contains(tree, "(dead letter)")
	})
	t.Logf("%s\n%s", title, tree)
	if beside, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.querySelector("#failed tbody tr.selected").nextElementSibling.id === "path-row"`)); err != nil || !beside {
		t.Errorf("the path is not shown beside the clicked row (%v)", err)
	}

	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(art, "dashboard.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))
	if os.Getenv("UPDATE_SCREENSHOT") == "1" {
		if err := os.WriteFile(filepath.Join(wt.RepoRoot(t), "docs", "dashboard.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// firstPaint opens the dashboard in another tab with its event stream
// blocked: the page must show both pipelines, the history kept by the host
// (a point a second since it started) and the event log from its first
// response alone. Its screenshot is saved as dashboard-first-paint.png.
func firstPaint(t *testing.T, bctx context.Context, url, art string) {
	tab, cancel := chromedp.NewContext(bctx)
	defer cancel()
	if err := chromedp.Do(tab); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(tab, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(tab, network.SetBlockedURLs, network.SetBlockedURLsParams{URLPatterns: []*network.BlockPattern{{URLPattern: "*://*:*/dashboard/events", Block: true}}}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(tab, chromedp.Navigate(url)); err != nil {
		t.Fatal(err)
	}
	type shown struct {
		Conn      string
		Pipelines []string
		History   map[string]int
		Events    []string
		Canvases  int
	}
	got, err := chromedp.Run(tab, chromedp.Evaluate[shown](`(() => { const init = JSON.parse(document.getElementById("initial").textContent); const h = {};
		for (const [k, v] of Object.entries(init.history)) h[k] = v.at.length;
		return {Conn: document.getElementById("conn").textContent, Pipelines: [...document.querySelectorAll("section.pipeline")].map((s) => s.dataset.name),
			History: h, Events: [...document.querySelectorAll("#events tbody tr")].map((r) => r.dataset.kind || ""), Canvases: document.querySelectorAll("canvas.spark").length}; })()`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first paint, event stream blocked: %+v", got)
	if got.Conn == "live" {
		t.Error("the event stream was not blocked")
	}
	if !slices.Contains(got.Pipelines, "enrich") || !slices.Contains(got.Pipelines, "lookup") || got.Canvases != 2 {
		t.Errorf("the first response shows pipelines %v and %d charts, want enrich and lookup with theirs", got.Pipelines, got.Canvases)
	}
	if got.History["lookup"] < 2 { // history: more than the sample the page is painted from
		t.Errorf("the first response carries %d points of lookup's history", got.History["lookup"])
	}
	if !slices.Contains(got.Events, "assignment") {
		t.Errorf("the event log shows %v, want the partitions' assignment", got.Events)
	}
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(art, "dashboard-first-paint.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// browser starts headless Chromium (Debian's, which the test command
// installs) for the test: a tab to drive with chromedp, closed with ctx or
// at the test's end.
func browser(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (the test command installs Debian's chromium): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1400, 1200))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	return bctx
}

func readyz(addr string) bool {
	c := &http.Client{Timeout: 2 * time.Second}
	res, err := c.Get("http://" + addr + "/healthz")
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == 200
}
