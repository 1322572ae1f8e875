package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/tracing"
)

// Bounds of one read of the trace file for a record's path: its newest
// spans only (the CLI, a separate process, reads up to
// tracing.MaxReadBytes).
const (
	pathMaxSpans = 50_000
	pathMaxBytes = 32 << 20
)

type pathReply struct {
	ID     uint64 `json:"id"`
	Record string `json:"record"`
	Source string `json:"source"` // "trace file" or "host"
	Tree   string `json:"tree"`   // as `wasmstream trace` prints it
	Note   string `json:"note,omitempty"`
	// Pending: the trace file does not hold the record yet (spans are
	// written in batches); the page asks again.
	Pending bool `json:"pending,omitempty"`
}

// traceCatchUp is how long after a failure the trace file may still lack
// its spans before the page stops asking again: the exporter writes in
// batches (every few seconds) and the read is of the file's newest part.
const traceCatchUp = time.Minute

// record serves one failed record's path: from the trace file when
// tracing.exporter is jsonl and it holds the record, else from the host's
// own recent failures of that record.
func (s *Server) record(w http.ResponseWriter, r *http.Request) {
	id, ok := parseID(r.URL.Query().Get("id"))
	if !ok {
		http.Error(w, "id: want the number of an entry of the failed list", http.StatusBadRequest)
		return
	}
	e, same, ok := s.ring.get(id)
	if !ok {
		http.Error(w, "no such entry (the list keeps the newest failures only)", http.StatusNotFound)
		return
	}
	rep := pathReply{ID: id, Record: e.Record}
	if s.cfg.TraceFile != "" {
		select {
		case s.traces <- struct{}{}:
		case <-r.Context().Done():
			return
		}
		spans, err := s.fromTraceFile(e)
		<-s.traces
		if err != nil {
			rep.Note = "trace file: " + err.Error()
		} else if len(spans) > 0 {
			rep.Source = "trace file"
			rep.Tree = render(spans)
		}
	}
	if rep.Tree == "" {
		rep.Source = "host"
		rep.Tree = render(hostSpans(same))
		switch {
		case s.cfg.TraceFile == "":
			rep.Note = "from the host's recent failures of this record (its failed attempts and where each went); with tracing.exporter: jsonl the path has every attempt, call and output"
		case time.Since(time.UnixMilli(e.At)) < traceCatchUp:
			rep.Pending = true
			rep.Note = "the trace file does not hold this record yet (spans are written in batches): asking again; meanwhile, the host's recent failures of it" + suffix(rep.Note)
		default:
			rep.Note = "the trace file's newest part does not hold this record (written over a minute ago, it may be older than the part read): the host's recent failures of it" + suffix(rep.Note)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(rep)
}

func suffix(note string) string {
	if note == "" {
		return ""
	}
	return " (" + note + ")"
}

func render(spans []tracing.Span) string {
	var b strings.Builder
	tracing.Render(&b, spans)
	return b.String()
}

// fromTraceFile reads the record's trace from the newest part of the
// trace file: by its trace id, else by where it was first consumed; when
// that part does not hold it, from the part rotated before it
// (tracing.max_file_bytes: the file may have been rotated since the
// record failed). A missing rotated part is no error.
func (s *Server) fromTraceFile(e Entry) ([]tracing.Span, error) {
	spans, err := s.fromTracePart(s.cfg.TraceFile, e)
	if len(spans) > 0 || err != nil {
		return spans, err
	}
	spans, err = s.fromTracePart(tracing.Part(s.cfg.TraceFile, 1), e)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return spans, err
}

func (s *Server) fromTracePart(path string, e Entry) ([]tracing.Span, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	spans, _, err := tracing.ReadJSONLTail(f, pathMaxSpans, pathMaxBytes)
	if err != nil {
		return nil, err
	}
	id := e.TraceID
	if id == "" {
		ids := tracing.Find(spans, tracing.Query{Topic: e.originKey.topic, Partition: e.originKey.partition, Offset: e.originKey.offset, Pipeline: e.Primary})
		if len(ids) == 0 {
			return nil, nil
		}
		id = ids[0]
	}
	return tracing.Trace(spans, id), nil
}

// hostSpans builds the spans of a record's kept failures, so that
// tracing.Render prints them as `wasmstream trace` prints a trace: each
// failed attempt, and under it the produce to the retry tier or the
// dead-letter topic.
func hostSpans(es []Entry) []tracing.Span {
	var out []tracing.Span
	for _, e := range es {
		tid := e.TraceID
		if tid == "" {
			tid = fmt.Sprintf("host-%d", es[0].ID)
		}
		at := time.UnixMilli(e.At)
		topic, part, off := splitOrigin(e.Consumed)
		outcome, kind := "dead_letter", tracing.ProduceDeadLetter
		if e.Retry {
			outcome, kind = "retry", tracing.ProduceRetry
		}
		a := strconv.Itoa(e.Attempt)
		sid := "attempt-" + a + "-" + strconv.FormatUint(e.ID, 10)
		out = append(out, tracing.Span{TraceID: tid, SpanID: sid, Name: "process " + topic, Kind: "consumer", Start: at, End: at,
			Error: e.Kind + ": " + e.Error, Attrs: map[string]string{
				"wasmstream.attempt": a, "wasmstream.outcome": outcome, "wasmstream.pipeline": e.Pipeline,
				"messaging.destination.partition.id": part, "messaging.kafka.offset": off,
				"wasmstream.origin.topic": e.originKey.topic, "wasmstream.origin.partition": strconv.Itoa(int(e.originKey.partition)),
				"wasmstream.origin.offset": strconv.FormatInt(e.originKey.offset, 10), "messaging.kafka.message.key": e.Key,
			}})
		p := tracing.Span{TraceID: tid, SpanID: sid + "-send", ParentID: sid, Name: "send " + e.Dest, Kind: "producer", Start: at, End: at,
			Attrs: map[string]string{"wasmstream.produce.kind": kind}}
		if e.Retry {
			p.Name += fmt.Sprintf(" (attempt %d due %s)", e.Attempt+1, time.UnixMilli(e.Due).UTC().Format("15:04:05.000"))
		}
		out = append(out, p)
	}
	return out
}

// splitOrigin splits "topic[partition]@offset".
func splitOrigin(s string) (topic, partition, offset string) {
	i := strings.LastIndexByte(s, '[')
	j := strings.LastIndexByte(s, ']')
	if i < 0 || j < i || !strings.HasPrefix(s[j:], "]@") {
		return s, "", ""
	}
	return s[:i], s[i+1 : j], s[j+2:]
}
