package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/internal/termsafe"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tracing"
)

const traceUsage = `Usage:
  wasmstream trace [source] --topic T [--partition P] [--offset O]
  wasmstream trace [source] --key K
  wasmstream trace [source] --trace-id ID
  wasmstream trace [source] --retried
  (any of them with --pipeline NAME)

Prints one record's path through wasmstream as a tree — every attempt, the
guest calls and asynchronous operations inside it, the retry and dead-letter
produces between attempts, and the outputs — with each step's start, duration
and error. A record is found by where it was first consumed (its topic,
partition and offset, also on retry topics), by key, or by trace id (the
traceparent header of an output or a dead letter). --retried lists recent
records that needed retries or failed.

Source (default: the JSON-lines file of --config's tracing.file):
  --file F          a JSON-lines file written by tracing.exporter: jsonl
  --jaeger URL      a Jaeger query API, e.g. http://127.0.0.1:16686
  --service NAME    the service name in Jaeger (default wasmstream)
  --lookback D      how far back to search Jaeger (default 1h)

Flags:
`

// traceCmd is `wasmstream trace`'s flags and the query they make.
type traceCmd struct {
	cfgPath, file, jaeger, service string
	lookback                       time.Duration
	topic, key, traceID, pipeline  string
	partition, limit               int
	offset                         int64
	retried                        bool
	q                              tracing.Query
}

func cmdTrace(args []string, stdout, stderr io.Writer) int {
	c := &traceCmd{}
	if code := c.parse(args, stderr); code >= 0 {
		return code
	}
	if code := c.validate(stderr); code >= 0 {
		return code
	}
	var spans []tracing.Span
	var code int
	if c.jaeger != "" {
		spans, code = c.readJaeger(stderr)
	} else {
		spans, code = c.readFile(stderr)
	}
	if code >= 0 {
		return code
	}
	if c.retried {
		return c.printRetried(stdout, spans)
	}
	return c.printTrace(stdout, stderr, spans)
}

// parse reads the flags into c; it returns the exit code when they do not
// parse, else -1.
func (c *traceCmd) parse(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.cfgPath, "config", config.DefaultFile, "config file whose tracing.file to read")
	fs.StringVar(&c.file, "file", "", "JSON-lines span file")
	fs.StringVar(&c.jaeger, "jaeger", "", "Jaeger query API URL")
	fs.StringVar(&c.service, "service", config.Defaults().Tracing.ServiceName, "service name in Jaeger")
	fs.DurationVar(&c.lookback, "lookback", time.Hour, "how far back to search Jaeger")
	fs.StringVar(&c.topic, "topic", "", "topic the record was first consumed from")
	fs.IntVar(&c.partition, "partition", -1, "its partition")
	fs.Int64Var(&c.offset, "offset", -1, "its offset")
	fs.StringVar(&c.key, "key", "", "record key")
	fs.StringVar(&c.traceID, "trace-id", "", "trace id (32 hex digits)")
	fs.BoolVar(&c.retried, "retried", false, "list recent records that needed retries or failed")
	fs.IntVar(&c.limit, "limit", 20, "at most this many records listed or matched")
	fs.StringVar(&c.pipeline, "pipeline", "", "only records of this pipeline")
	fs.Usage = func() { fmt.Fprint(stderr, traceUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "wasmstream trace: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	return -1
}

// validate checks that the flags name exactly one way to find records and
// builds the query; it returns the exit code when they do not, else -1.
func (c *traceCmd) validate(stderr io.Writer) int {
	c.q = tracing.Query{Topic: c.topic, Partition: int32(c.partition), Offset: c.offset, Key: c.key, TraceID: strings.ToLower(c.traceID), Pipeline: c.pipeline}
	n := 0
	for _, set := range []bool{c.topic != "", c.key != "", c.traceID != "", c.retried} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		fmt.Fprintln(stderr, "wasmstream trace: say which record: --topic (with --partition, --offset), --key, --trace-id, or --retried")
		return 2
	case n > 1 && (c.retried || c.traceID != ""):
		fmt.Fprintln(stderr, "wasmstream trace: --retried and --trace-id do not combine with other selectors")
		return 2
	case (c.partition >= 0 || c.offset >= 0) && c.topic == "":
		fmt.Fprintln(stderr, "wasmstream trace: --partition and --offset need --topic")
		return 2
	case c.traceID != "" && !isHex(c.q.TraceID, 32):
		fmt.Fprintf(stderr, "wasmstream trace: --trace-id %q: want 32 hex digits\n", c.traceID)
		return 2
	}
	return -1
}

// readJaeger fetches the spans of the matching traces from Jaeger's query
// API; it returns the exit code when that fails, else -1.
func (c *traceCmd) readJaeger(stderr io.Writer) ([]tracing.Span, int) {
	j := &tracing.Jaeger{URL: c.jaeger, Service: c.service}
	var spans []tracing.Span
	var err error
	switch {
	case c.q.TraceID != "":
		spans, err = j.Trace(c.q.TraceID)
	case c.retried:
		spans, err = j.Search(map[string]string{"wasmstream.attempt": "2"}, c.lookback, c.limit)
	default:
		spans, err = c.searchJaeger(j)
	}
	if err != nil {
		fmt.Fprintf(stderr, "wasmstream trace: jaeger: %s\n", termsafe.Line(err.Error()))
		return nil, 1
	}
	return spans, -1
}

