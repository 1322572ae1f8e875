package dashboard

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/admin"
)

// views is a Source whose counters the test moves.
type views struct {
	mu sync.Mutex
	v  []scheduler.PipelineView
}

func (s *views) View() []scheduler.PipelineView {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]scheduler.PipelineView, len(s.v))
	copy(out, s.v)
	return out
}

func twoPipelines() *views {
	return &views{v: []scheduler.PipelineView{
		{Snapshot: scheduler.Snapshot{Name: "enrich", Fetched: 100, Outputs: 90, Done: 95, Lag: 7, Faults: 1},
			Tiers: []scheduler.TierView{{Topic: "enrich.retry.1s", Delay: time.Second}, {Topic: "enrich.retry.3s", Delay: 3 * time.Second}},
			Partitions: []scheduler.PartitionView{
				{Topic: "in", Partition: 1, Lag: 4, Busy: 1, Borrowed: 1},
				{Topic: "in", Partition: 0, Lag: 3, Idle: 1, Awaiting: 2},
			}},
		{Snapshot: scheduler.Snapshot{Name: "enrich.retry", Faults: 2, DeadLetter: 1}, Primary: "enrich",
			Partitions: []scheduler.PartitionView{{Topic: "enrich.retry.1s", Partition: 0, Lag: 5, Busy: 1}, {Topic: "enrich.retry.3s", Partition: 2, Lag: 6}}},
	}}
}

func failureEvent(n int, retry bool) *scheduler.FailureEvent {
	e := &scheduler.FailureEvent{At: time.UnixMilli(int64(1000 + n)), Pipeline: "enrich", Topic: "in", Partition: 1, Offset: int64(n),
		OriginTopic: "in", OriginPartition: 1, OriginOffset: int64(n), Key: []byte("k"), Kind: "guest.fail", Error: "no", Attempt: 1, Dest: "in.dlq"}
	if retry {
		e.Retry, e.Due, e.Dest, e.Kind = true, time.Now().Add(time.Hour), "enrich.retry.1s", "fault.panic"
	}
	return e
}

func TestDashboardRingKeepsNewest(t *testing.T) {
	r := newRing(100)
	for i := range 250 {
		r.add(failureEvent(i, i%5 == 0))
	}
	got := r.newest()
	if len(got) != 100 {
		t.Fatalf("kept %d entries, want 100", len(got))
	}
	for i, e := range got {
		if want := uint64(250 - i); e.ID != want {
			t.Fatalf("entry %d has id %d, want %d (newest first)", i, e.ID, want)
		}
	}
	// Dead letters are counted since the start, not only those kept.
	if n := r.deadByKind("enrich")["guest.fail"]; n != 200 {
		t.Errorf("dead letters of kind guest.fail: %d, want 200", n)
	}
	if _, _, ok := r.get(150); ok {
		t.Error("an evicted entry was found")
	}
	if e, same, ok := r.get(200); !ok || e.Record != "in[1]@199" || len(same) != 1 {
		t.Errorf("get(200) = %+v, %d entries, %v", e, len(same), ok)
	}
	if d := r.dueSummary(time.Now())["enrich.retry.1s"]; d[0] != 20 || d[1] == 0 {
		t.Errorf("retries not yet due on the tier: %v, want 20 kept ones with a due time", d)
	}
}

func TestDashboardRingBoundsKeys(t *testing.T) {
	r := newRing(4)
	e := failureEvent(1, false)
	e.Key, e.KeyTruncated = []byte("caf\xc3"), true // cut inside a rune
	r.add(e)
	if k := r.newest()[0].Key; k != "caf\uFFFD…" {
		t.Errorf("key shown as %q", k)
	}
}

func TestDashboardSampleRates(t *testing.T) {
	src := twoPipelines()
	s := New(Config{Source: src, Interval: time.Hour})
	defer s.Close()
	s.ObserveFailure(failureEvent(1, true))
	var sm sampler
	t0 := time.Now()
	f := s.sample(&sm, t0)
	if f.Pipelines[0].InRate != 0 {
		t.Errorf("first sample has a rate: %v", f.Pipelines[0].InRate)
	}
	src.mu.Lock()
	src.v[0].Fetched, src.v[0].Outputs = 300, 190
	src.mu.Unlock()
	f = s.sample(&sm, t0.Add(2*time.Second))
	if len(f.Pipelines) != 1 {
		t.Fatalf("%d pipelines shown, want the retry tier folded into its primary", len(f.Pipelines))
	}
	p := f.Pipelines[0]
	if p.InRate != 100 || p.OutRate != 50 {
		t.Errorf("rates in %v out %v, want 100 and 50", p.InRate, p.OutRate)
	}
	if p.Partitions[0].Partition != 0 || p.Instances != (instanceCounts{Idle: 1, Busy: 1, Awaiting: 2, Borrowed: 1}) {
		t.Errorf("partitions %+v, instances %+v", p.Partitions, p.Instances)
	}
	if p.Faults != 3 || p.DeadLetter != 1 || p.Retry.Busy != 1 {
		t.Errorf("retry tier not added: faults %d dead %d retry workers %+v", p.Faults, p.DeadLetter, p.Retry)
	}
	if p.Tiers[0].Backlog != 5 || p.Tiers[1].Backlog != 6 || p.Tiers[0].Pending != 1 || p.Tiers[0].NextDue == 0 {
		t.Errorf("tiers %+v", p.Tiers)
	}
	if len(f.Failed) != 1 {
		t.Errorf("%d failed entries, want 1", len(f.Failed))
	}
}

