//go:build integration

package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/admin"
	"github.com/wasmstream/wasmstream/scheduler/registry"
)

// TestDashboardPageInBrowser renders the page in headless Chromium
// (Debian's chromium, driven by chromedp; the test command installs it)
// from samples the test makes: a fleet deployment that went v1 → v2 →
// rolled back to v1 → canary v3 aborted → canary v4 on two partitions,
// a pipeline whose dead letters are all rejections (guest.fail) and one
// with a fault. The page is read twice: as the host rendered it (the
// first response) and as the page's script renders a frame of the event
// stream. Either must:
//   - share a wide window among the pipelines (not a third of it);
//   - show the module's label on the card, the canary with its label and
//     the partitions it runs, and a version column in the partition table;
//   - keep the deploy time of the stable version (not the canary's);
//   - list the version rolled back from and the aborted canary as earlier
//     versions, each with what became of it;
//   - show the dropped records on the card;
//   - show a rejection (guest.fail) plainly, a fault in red;
//   - write a retry tier's delay as 1m, not 1m0s;
//   - never break a topic name (nor a time or a label) across lines.
//
// It fails, never skips, when Chromium cannot be started.
func TestDashboardPageInBrowser(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (the test command installs Debian's chromium): %v", err)
	}
	long := "customer-orders-enriched-with-profiles" // a topic name with many places to break
	src := &views{v: []scheduler.PipelineView{
		{Snapshot: scheduler.Snapshot{Name: "orders", Fetched: 100, Outputs: 60, Dropped: 37, Done: 97, DeadLetter: 3}, Label: "v1-stable",
			Tiers: []scheduler.TierView{{Topic: long + ".retry.1m", Delay: time.Minute}, {Topic: long + ".retry.1h30m", Delay: 90 * time.Minute}},
			Partitions: []scheduler.PartitionView{
				{Topic: long, Partition: 0}, {Topic: long, Partition: 1, Canary: true}, {Topic: long, Partition: 2}, {Topic: long, Partition: 3, Canary: true},
			}},
		{Snapshot: scheduler.Snapshot{Name: "lookup", Fetched: 10, Done: 9, DeadLetter: 1, Faults: 1},
			Partitions: []scheduler.PartitionView{{Topic: "lookups", Partition: 0}}},
	}}
	const v0, v1, v2, v3, v4 = "0000000000000000aa", "1111111111111111aa", "2222222222222222aa", "3333333333333333aa", "4444444444444444aa"
	src.v[0].Module.Digest, src.v[1].Module.Digest = v1, "5555555555555555aa"
	s := New(Config{Source: src, Open: true, Interval: time.Hour}) // sampled by the test (tick), not the clock
	defer s.Close()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	fl := &fleet{d: map[string]registry.Deployment{"orders": {Pipeline: "orders", Digest: v1, Label: "v1-stable", History: []string{v0}, At: t0, By: "h2"}}}
	s.SetFleet(fl)
	s.SetDeploys(deploys{admin.Manifest{Pipelines: map[string]*admin.PipelineState{}, Modules: map[string]*admin.ModuleMeta{}}})
	var sm sampler
	now := t0
	step := func(d registry.Deployment) {
		now = now.Add(time.Minute)
		fl.d["orders"] = d
		s.tick(&sm, now)
	}
	// The registry's record as the admin API writes it at each step; At
	// is the time of each write.
	step(fl.d["orders"])
	step(registry.Deployment{Pipeline: "orders", Digest: v2, Label: "v2", History: []string{v0, v1}, At: t0.Add(2 * time.Minute), By: "h2"})
	rolledBack := t0.Add(3 * time.Minute)
	step(registry.Deployment{Pipeline: "orders", Digest: v1, Label: "v1-stable", History: []string{v0}, At: rolledBack, By: "h2", Rollback: true})
	c3 := &registry.Canary{Digest: v3, Label: "v3-bad", Percent: 50, At: t0.Add(4 * time.Minute)}
	step(registry.Deployment{Pipeline: "orders", Digest: v1, Label: "v1-stable", History: []string{v0}, At: c3.At, By: "h2", Canary: c3})
	step(registry.Deployment{Pipeline: "orders", Digest: v1, Label: "v1-stable", History: []string{v0}, At: t0.Add(5 * time.Minute), By: "h2",
		Aborted: "canary failed 12 of 50 records", AbortedCanary: c3})
	c4 := &registry.Canary{Digest: v4, Label: "v4-try", Percent: 50, At: t0.Add(6 * time.Minute)}
	step(registry.Deployment{Pipeline: "orders", Digest: v1, Label: "v1-stable", History: []string{v0}, At: c4.At, By: "h2", Canary: c4})
	// Failed records: two rejections of orders, dead-lettered, and a fault
	// of lookup.
	retried := failureEvent(4, true) // due in an hour: its time must stay on one line too
	retried.Pipeline, retried.Topic, retried.OriginTopic, retried.Dest = "lookup", "lookups", "lookups", "lookups-retries-of-the-lookup-pipeline.1m"
	s.ObserveFailure(retried)
	for i, e := range []*scheduler.FailureEvent{failureEvent(1, false), failureEvent(2, false), failureEvent(3, false)} {
		e.Pipeline, e.Topic, e.OriginTopic, e.Dest, e.Error = "orders", long, long, long+".dlq", "order has no items"
		if i == 2 {
			e.Pipeline, e.Topic, e.OriginTopic, e.Dest, e.Kind, e.Error = "lookup", "lookups", "lookups", "lookups-dead-letters-of-the-lookup-pipeline", "fault.trap", "wasm trap: unreachable"
		}
		s.ObserveFailure(e)
	}
	now = now.Add(time.Second)
	s.tick(&sm, now)

	srv := httptest.NewServer(s.Handler(http.NotFoundHandler()))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1600, 1200))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx)
	defer bcancel()
	// The page as the host renders it: a tab whose scripts do not run.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("chromium could not be started: %v", err)
	}
	if _, err := chromedp.Call(bctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/dashboard")); err != nil {
		t.Fatalf("chromium could not open the dashboard: %v", err)
	}

	type shown struct {
		Conn, Updated string
		Widths        []float64 // the pipelines' sections in the first row, and #pipelines's own (last)
		Module        string    // orders' card: module line
		Canary        string    // orders' card: canary line
		Versions      []string  // partition table's version column, orders
		Dropped       string
		DeadBad       map[string]bool // the dead-lettered count in red
		Deployed      string
		Earlier       string
		CanaryCell    string
		ErrorColour   map[string]string // kind -> the error cell's colour
		WentColour    map[string]string
		Delays        []string
		Topics        int
		Broken        []string // topic names laid out on more than one line
	}
	const read = `(() => {
		const r = {}, sec = (n) => document.querySelector('section.pipeline[data-name="' + n + '"]');
		r.Conn = document.getElementById("conn").textContent; r.Updated = document.getElementById("updated").textContent;
		const box = document.getElementById("pipelines").getBoundingClientRect(), secs = [...document.querySelectorAll("section.pipeline")].map((s) => s.getBoundingClientRect());
		r.Widths = secs.filter((b) => Math.abs(b.top - secs[0].top) < 2).map((b) => b.width).concat([box.width]);
		const o = sec("orders");
		r.Module = o.querySelector(".module").textContent; r.Canary = (o.querySelector(".canary") || {}).textContent || "";
		const tbl = o.querySelector("table.partitions") || o.querySelector("table"), col = [...tbl.querySelectorAll("thead th")].findIndex((th) => th.textContent === "version");
		r.Versions = col < 0 ? [] : [...tbl.querySelectorAll("tbody tr")].map((tr) => tr.cells[col].textContent);
		r.Dropped = (o.querySelector(".stat.dropped b") || {}).textContent || "";
		r.DeadBad = {}; for (const n of ["orders", "lookup"]) r.DeadBad[n] = getComputedStyle(sec(n).querySelector(".stat.dead b")).color === "rgb(183, 28, 28)";
		const v = document.querySelector('#versions tr[data-pipeline="orders"]');
		r.Deployed = v.cells[2].textContent; r.CanaryCell = v.cells[3].textContent; r.Earlier = v.cells[5].textContent;
		r.ErrorColour = {}; r.WentColour = {};
		document.querySelectorAll("#failed tbody tr[data-kind]").forEach((tr) => {
			r.ErrorColour[tr.dataset.kind] = getComputedStyle(tr.querySelector("td.error")).color;
			r.WentColour[tr.dataset.kind] = getComputedStyle(tr.cells[tr.cells.length - 1]).color;
		});
		r.Delays = [...o.querySelectorAll("table")].filter((t) => t.querySelector("th") && [...t.querySelectorAll("th")].some((th) => th.textContent === "delay"))
			.flatMap((t) => [...t.querySelectorAll("tbody tr")].map((tr) => tr.cells[1].textContent));
		// A topic name is on one line when the text of its cell or span
		// lies on one line box.
		const lines = (n) => { const rg = document.createRange(); rg.selectNodeContents(n); return new Set([...rg.getClientRects()].map((b) => Math.round(b.top))).size; };
		const topics = [...document.querySelectorAll(".topic, .when, .label")];
		r.Topics = topics.length; r.Broken = topics.filter((n) => lines(n) > 1).map((n) => n.textContent);
		document.querySelectorAll("section.pipeline table").forEach((t) => t.querySelectorAll("tbody tr").forEach((tr) => {
			if (lines(tr.cells[0]) > 1 && tr.cells[0].textContent.includes("-")) r.Broken.push(tr.cells[0].textContent);
		}));
		return r; })()`
	check := func(when string, got shown) {
		t.Helper()
		t.Logf("%s: %+v", when, got)
		fail := func(format string, args ...any) { t.Helper(); t.Errorf(when+": "+format, args...) }
		if n := len(got.Widths); n < 3 || got.Widths[0]+got.Widths[1] < 0.9*got.Widths[n-1] {
			fail("the pipelines' cards in the first row are %v wide of %v: want the width shared among them", got.Widths[:n-1], got.Widths[n-1])
		}
		if !strings.Contains(got.Module, "111111111111") || !strings.Contains(got.Module, "v1-stable") {
			fail("the card's module line %q lacks the label v1-stable", got.Module)
		}
		for _, want := range []string{"444444444444", "v4-try", "50%", long + "[1]", long + "[3]"} {
			if !strings.Contains(got.Canary, want) {
				fail("the card's canary line %q lacks %q", got.Canary, want)
			}
		}
		if strings.Join(got.Versions, ",") != "stable,canary,stable,canary" {
			fail("the partition table's version column: %v, want stable,canary,stable,canary", got.Versions)
		}
		if got.Dropped != "37" {
			fail("the card shows %q dropped, want 37", got.Dropped)
		}
		if got.DeadBad["orders"] || !got.DeadBad["lookup"] {
			fail("dead-lettered shown as a problem: %v; want only lookup's (a fault), not orders' (rejections)", got.DeadBad)
		}
		if want := isoMilli(rolledBack.UnixMilli()); !strings.HasPrefix(got.Deployed, want) {
			fail("deployed %q, want %s (the rollback to v1; the canaries' writes came later)", got.Deployed, want)
		}
		for _, want := range []string{"222222222222 (v2) rolled back", "333333333333 (v3-bad) canary aborted", "000000000000"} {
			if !strings.Contains(got.Earlier, want) {
				fail("earlier versions %q lack %q", got.Earlier, want)
			}
		}
		const red = "rgb(183, 28, 28)"
		if got.ErrorColour["guest.fail"] == red || got.WentColour["guest.fail"] == red {
			fail("a rejection (guest.fail) is shown in a fault's red: error %s, went to %s", got.ErrorColour["guest.fail"], got.WentColour["guest.fail"])
		}
		if got.ErrorColour["fault.trap"] != red || got.WentColour["fault.trap"] != red {
			fail("a fault is not shown in red: error %s, went to %s", got.ErrorColour["fault.trap"], got.WentColour["fault.trap"])
		}
		if strings.Join(got.Delays, ",") != "1m,1h30m" {
			fail("retry delays shown as %v, want 1m,1h30m", got.Delays)
		}
		if got.Topics < 8 || len(got.Broken) > 0 {
			fail("%d topic names marked, broken across lines: %q", got.Topics, got.Broken)
		}
	}
	// Evaluate runs in the page even with its own scripts disabled.
	first, err := chromedp.Run(bctx, chromedp.Evaluate[shown](read))
	if err != nil {
		t.Fatal(err)
	}
	if first.Conn == "live" {
		t.Fatal("the page's script ran in the tab meant to show the host's rendering")
	}
	check("as the host renders it", first)
	shot := func(name string) {
		if png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)); err == nil {
			dir := os.Getenv("TEST_ARTEFACTS")
			if dir == "" {
				dir = t.TempDir()
			}
			if os.MkdirAll(dir, 0o755) == nil && os.WriteFile(filepath.Join(dir, name), png, 0o644) == nil {
				t.Logf("screenshot: %s", filepath.Join(dir, name))
			}
		}
	}
	shot("dashboard-versions-first.png")

	// The page's script, live: another tab.
	live, lcancel := chromedp.NewContext(bctx)
	defer lcancel()
	if err := chromedp.Do(live, chromedp.Navigate(srv.URL+"/dashboard")); err != nil {
		t.Fatal(err)
	}
	bctx = live

	// A frame of the event stream, rendered by the page's script.
	var got shown
	deadline := time.Now().Add(time.Minute)
	for {
		if got, err = chromedp.Run(bctx, chromedp.Evaluate[shown](read)); err != nil {
			t.Fatal(err)
		}
		if got.Conn == "live" && got.Updated != first.Updated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no frame of the event stream rendered within a minute: %+v", got)
		}
		if got.Conn == "live" {
			now = now.Add(time.Second)
			s.tick(&sm, now)
		}
		time.Sleep(100 * time.Millisecond)
	}
	check("a frame of the event stream", got)
	shot("dashboard-versions-live.png")
}
