package dashboard

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/admin"
	"github.com/wasmstream/wasmstream/scheduler/registry"
	"github.com/wasmstream/wasmstream/tracing"
)

// waitSampled polls until the sampler has kept a frame.
func waitSampled(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.last.Load() == nil {
		if time.Now().After(deadline) {
			t.Fatal("no sample within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %s %s", url, res.Status, b)
	}
	return string(b)
}

// hostile is a failure whose key, error, value and headers are markup.
func hostile() *scheduler.FailureEvent {
	e := failureEvent(9, false)
	e.Key = []byte(`<img src=x onerror=alert(1)>`)
	e.Error = `guest said </script><script>alert(2)</script>`
	e.Value, e.ValueSize = []byte("{\"a\":\"<b>\x00\"}"), 300
	e.Headers = []scheduler.EventHeader{{Key: "trace<", Value: []byte("v&1")}}
	e.ModuleDigest = "0123456789abcdef0123"
	return e
}

// TestDashboardFirstResponse: GET /dashboard, with no event stream open,
// holds the newest sample rendered (pipelines, their partitions, the
// failed records with their error, key, value and headers, escaped; ISO
// times in UTC) and, as JSON, the sample and the history; the failed list
// is filtered by the query.
func TestDashboardFirstResponse(t *testing.T) {
	s := New(Config{Source: twoPipelines(), Open: true, Interval: 10 * time.Millisecond})
	defer s.Close()
	srv := httptest.NewServer(s.Handler(http.NotFoundHandler()))
	defer srv.Close()
	s.ObserveFailure(failureEvent(1, true))
	s.ObserveFailure(hostile())
	for s.last.Load() == nil || len(s.last.Load().Failed) < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	page := get(t, srv.URL+"/dashboard")
	for _, want := range []string{
		`<section class="pipeline" data-name="enrich">`, `<div class="stat lag"><b>7</b>`, `<td class="num">1</td>`, // partition 1
		`&lt;img src=x onerror=alert(1)&gt;`, `guest said &lt;/script&gt;&lt;script&gt;alert(2)&lt;/script&gt;`,
		`{&#34;a&#34;:&#34;&lt;b&gt;\x00&#34;}…`, `(300 B)`, `trace&lt;: v&amp;1`, `0123456789ab`,
		`1970-01-01T00:00:01.009Z`, `data-kind="fault.panic"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(page, "<img src=x") || strings.Contains(page, "<script>alert") {
		t.Error("a record's bytes reached the page unescaped")
	}
	if regexp.MustCompile(`\d{1,2}/\d{1,2}/\d{4}`).MatchString(page) {
		t.Error("a locale date on the page")
	}
	m := regexp.MustCompile(`(?s)<script id="initial" type="application/json">(.*?)</script>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no initial JSON")
	}
	var in struct {
		Frame   frame                  `json:"frame"`
		History map[string]seriesFrame `json:"history"`
	}
	if err := json.Unmarshal([]byte(m[1]), &in); err != nil {
		t.Fatalf("initial JSON: %v\n%s", err, m[1])
	}
	if len(in.Frame.Pipelines) != 1 || len(in.Frame.Failed) != 2 || len(in.History["enrich"].At) == 0 {
		t.Errorf("initial: %d pipelines, %d failed, history %+v", len(in.Frame.Pipelines), len(in.Frame.Failed), in.History)
	}
	if in.Frame.Failed[0].Key != `<img src=x onerror=alert(1)>` {
		t.Errorf("the JSON's key %q", in.Frame.Failed[0].Key)
	}

	filtered := get(t, srv.URL+"/dashboard?kind=PANIC")
	if !strings.Contains(filtered, `data-kind="fault.panic"`) || strings.Contains(filtered, `data-kind="guest.fail"`) {
		t.Error("?kind=PANIC did not keep the fault.panic entry only")
	}
	if none := get(t, srv.URL+"/dashboard?key=nothing-like-it"); !strings.Contains(none, "no failures match") {
		t.Error("a filter matching nothing does not say so")
	}
}

// TestDashboardHistoryBounded: an hour and more of samples keeps 600 fine
// and 360 coarse points per pipeline (30 KiB), at most 64 pipelines; a
// page gets the coarse points older than the fine ones, then the fine.
func TestDashboardHistoryBounded(t *testing.T) {
	if n := unsafe.Sizeof(point{}); n != 32 {
		t.Fatalf("a point is %d bytes, the bound says 32", n)
	}
	h := newHistory()
	t0 := time.Unix(1e6, 0)
	const samples = 2 * 3600
	for i := range samples {
		h.add("p", point{At: t0.Add(time.Duration(i) * time.Second).UnixMilli(), In: float32(i)})
	}
	s := h.byName["p"]
	if len(s.fine.buf) != fineLen || cap(s.fine.buf) > 2*fineLen || len(s.coarse.buf) != coarseLen || cap(s.coarse.buf) > 2*coarseLen {
		t.Fatalf("fine %d (cap %d), coarse %d (cap %d)", len(s.fine.buf), cap(s.fine.buf), len(s.coarse.buf), cap(s.coarse.buf))
	}
	f := h.frames()["p"]
	last := t0.Add((samples - 1) * time.Second).UnixMilli()
	if f.At[len(f.At)-1] != last || f.At[f.Fine] != last-(fineLen-1)*1000 {
		t.Errorf("fine points end %d start %d, want %d and %d", f.At[len(f.At)-1], f.At[f.Fine], last, last-(fineLen-1)*1000)
	}
	if span := time.Duration(last-f.At[0]) * time.Millisecond; span < historySpan-10*time.Second || span > historySpan {
		t.Errorf("history spans %v, want about %v", span, historySpan)
	}
	for i := 1; i < len(f.At); i++ {
		if f.At[i] <= f.At[i-1] {
			t.Fatalf("points out of order at %d: %d after %d", i, f.At[i], f.At[i-1])
		}
	}
	if f.Fine > 0 && f.In[f.Fine-1] != float32(samples-fineLen-1)-4.5 && f.Fine != coarseLen-fineLen/coarseEvery {
		t.Errorf("coarse point %v, fine from %d", f.In[f.Fine-1], f.Fine)
	}
	for i := range 100 {
		h.add(fmt.Sprint("q", i), point{})
	}
	if len(h.byName) != maxHistoryPipelines {
		t.Errorf("%d pipelines kept, want %d", len(h.byName), maxHistoryPipelines)
	}
}

// TestDashboardEntryBounded: an entry of a record with the largest key,
// error, value and headers a FailureEvent carries holds at most
// entryMaxBytes of text.
func TestDashboardEntryBounded(t *testing.T) {
	r := newRing(2)
	e := failureEvent(1, false)
	bin := strings.Repeat("\x01", 1000)
	e.Key, e.KeyTruncated = []byte(strings.Repeat("\xffa", scheduler.MaxEventKeyBytes/2)), true // a replacement character for each byte that is not UTF-8
	e.Error = strings.Repeat("é", scheduler.MaxEventErrorBytes/2)
	e.Value, e.ValueSize = []byte(bin[:scheduler.MaxEventValueBytes]), 1<<20
	for range scheduler.MaxEventHeaders {
		e.Headers = append(e.Headers, scheduler.EventHeader{Key: strings.Repeat("\xff", scheduler.MaxEventKeyBytes), Value: []byte(bin[:scheduler.MaxEventHeaderBytes]), Cut: true})
	}
	r.add(e)
	en := r.newest()[0]
	n := len(en.Key) + len(en.Error) + len(en.Value) + len(en.Record) + len(en.Consumed) + len(en.Pipeline) + len(en.Primary) + len(en.Kind) + len(en.Dest) + len(en.Module)
	for _, h := range en.Headers {
		n += len(h.Key) + len(h.Value)
	}
	if n > entryMaxBytes {
		t.Errorf("an entry holds %d bytes of text, the bound is %d", n, entryMaxBytes)
	}
	if !strings.HasPrefix(en.Value, `\x01\x01`) || !strings.HasSuffix(en.Value, "…") || len(en.Value) > maxPreview+len("…") {
		t.Errorf("value preview %q", en.Value)
	}
	if got := escaped([]byte("ab\ncd"), 3, false); got != `ab…` { // never half an escape
		t.Errorf("escaped cut inside an escape: %q", got)
	}
}

type deploys struct{ m admin.Manifest }

func (d deploys) Snapshot() admin.Manifest { return d.m }

type fleet struct {
	d     map[string]registry.Deployment
	hosts []registry.HostStatus
}

func (f *fleet) Deployment(p string) (registry.Deployment, bool) { d, ok := f.d[p]; return d, ok }
func (f *fleet) HostsStatus() []registry.HostStatus              { return f.hosts }
func (f *fleet) HostID() string                                  { return "h1" }

// TestDashboardVersionsEventsHosts: the versions panel from the fleet's
// deployment (canary, abort reason), the event log of what changed between
// samples (deploys, canary start and abort, assignments, restores, broker
// errors as one entry while they grow), bounded; the fleet's hosts.
func TestDashboardVersionsEventsHosts(t *testing.T) {
	src := twoPipelines()
	s := New(Config{Source: src, Interval: time.Hour})
	defer s.Close()
	now := time.Now()
	fl := &fleet{d: map[string]registry.Deployment{"enrich": {Digest: "aaaaaaaaaaaaaaaa", History: []string{"0000000000000000"}, At: now, By: "h2"}},
		hosts: []registry.HostStatus{{Host: "h1", Pipelines: map[string]string{"enrich": "aaaaaaaaaaaaaaaa"}, At: now},
			{Host: "h0", Pipelines: map[string]string{"enrich": "0000"}, At: now.Add(-time.Hour)},
			{Host: "h3", Pipelines: map[string]string{}, Failed: map[string]registry.Failure{"enrich": {Digest: "bbbb", Error: "no <memory>"}}, At: now}}}
	s.SetFleet(fl)
	s.SetDeploys(deploys{admin.Manifest{Pipelines: map[string]*admin.PipelineState{}, Modules: map[string]*admin.ModuleMeta{}}})
	var sm sampler
	step := func(mod func()) frame {
		mod()
		now = now.Add(time.Second)
		return s.sample(&sm, now)
	}
	f := step(func() {})
	if len(f.Versions) != 1 || f.Versions[0].Source != "fleet" || f.Versions[0].History[0].Digest != "0000000000000000" {
		t.Fatalf("versions %+v", f.Versions)
	}
	if h := f.Hosts; h == nil || len(h.Hosts) != 3 || h.Hosts[0].Host != "h3" || h.Hosts[1].Host != "h0" || h.Hosts[1].Live || !h.Hosts[2].Self {
		t.Errorf("hosts %+v", h)
	}
	step(func() {
		d := fl.d["enrich"]
		d.Canary = &registry.Canary{Digest: "cccccccccccccccc", Percent: 10, At: now}
		fl.d["enrich"] = d
	})
	f = step(func() {
		d := fl.d["enrich"]
		d.Canary, d.Aborted = nil, "canary failed 12 of 50 records (fault.trap: 12) on partitions in[1] at hosts h1"
		fl.d["enrich"] = d
		src.mu.Lock()
		src.v[0].Partitions = src.v[0].Partitions[:1] // in[1] stays, in[0] is lost
		src.v[0].StateRestored = 42
		src.v[0].BrokerErrors = []scheduler.BrokerErrors{{Broker: "1", Address: "b:9092", Connect: 3, LastError: "refused"}}
		src.mu.Unlock()
	})
	if v := f.Versions[0]; v.Canary != nil || !strings.Contains(v.Aborted, "fault.trap: 12") {
		t.Errorf("after the abort: %+v", v)
	}
	for range 5 { // an outage: one entry, its count growing
		step(func() {
			src.mu.Lock()
			src.v[0].BrokerErrors[0].Connect += 2
			src.mu.Unlock()
		})
	}
	f = step(func() {
		d := fl.d["enrich"]
		d.History, d.Digest, d.Aborted = append(d.History, d.Digest), "dddddddddddddddd", ""
		fl.d["enrich"] = d
	})
	kinds := map[string][]Event{}
	for _, e := range f.Events {
		kinds[e.Kind] = append(kinds[e.Kind], e)
	}
	checks := map[string]string{"version": "runs aaaaaaaaaaaa by h2", "canary.start": "canary cccccccccccc on 10%", "canary.abort": "aborted: canary failed 12 of 50",
		"assignment": "lost in[0]", "restore": "42 changelog record(s)", "deploy": "deployed dddddddddddd (was aaaaaaaaaaaa) by h2", "broker.error": "broker 1 (b:9092): 13 connect"}
	for k, want := range checks {
		if len(kinds[k]) == 0 || !strings.Contains(kinds[k][0].Text, want) {
			t.Errorf("event %s: %+v, want %q", k, kinds[k], want)
		}
	}
	if b := kinds["broker.error"]; len(b) != 1 || b[0].Count != 13 {
		t.Errorf("broker errors: %+v, want one entry counting 13", b)
	}
	for i := range 3 * maxEvents {
		s.evlog.add(int64(i), "deploy", "x", strings.Repeat("y", 2*maxEventText))
	}
	if es := s.evlog.newest(); len(es) != maxEvents || len(es[0].Text) > maxEventText+len("…") || es[0].At != 3*maxEvents-1 {
		t.Errorf("event log: %d entries, newest %d bytes at %d", len(es), len(es[0].Text), es[0].At)
	}
}

// TestDashboardLabel: the versions panel shows a version's label (deploy
// --label) from the fleet's deployment and canary, else from the stored
// module; earlier versions with theirs; a long one cut.
func TestDashboardLabel(t *testing.T) {
	s := New(Config{Source: twoPipelines(), Interval: time.Hour})
	defer s.Close()
	mods := map[string]*admin.ModuleMeta{
		"0000000000000000": {Label: "v1"},
		"aaaaaaaaaaaaaaaa": {Label: "stored-v2"},
		"cccccccccccccccc": {Label: strings.Repeat("x", 1000)},
	}
	s.SetDeploys(deploys{admin.Manifest{Pipelines: map[string]*admin.PipelineState{}, Modules: mods}})
	fl := &fleet{d: map[string]registry.Deployment{"enrich": {Digest: "aaaaaaaaaaaaaaaa", Label: "v2 <fix>", History: []string{"0000000000000000"},
		Canary: &registry.Canary{Digest: "cccccccccccccccc", Percent: 10}}}}
	s.SetFleet(fl)
	var sm sampler
	f := s.sample(&sm, time.Now())
	if len(f.Versions) != 1 {
		t.Fatalf("versions %+v", f.Versions)
	}
	v := f.Versions[0]
	if v.Label != "v2 <fix>" || v.History[0].Label != "v1" || v.Canary == nil || len(v.Canary.Label) > maxLabelBytes+len("…") || !strings.HasPrefix(v.Canary.Label, "xxx") {
		t.Errorf("labels: active %q, earlier %+v, canary %+v", v.Label, v.History, v.Canary)
	}
	d := fl.d["enrich"]
	d.Label = "" // a deployment without one: the stored module's
	fl.d["enrich"] = d
	if v := s.sample(&sm, time.Now()).Versions[0]; v.Label != "stored-v2" {
		t.Errorf("label from the store: %q", v.Label)
	}
}

// TestDashboardPathPending: with a trace file that does not hold the
// record yet, the path says so and that it asks again, not "turn tracing
// on".
func TestDashboardPathPending(t *testing.T) {
	tf := filepath.Join(t.TempDir(), "traces.jsonl")
	if err := os.WriteFile(tf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, srv := serve(t, Config{Source: twoPipelines(), Open: true, TraceFile: tf})
	e := failureEvent(3, false)
	e.At = time.Now()
	s.ObserveFailure(e)
	id := s.ring.newest()[0].ID
	var p pathReply
	if err := json.Unmarshal([]byte(get(t, fmt.Sprintf("%s/dashboard/record?id=%d", srv.URL, id))), &p); err != nil {
		t.Fatal(err)
	}
	if !p.Pending || !strings.Contains(p.Note, "does not hold this record yet") || strings.Contains(p.Note, "with tracing") || p.Source != "host" {
		t.Errorf("fresh record, trace file behind: %+v", p)
	}
}

// TestDashboardRendersBounded: at most maxRenders pages are rendered at
// once; another request waits for a free turn.
func TestDashboardRendersBounded(t *testing.T) {
	s, srv := serve(t, Config{Open: true})
	for range maxRenders {
		s.renders <- struct{}{}
	}
	c := &http.Client{Timeout: 300 * time.Millisecond}
	if res, err := c.Get(srv.URL + "/dashboard"); err == nil {
		res.Body.Close()
		t.Fatal("a page was rendered beyond the bound")
	}
	<-s.renders
	get(t, srv.URL+"/dashboard")
}

// TestDashboardCanaryBetweenSamples: a canary that began and was aborted
// between two samples still has its start (with its label) and its abort
// in the event log; one seen running and then aborted is told once.
func TestDashboardCanaryBetweenSamples(t *testing.T) {
	s := New(Config{Source: twoPipelines(), Interval: time.Hour})
	defer s.Close()
	now := time.Now()
	fl := &fleet{d: map[string]registry.Deployment{"enrich": {Digest: "aaaaaaaaaaaaaaaa", At: now, By: "h2"}},
		hosts: []registry.HostStatus{{Host: "h1", Pipelines: map[string]string{"enrich": "aaaaaaaaaaaaaaaa"}, At: now}}}
	s.SetFleet(fl)
	s.SetDeploys(deploys{admin.Manifest{Pipelines: map[string]*admin.PipelineState{}, Modules: map[string]*admin.ModuleMeta{}}})
	var sm sampler
	step := func(mod func(d *registry.Deployment)) frame {
		d := fl.d["enrich"]
		mod(&d)
		fl.d["enrich"] = d
		now = now.Add(time.Second)
		return s.sample(&sm, now)
	}
	count := func(f frame) map[string][]string {
		m := map[string][]string{}
		for _, e := range f.Events {
			m[e.Kind] = append(m[e.Kind], e.Text)
		}
		return m
	}
	step(func(*registry.Deployment) {})
	quick := &registry.Canary{Digest: "bbbbbbbbbbbbbbbb", Label: "v3-quick", Percent: 25, At: now}
	f := step(func(d *registry.Deployment) { d.Aborted, d.AbortedCanary = "automatic: failed 59 of 59 records", quick })
	ev := count(f)
	if len(ev["canary.start"]) != 1 || !strings.Contains(ev["canary.start"][0], "v3-quick") ||
		len(ev["canary.abort"]) != 1 || !strings.Contains(ev["canary.abort"][0], "aborted: automatic: failed 59") {
		t.Fatalf("a canary begun and aborted between two samples: events %v", ev)
	}
	// One seen running, then aborted: one start, one abort more.
	seen := &registry.Canary{Digest: "cccccccccccccccc", Label: "v4", Percent: 25, At: now}
	step(func(d *registry.Deployment) { d.Canary, d.Aborted, d.AbortedCanary = seen, "", nil })
	f = step(func(d *registry.Deployment) { d.Canary, d.Aborted, d.AbortedCanary = nil, "automatic: v4 failed", seen })
	ev = count(f)
	if len(ev["canary.start"]) != 2 || len(ev["canary.abort"]) != 2 {
		t.Fatalf("a canary seen running, then aborted: events %v, want two starts and two aborts in all", ev)
	}
}

// TestDashboardPathFromRotatedPart: a record whose trace went into the part
// rotated before the file (tracing.max_file_bytes) is read from there.
func TestDashboardPathFromRotatedPart(t *testing.T) {
	t.Parallel()
	tf := filepath.Join(t.TempDir(), "traces.jsonl")
	span := `{"trace_id":"d0000000000000000000000000000001","span_id":"d000000000000001","name":"process in","kind":"consumer","start":"2026-01-01T00:00:00Z","end":"2026-01-01T00:00:01Z","attrs":{"wasmstream.attempt":"1","wasmstream.origin.topic":"in","wasmstream.origin.partition":"1","wasmstream.origin.offset":"3","wasmstream.pipeline":"enrich","wasmstream.outcome":"dead_letter"}}` + "\n"
	if err := os.WriteFile(tf, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tracing.Part(tf, 1), []byte(span), 0o644); err != nil {
		t.Fatal(err)
	}
	s, srv := serve(t, Config{Source: twoPipelines(), Open: true, TraceFile: tf})
	s.ObserveFailure(failureEvent(3, false))
	id := s.ring.newest()[0].ID
	var p pathReply
	if err := json.Unmarshal([]byte(get(t, fmt.Sprintf("%s/dashboard/record?id=%d", srv.URL, id))), &p); err != nil {
		t.Fatal(err)
	}
	if p.Source != "trace file" || !strings.Contains(p.Tree, "d0000000000000000000000000000001") {
		t.Errorf("a record in the rotated part: %+v", p)
	}
}