func TestDashboardAccess(t *testing.T) {
	for _, c := range []struct {
		listen string
		open   bool
	}{{"127.0.0.1:9464", true}, {"[::1]:0", true}, {"localhost:9464", true}, {":9464", false}, {"0.0.0.0:9464", false}, {"10.1.2.3:9464", false}, {"nonsense", false}} {
		if got := OpenOn(c.listen); got != c.open {
			t.Errorf("OpenOn(%q) = %v", c.listen, got)
		}
	}
	const token = "a-test-admin-token-0123456789"
	s := New(Config{Source: twoPipelines(), Token: token, Interval: 20 * time.Millisecond})
	defer s.Close()
	srv := httptest.NewServer(s.Handler(http.NotFoundHandler()))
	defer srv.Close()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, mod func(*http.Request)) (*http.Response, string) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if mod != nil {
			mod(req)
		}
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
		return res, string(b)
	}
	for i, p := range []string{"/dashboard", "/dashboard/events", "/dashboard/record?id=1", "/dashboard/static/app.js"} {
		res, body := get(p, nil)
		if res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %s", p, res.Status)
		}
		if strings.Contains(body, token) {
			t.Errorf("GET %s shows the token", p)
		}
		// Past admin.FreeAttempts wrong tokens this client would wait
		// before its right one is looked at (TestBearerGuessesThrottled).
		if i >= admin.FreeAttempts {
			continue
		}
		if res, _ := get(p, func(r *http.Request) { r.Header.Set("Authorization", "Bearer wrong") }); res.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %s", p, res.Status)
		}
	}
	res, body := get("/dashboard", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) })
	if res.StatusCode != 200 || strings.Contains(body, token) || !strings.Contains(body, "app.js") {
		t.Errorf("GET /dashboard with the token: %s", res.Status)
	}
	if res, _ := get("/metrics", nil); res.StatusCode != http.StatusNotFound {
		t.Errorf("other paths are not passed on: %s", res.Status)
	}
	// The login form sets a cookie that is not the token and opens the rest.
	res, err := noRedirect.PostForm(srv.URL+"/dashboard/login", url.Values{"token": {"wrong"}})
	if err != nil || res.StatusCode != http.StatusUnauthorized || len(res.Cookies()) != 0 {
		t.Fatalf("login with a wrong token: %v %v %v", res.Status, err, res.Cookies())
	}
	res, err = noRedirect.PostForm(srv.URL+"/dashboard/login", url.Values{"token": {token}})
	if err != nil || res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("login: %v %v", res.Status, err)
	}
	ck := res.Cookies()[0]
	if ck.Value == token || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode {
		t.Errorf("session cookie %+v", ck)
	}
	if res, _ := get("/dashboard/static/app.js", func(r *http.Request) { r.AddCookie(ck) }); res.StatusCode != 200 {
		t.Errorf("GET with the session cookie: %s", res.Status)
	}
	// No token to ask for: everything refused.
	closed := New(Config{Source: twoPipelines()})
	defer closed.Close()
	srv2 := httptest.NewServer(closed.Handler(http.NotFoundHandler()))
	defer srv2.Close()
	res, err = http.Get(srv2.URL + "/dashboard")
	if err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Errorf("without an admin token the dashboard must refuse: %v %v", res.Status, err)
	}
	res.Body.Close()
}

// readFrame reads the next server-sent event's data.
func readFrame(t *testing.T, br *bufio.Reader) frame {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("event stream: %v", err)
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			var f frame
			if err := json.Unmarshal([]byte(d), &f); err != nil {
				t.Fatalf("frame %q: %v", d, err)
			}
			return f
		}
	}
}

