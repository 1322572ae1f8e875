package tracing

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wasmstream/wasmstream/internal/termsafe"
)

// Query selects records: by where they were first consumed (topic, and
// partition and offset when >= 0), by key, or by trace id.
type Query struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       string
	TraceID   string
	Pipeline  string // its pipeline (its retry workers included)
}

func (q Query) matches(s *Span) bool {
	if s.Kind != "consumer" {
		return false
	}
	a := s.Attrs
	if q.TraceID != "" && s.TraceID != q.TraceID {
		return false
	}
	if q.Topic != "" && a["wasmstream.origin.topic"] != q.Topic {
		return false
	}
	if q.Partition >= 0 && a["wasmstream.origin.partition"] != strconv.Itoa(int(q.Partition)) {
		return false
	}
	if q.Offset >= 0 && a["wasmstream.origin.offset"] != strconv.FormatInt(q.Offset, 10) {
		return false
	}
	if q.Key != "" && a["messaging.kafka.message.key"] != q.Key {
		return false
	}
	if p := a["wasmstream.pipeline"]; q.Pipeline != "" && p != q.Pipeline && p != q.Pipeline+".retry" {
		return false
	}
	return true
}

// Find returns the ids of the traces with an attempt matching q, newest
// first.
func Find(spans []Span, q Query) []string {
	latest := map[string]time.Time{}
	for i := range spans {
		if q.matches(&spans[i]) {
			if t := spans[i].Start; t.After(latest[spans[i].TraceID]) {
				latest[spans[i].TraceID] = t
			}
		}
	}
	ids := make([]string, 0, len(latest))
	for id := range latest {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return latest[ids[i]].After(latest[ids[j]]) })
	return ids
}

// Trace returns the spans of trace id.
func Trace(spans []Span, id string) []Span {
	var out []Span
	for _, s := range spans {
		if s.TraceID == id {
			out = append(out, s)
		}
	}
	return out
}

// Summary describes one record's trace.
type Summary struct {
	TraceID  string
	Pipeline string
	Record   string // origin topic[partition]@offset
	Key      string
	Attempts int
	Outcome  string // of the last attempt
	Error    string // the last failure
	Start    time.Time
	Duration time.Duration
}

// Summarize describes the records in spans (one per trace), newest first;
// with retried, only those that needed more than one attempt or failed.
func Summarize(spans []Span, retried bool) []Summary {
	by := map[string]*Summary{}
	end := map[string]time.Time{}
	var order []string
	lastAttempt := map[string]int{}
	for _, s := range spans {
		if s.End.After(end[s.TraceID]) {
			end[s.TraceID] = s.End
		}
		if s.Kind != "consumer" || s.Attrs["wasmstream.attempt"] == "" {
			continue
		}
		sm := by[s.TraceID]
		if sm == nil {
			sm = &Summary{TraceID: s.TraceID, Start: s.Start}
			by[s.TraceID] = sm
			order = append(order, s.TraceID)
		}
		if s.Start.Before(sm.Start) {
			sm.Start = s.Start
		}
		sm.Attempts++
		sm.Record = fmt.Sprintf("%s[%s]@%s", s.Attrs["wasmstream.origin.topic"], s.Attrs["wasmstream.origin.partition"], s.Attrs["wasmstream.origin.offset"])
		sm.Key = s.Attrs["messaging.kafka.message.key"]
		if p := strings.TrimSuffix(s.Attrs["wasmstream.pipeline"], ".retry"); p != "" {
			sm.Pipeline = p
		}
		n, _ := strconv.Atoi(s.Attrs["wasmstream.attempt"])
		if n >= lastAttempt[s.TraceID] {
			lastAttempt[s.TraceID] = n
			sm.Outcome = s.Attrs["wasmstream.outcome"]
		}
		if s.Error != "" {
			sm.Error = s.Error
		}
	}
	var out []Summary
	for _, id := range order {
		sm := by[id]
		sm.Duration = end[id].Sub(sm.Start)
		if retried && sm.Attempts < 2 && sm.Error == "" {
			continue
		}
		out = append(out, *sm)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.After(out[j].Start) })
	return out
}

// Bounds of Render: a trace file is input like any other (a hand-edited or
// corrupt one can have a span that is its own ancestor, or two spans sharing
// an id), so what Render prints of it is bounded whatever it holds.
const (
	MaxRenderSpans = 10000 // spans printed of one trace; the rest are counted
	MaxRenderDepth = 64    // nesting levels printed; deeper spans are counted
	maxFieldBytes  = 300   // bytes of one span's description printed
)