// searchJaeger searches Jaeger by the record's origin and key, then fetches
// each matching trace whole (a search result may be partial).
func (c *traceCmd) searchJaeger(j *tracing.Jaeger) ([]tracing.Span, error) {
	q := c.q
	tags := map[string]string{}
	if q.Topic != "" {
		tags["wasmstream.origin.topic"] = q.Topic
	}
	if q.Partition >= 0 {
		tags["wasmstream.origin.partition"] = strconv.Itoa(int(q.Partition))
	}
	if q.Offset >= 0 {
		tags["wasmstream.origin.offset"] = strconv.FormatInt(q.Offset, 10)
	}
	if q.Key != "" {
		tags["messaging.kafka.message.key"] = q.Key
	}
	spans, err := j.Search(tags, c.lookback, c.limit)
	if err != nil {
		return spans, err
	}
	var whole []tracing.Span
	for _, id := range tracing.Find(spans, q) {
		t, err := j.Trace(id)
		if err != nil {
			return whole, err
		}
		whole = append(whole, t...)
	}
	return whole, nil
}

// readFile reads the newest spans of the JSON-lines file, --file or the
// config's tracing.file, with its rotated parts; it returns the exit code when that fails, else -1.
func (c *traceCmd) readFile(stderr io.Writer) ([]tracing.Span, int) {
	path := c.file
	if path == "" {
		cfg, err := config.Load(c.cfgPath, os.Environ(), nil)
		if err != nil {
			printErr(stderr, "wasmstream trace: no --file given and "+termsafe.Line(c.cfgPath)+" does not say", err)
			return nil, 2
		}
		if cfg.Tracing.Exporter != "jsonl" {
			fmt.Fprintf(stderr, "wasmstream trace: %s has tracing.exporter %q, not jsonl: give --file or --jaeger\n", c.cfgPath, cfg.Tracing.Exporter)
			return nil, 2
		}
		path = cfg.TracingFile()
	}
	// The file and its rotated parts (tracing.max_files), oldest first.
	f, err := tracing.OpenJSONL(path)
	if err != nil {
		printErr(stderr, "wasmstream trace", err)
		return nil, 1
	}
	spans, skipped, err := tracing.ReadJSONLTail(f, tracing.MaxReadSpans, tracing.MaxReadBytes)
	f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "wasmstream trace: %s: %s\n", path, termsafe.Line(err.Error()))
		return nil, 1
	}
	if skipped > 0 {
		fmt.Fprintf(stderr, "wasmstream trace: %s: read its newest %d spans; %d older ones were left out\n", path, len(spans), skipped)
	}
	return spans, -1
}

// printRetried lists the records that needed retries or failed, one line
// each, at most --limit of --pipeline's.
func (c *traceCmd) printRetried(stdout io.Writer, spans []tracing.Span) int {
	sums := tracing.Summarize(spans, true)
	if c.pipeline != "" {
		// Filter before counting: --limit is of the pipeline's records.
		kept := sums[:0]
		for _, s := range sums {
			if s.Pipeline == c.pipeline {
				kept = append(kept, s)
			}
		}
		sums = kept
	}
	if len(sums) == 0 {
		fmt.Fprintln(stdout, "no traced record needed a retry")
		return 0
	}
	for i, s := range sums {
		if i == c.limit {
			fmt.Fprintf(stdout, "… %d more (--limit)\n", len(sums)-i)
			break
		}
		// Every field came from the traces: escaped (termsafe).
		line := fmt.Sprintf("%s  %s  %-10s %s  attempts %d  %s", s.Start.Local().Format("15:04:05.000"),
			termsafe.Line(s.TraceID), termsafe.Line(s.Pipeline), termsafe.Line(s.Record), s.Attempts, termsafe.Line(s.Outcome))
		if s.Key != "" {
			line += fmt.Sprintf("  key %q", s.Key)
		}
		if s.Error != "" {
			line += "  last error: " + termsafe.Line(tracing.OneLine(s.Error, 100))
		}
		fmt.Fprintln(stdout, line)
	}
	return 0
}

// printTrace renders the newest matching record's trace as a tree and
// names the other matching traces.
func (c *traceCmd) printTrace(stdout, stderr io.Writer, spans []tracing.Span) int {
	q := c.q
	ids := tracing.Find(spans, q)
	if q.TraceID != "" && len(ids) == 0 && len(tracing.Trace(spans, q.TraceID)) > 0 {
		ids = []string{q.TraceID}
	}
	if len(ids) == 0 {
		fmt.Fprintln(stderr, "wasmstream trace: no traced record matches (healthy records are traced at tracing.sample_ratio)")
		return 1
	}
	tracing.Render(stdout, tracing.Trace(spans, ids[0]))
	if len(ids) > 1 {
		fmt.Fprintf(stdout, "\n%d more traces match, newest first: %s\n", len(ids)-1, termsafe.Line(strings.Join(ids[1:max(1, min(len(ids), c.limit))], " ")))
	}
	return 0
}

func isHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}