func TestDashboardEventsAndPath(t *testing.T) {
	src := twoPipelines()
	s := New(Config{Source: src, Open: true, Interval: 10 * time.Millisecond, MaxClients: 2})
	srv := httptest.NewServer(s.Handler(http.NotFoundHandler()))
	defer srv.Close()
	s.ObserveFailure(failureEvent(7, true))
	e := failureEvent(7, false)
	e.Attempt, e.Pipeline = 2, "enrich.retry"
	s.ObserveFailure(e)

	res, err := http.Get(srv.URL + "/dashboard/events")
	if err != nil || res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %v %v", res.Status, err)
	}
	br := bufio.NewReader(res.Body)
	f := readFrame(t, br)
	if len(f.Pipelines) != 1 || len(f.Failed) != 2 {
		t.Fatalf("frame: %d pipelines, %d failed", len(f.Pipelines), len(f.Failed))
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.Pipelines[0].InRate == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no rate after 10s")
		}
		src.mu.Lock()
		src.v[0].Fetched += 10
		src.mu.Unlock()
		f = readFrame(t, br)
	}

	// A record's path, from the host's own failures of it.
	pr, err := http.Get(fmt.Sprintf("%s/dashboard/record?id=%d", srv.URL, f.Failed[0].ID))
	if err != nil || pr.StatusCode != 200 {
		t.Fatalf("record: %v %v", pr.Status, err)
	}
	var p pathReply
	json.NewDecoder(pr.Body).Decode(&p)
	pr.Body.Close()
	for _, want := range []string{"record in[1]@7", "2 attempt(s)", "attempt 1 · retry", "attempt 2 · dead_letter", "send in.dlq (dead letter)", "send enrich.retry.1s (attempt 2 due"} {
		if !strings.Contains(p.Tree, want) {
			t.Errorf("path lacks %q:\n%s", want, p.Tree)
		}
	}
	if p.Source != "host" {
		t.Errorf("source %q", p.Source)
	}
	if res, _ := http.Get(srv.URL + "/dashboard/record?id=99"); res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown entry: %s", res.Status)
	}

	// The number of pages is bounded: a third page with MaxClients 2 gets
	// in, and the oldest stream ends (its EventSource would reconnect).
	res2, err := http.Get(srv.URL + "/dashboard/events")
	if err != nil {
		t.Fatal(err)
	}
	res3, err := http.Get(srv.URL + "/dashboard/events")
	if err != nil || res3.StatusCode != 200 {
		t.Fatalf("a third page with MaxClients 2: %v %v", res3.Status, err)
	}
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		t.Errorf("the oldest stream: %v", err)
	}
	if n := s.hub.count(); n != 2 {
		t.Errorf("%d streams, want 2", n)
	}

	// Close ends the streams; the sampler stops.
	s.Close()
	if _, err := io.Copy(io.Discard, res3.Body); err != nil {
		t.Errorf("stream after Close: %v", err)
	}
	res.Body.Close()
	res2.Body.Close()
	res3.Body.Close()
}

func TestDashboardSlowPageDropped(t *testing.T) {
	h := newHub(4)
	slow, _, _ := h.join("slow")
	fast, _, _ := h.join("fast")
	for i := range 3 * clientBuffer {
		h.publish([]byte{byte(i)}) // never blocks on the page that does not read
		if b := <-fast.ch; b[0] != byte(i) {
			t.Fatalf("fast page got frame %d, want %d", b[0], i)
		}
	}
	if n := h.count(); n != 1 {
		t.Errorf("%d pages left, want the slow one dropped", n)
	}
	n := 0
	for range slow.ch { // closed once dropped, after what it had buffered
		n++
	}
	if n != clientBuffer {
		t.Errorf("slow page got %d frames, want %d", n, clientBuffer)
	}
	h.close()
	if _, ok := <-fast.ch; ok {
		t.Error("close left a stream open")
	}
	if _, _, ok := h.join("late"); ok {
		t.Error("joined a closed hub")
	}
}

// BenchmarkSample: one sample (what the sampler does once a second, a
// page connected or not: history, event log, versions) and, with a page
// connected, its encoding, for three pipelines with retry tiers and a full
// failed list.
func BenchmarkSample(b *testing.B) {
	for _, page := range []bool{false, true} {
		b.Run(fmt.Sprintf("page=%v", page), func(b *testing.B) {
			s := benchServer(b)
			defer s.Close()
			var sm sampler
			b.ReportAllocs()
			t0 := time.Now()
			for i := 0; b.Loop(); i++ {
				f := s.sample(&sm, t0.Add(time.Duration(i)*time.Second))
				if page {
					if _, err := json.Marshal(f); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkPage: the page's first response with an hour of history for
// three pipelines and a full failed list.
func BenchmarkPage(b *testing.B) {
	s := benchServer(b)
	defer s.Close()
	var sm sampler
	t0 := time.Now()
	for i := range fineLen + coarseLen*coarseEvery {
		f := s.sample(&sm, t0.Add(time.Duration(i)*time.Second))
		s.last.Store(&f)
	}
	h := s.Handler(http.NotFoundHandler())
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "http://localhost/dashboard", nil))
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
		n = w.Body.Len()
	}
	b.ReportMetric(float64(n), "bytes/page")
}

func benchServer(b *testing.B) *Server {
	src := &views{}
	for i := range 3 {
		v := twoPipelines().v
		v[0].Name, v[1].Name, v[1].Primary = fmt.Sprint("p", i), fmt.Sprint("p", i, ".retry"), fmt.Sprint("p", i)
		src.v = append(src.v, v...)
	}
	s := New(Config{Source: src, Open: true, Interval: time.Hour})
	for i := range 100 {
		e := failureEvent(i, i%2 == 0)
		e.Value, e.ValueSize = []byte(strings.Repeat("v", 256)), 1000
		e.Headers = []scheduler.EventHeader{{Key: "h", Value: []byte("x")}}
		s.ObserveFailure(e)
	}
	return s
}