// Render writes a trace as a tree: each span with its start relative to the
// trace's first span, its duration, what it did and its error. Each span is
// printed once, under its parent; spans whose parents form a cycle are
// printed after the tree, each cycle from its earliest span. Text from the
// spans is escaped (internal/termsafe).
func Render(w io.Writer, spans []Span) {
	if len(spans) == 0 {
		return
	}
	r, roots, all := newRenderer(w, spans)
	sortByStart(roots)
	renderHeader(w, spans)
	for _, s := range roots {
		r.walk(s, "", true, true, 0)
	}
	// What the roots did not reach hangs off a parent cycle.
	sortByStart(all)
	cycle := false
	for _, s := range all {
		if r.visited[s] {
			continue
		}
		if !cycle {
			cycle = true
			fmt.Fprintln(w, "spans whose parents form a cycle (the file is inconsistent):")
		}
		r.walk(s, "", true, true, 0)
	}
	if r.deep > 0 {
		fmt.Fprintf(w, "… %d more spans not shown (over %d spans or %d levels deep)\n", r.deep, MaxRenderSpans, MaxRenderDepth)
	}
}

// renderer prints a trace's tree for Render: which spans it printed or
// hid, and how many.
type renderer struct {
	w        io.Writer
	t0       time.Time          // the trace's first span's start
	children map[string][]*Span // by their parent's id
	visited  map[*Span]bool     // printed or hidden
	printed  int
	deep     int // hidden, over MaxRenderSpans or MaxRenderDepth
}

// newRenderer returns a renderer of spans, and the spans whose parent is
// not among them (the roots) and all of them.
func newRenderer(w io.Writer, spans []Span) (r *renderer, roots, all []*Span) {
	ids := map[string]bool{}
	for _, s := range spans {
		ids[s.SpanID] = true
	}
	r = &renderer{w: w, t0: spans[0].Start, children: map[string][]*Span{}, visited: make(map[*Span]bool, len(spans))}
	for i := range spans {
		s := &spans[i]
		all = append(all, s)
		if s.Start.Before(r.t0) {
			r.t0 = s.Start
		}
		if s.ParentID != "" && ids[s.ParentID] {
			r.children[s.ParentID] = append(r.children[s.ParentID], s)
		} else {
			roots = append(roots, s)
		}
	}
	return r, roots, all
}

// sortByStart sorts spans by their start, stably.
func sortByStart(ss []*Span) {
	sort.SliceStable(ss, func(i, j int) bool { return ss[i].Start.Before(ss[j].Start) })
}

// renderHeader writes the trace's first line: its record and outcome, or
// its id alone when no span is a record's attempt.
func renderHeader(w io.Writer, spans []Span) {
	sums := Summarize(spans, false)
	if len(sums) == 0 {
		fmt.Fprintf(w, "trace %s\n", field(spans[0].TraceID))
		return
	}
	sm := sums[0]
	fmt.Fprintf(w, "trace %s · pipeline %s · record %s", field(sm.TraceID), field(sm.Pipeline), field(sm.Record))
	if sm.Key != "" {
		fmt.Fprintf(w, " · key %s", field(strconv.Quote(sm.Key)))
	}
	fmt.Fprintf(w, " · %d attempt(s) · outcome %s · %s\n", sm.Attempts, field(sm.Outcome), fmtDur(sm.Duration))
}

// hide marks s and its unvisited descendants visited without printing
// them, and counts them (iteratively: no recursion on the input's shape).
func (r *renderer) hide(s *Span) int {
	n, stack := 0, []*Span{s}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if r.visited[x] {
			continue
		}
		r.visited[x] = true
		n++
		stack = append(stack, r.children[x.SpanID]...)
	}
	return n
}

// walk prints s, unless already visited, and its unvisited descendants by
// their start; past MaxRenderSpans or MaxRenderDepth it hides them.
func (r *renderer) walk(s *Span, prefix string, last, top bool, depth int) {
	if r.visited[s] {
		return
	}
	if r.printed >= MaxRenderSpans || depth >= MaxRenderDepth {
		r.deep += r.hide(s)
		return
	}
	r.visited[s] = true
	r.printed++
	branch, next := "├─ ", "│  "
	if last {
		branch, next = "└─ ", "   "
	}
	if top {
		branch, next = "", ""
	}
	fmt.Fprintf(r.w, "%s%s%s  [+%s, %s]%s\n", prefix, branch, field(describeSpan(s)), fmtDur(s.Start.Sub(r.t0)), fmtDur(s.Duration()), errSuffix(s))
	var kids []*Span
	for _, k := range r.children[s.SpanID] {
		if !r.visited[k] {
			kids = append(kids, k)
		}
	}
	sortByStart(kids)
	for i, k := range kids {
		r.walk(k, prefix+next, i == len(kids)-1, false, depth+1)
	}
}

// field is a span's text as Render prints it: its first line, cut to
// maxFieldBytes, escaped.
func field(s string) string { return termsafe.Line(OneLine(s, maxFieldBytes)) }

