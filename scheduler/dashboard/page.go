package dashboard

import (
	"bytes"
	"embed"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The page's first response carries the newest sample, rendered on the
// server (html/template escapes every value), and the same sample with the
// pipelines' history as JSON for the page's script: the page shows data
// before its event stream sends a frame, and a page whose script does not
// run (or whose stream is blocked) still shows the host's state as of its
// loading. RATIONALE.md, "The dashboard", says why.

//go:embed templates/page.html
var templates embed.FS

var pageTmpl = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"iso":   isoMilli,
	"short": short,
	// reject: the module rejected the record on purpose (guest.fail).
	"reject": func(e Entry) bool { return e.Kind == KindReject && !e.Retry },
	// canaryParts: the partitions the canary runs, as topic[p].
	"canaryParts": func(ps []partitionFrame) []string {
		var out []string
		for _, p := range ps {
			if p.Canary {
				out = append(out, p.Topic+"["+itoa(int64(p.Partition))+"]")
			}
		}
		return out
	},
	"num": func(f float64) string {
		if f >= 100 {
			return strconv.FormatFloat(f, 'f', 0, 64)
		}
		return strconv.FormatFloat(f, 'f', 1, 64)
	},
}).ParseFS(templates, "templates/page.html"))

// initial is the JSON the page's script starts from.
type initial struct {
	Frame   *frame                 `json:"frame"`
	History map[string]seriesFrame `json:"history"`
}

// filter selects failed entries: each non-empty field a case-insensitive
// substring of the entry's pipeline, kind or key.
type filter struct {
	Pipeline, Kind, Key string
}

func (f filter) any() bool { return f.Pipeline != "" || f.Kind != "" || f.Key != "" }

func (f filter) match(e *Entry) bool {
	has := func(s, sub string) bool {
		return sub == "" || strings.Contains(strings.ToLower(s), strings.ToLower(sub))
	}
	return has(e.Primary, f.Pipeline) && has(e.Kind, f.Kind) && has(e.Key, f.Key)
}

// maxRenders bounds the pages rendered at once: a render with an hour of
// history takes milliseconds and a few hundred kilobytes (BenchmarkPage),
// so a client reloading in a loop waits its turn instead of taking the
// host's cores.
const maxRenders = 2

// maxFilterBytes bounds each filter field read from the query.
const maxFilterBytes = 128

type pageData struct {
	F         *frame
	Initial   initial
	Failed    []Entry
	Filter    filter
	Filtered  bool
	Kept      int
	MaxEvents int
}

// page serves GET /dashboard: the newest sample rendered, the filter of
// the failed list taken from the query (pipeline, kind, key).
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	select {
	case s.renders <- struct{}{}:
		defer func() { <-s.renders }()
	case <-r.Context().Done():
		return
	}
	f := s.last.Load()
	if f == nil { // before the first tick: an empty sample
		f = &frame{At: time.Now().UnixMilli(), Started: s.started.UnixMilli(), Pipelines: []pipelineFrame{}, Failed: []Entry{}, Versions: []versionFrame{}, Events: []Event{}}
	}
	q := r.URL.Query()
	fl := filter{Pipeline: cut(q.Get("pipeline"), maxFilterBytes), Kind: cut(q.Get("kind"), maxFilterBytes), Key: cut(q.Get("key"), maxFilterBytes)}
	d := pageData{F: f, Initial: initial{Frame: f, History: s.hist.frames()}, Filter: fl, Filtered: fl.any(), Kept: s.cfg.Failed, MaxEvents: maxEvents}
	for i := range f.Failed {
		if fl.match(&f.Failed[i]) {
			d.Failed = append(d.Failed, f.Failed[i])
		}
	}
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, &d); err != nil {
		s.cfg.Log.Error("dashboard: rendering the page", "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b.Bytes())
}

// isoMilli is a Unix ms time as ISO 8601 in UTC, to the millisecond.
func isoMilli(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