func describeSpan(s *Span) string {
	a := s.Attrs
	switch s.Kind {
	case "consumer":
		d := s.Name
		if p := a["messaging.destination.partition.id"]; p != "" {
			d += fmt.Sprintf("[%s]@%s", p, a["messaging.kafka.offset"])
		}
		if n := a["wasmstream.attempt"]; n != "" {
			d += " · attempt " + n
		}
		if o := a["wasmstream.outcome"]; o != "" {
			d += " · " + o
		}
		if id := a["wasmstream.instance.id"]; id != "" {
			d += " · instance " + id
		}
		return d
	case "producer":
		d := s.Name
		if k := a["wasmstream.produce.kind"]; k != "" && k != ProduceOutput {
			d += " (" + strings.ReplaceAll(k, "_", " ") + ")"
		}
		if p := a["messaging.destination.partition.id"]; p != "" {
			d += fmt.Sprintf(" → [%s]@%s", p, a["messaging.kafka.offset"])
		}
		return d
	}
	return s.Name
}

func errSuffix(s *Span) string {
	if s.Error == "" {
		return ""
	}
	return "  ✗ " + termsafe.Line(OneLine(s.Error, 160))
}

// OneLine returns the first line of s, at most n bytes of it.
func OneLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i]) + " …"
	}
	if len(s) > n {
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// Jaeger reads traces from a Jaeger query API (http://host:16686).
type Jaeger struct {
	URL     string
	Service string
	Client  *http.Client
}

type jaegerResp struct {
	Data []struct {
		TraceID string `json:"traceID"`
		Spans   []struct {
			TraceID       string `json:"traceID"`
			SpanID        string `json:"spanID"`
			OperationName string `json:"operationName"`
			References    []struct {
				RefType string `json:"refType"`
				SpanID  string `json:"spanID"`
			} `json:"references"`
			StartTime int64 `json:"startTime"` // µs
			Duration  int64 `json:"duration"`  // µs
			Tags      []struct {
				Key   string `json:"key"`
				Value any    `json:"value"`
			} `json:"tags"`
			ProcessID string `json:"processID"`
		} `json:"spans"`
		Processes map[string]struct {
			ServiceName string `json:"serviceName"`
		} `json:"processes"`
	} `json:"data"`
	Errors []struct {
		Msg string `json:"msg"`
	} `json:"errors"`
}

func (j *Jaeger) get(path string, q url.Values) ([]Span, error) {
	cl := j.Client
	if cl == nil {
		cl = &http.Client{Timeout: 30 * time.Second}
	}
	u := strings.TrimSuffix(j.URL, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	resp, err := cl.Get(u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s: %.300s", u, resp.Status, body)
	}
	var jr jaegerResp
	if err := json.Unmarshal(body, &jr); err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	if len(jr.Errors) > 0 {
		return nil, fmt.Errorf("%s: %s", u, jr.Errors[0].Msg)
	}
	var out []Span
	for _, t := range jr.Data {
		for _, js := range t.Spans {
			s := Span{TraceID: js.TraceID, SpanID: js.SpanID, Name: js.OperationName,
				Start: time.UnixMicro(js.StartTime).UTC(), Attrs: map[string]string{}, Kind: "internal",
				Service: t.Processes[js.ProcessID].ServiceName}
			s.End = s.Start.Add(time.Duration(js.Duration) * time.Microsecond)
			for _, r := range js.References {
				if r.RefType == "CHILD_OF" {
					s.ParentID = r.SpanID
				}
			}
			failed := false
			for _, tg := range js.Tags {
				v := fmt.Sprint(tg.Value)
				if f, ok := tg.Value.(float64); ok {
					v = strconv.FormatFloat(f, 'f', -1, 64)
				}
				switch tg.Key {
				case "span.kind":
					s.Kind = v
				case "error":
					failed = v == "true"
				case "otel.status_description":
					s.Error = v
				default:
					s.Attrs[tg.Key] = v
				}
			}
			if failed && s.Error == "" {
				s.Error = "error"
			}
			if !failed && tg(js.Tags, "otel.status_code") != "ERROR" {
				s.Error = ""
			}
			out = append(out, s)
		}
	}
	return out, nil
}

func tg(tags []struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}, key string) string {
	for _, t := range tags {
		if t.Key == key {
			return fmt.Sprint(t.Value)
		}
	}
	return ""
}

// Trace fetches one trace.
func (j *Jaeger) Trace(id string) ([]Span, error) { return j.get("/api/traces/"+id, nil) }

// Search fetches recent traces of the service, of the last lookback,
// matching tags (Jaeger tag search).
func (j *Jaeger) Search(tags map[string]string, lookback time.Duration, limit int) ([]Span, error) {
	q := url.Values{"service": {j.Service}, "limit": {strconv.Itoa(limit)}, "lookback": {lookback.String()}}
	if len(tags) > 0 {
		b, _ := json.Marshal(tags)
		q.Set("tags", string(b))
	}
	return j.get("/api/traces", q)
}
