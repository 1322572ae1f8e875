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

func cmdTrace(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", config.DefaultFile, "config file whose tracing.file to read")
	file := fs.String("file", "", "JSON-lines span file")
	jaeger := fs.String("jaeger", "", "Jaeger query API URL")
	service := fs.String("service", config.Defaults().Tracing.ServiceName, "service name in Jaeger")
	lookback := fs.Duration("lookback", time.Hour, "how far back to search Jaeger")
	topic := fs.String("topic", "", "topic the record was first consumed from")
	partition := fs.Int("partition", -1, "its partition")
	offset := fs.Int64("offset", -1, "its offset")
	key := fs.String("key", "", "record key")
	traceID := fs.String("trace-id", "", "trace id (32 hex digits)")
	retried := fs.Bool("retried", false, "list recent records that needed retries or failed")
	limit := fs.Int("limit", 20, "at most this many records listed or matched")
	pipeline := fs.String("pipeline", "", "only records of this pipeline")
	fs.Usage = func() { fmt.Fprint(stderr, traceUsage); fs.PrintDefaults() }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "wasmstream trace: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	q := tracing.Query{Topic: *topic, Partition: int32(*partition), Offset: *offset, Key: *key, TraceID: strings.ToLower(*traceID), Pipeline: *pipeline}
	n := 0
	for _, set := range []bool{*topic != "", *key != "", *traceID != "", *retried} {
		if set {
			n++
		}
	}
	switch {
	case n == 0:
		fmt.Fprintln(stderr, "wasmstream trace: say which record: --topic (with --partition, --offset), --key, --trace-id, or --retried")
		return 2
	case n > 1 && (*retried || *traceID != ""):
		fmt.Fprintln(stderr, "wasmstream trace: --retried and --trace-id do not combine with other selectors")
		return 2
	case (*partition >= 0 || *offset >= 0) && *topic == "":
		fmt.Fprintln(stderr, "wasmstream trace: --partition and --offset need --topic")
		return 2
	case *traceID != "" && !isHex(q.TraceID, 32):
		fmt.Fprintf(stderr, "wasmstream trace: --trace-id %q: want 32 hex digits\n", *traceID)
		return 2
	}

	var spans []tracing.Span
	var err error
	if *jaeger != "" {
		j := &tracing.Jaeger{URL: *jaeger, Service: *service}
		switch {
		case q.TraceID != "":
			spans, err = j.Trace(q.TraceID)
		case *retried:
			spans, err = j.Search(map[string]string{"wasmstream.attempt": "2"}, *lookback, *limit)
		default:
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
			spans, err = j.Search(tags, *lookback, *limit)
			// A search returns the traces with a matching span; fetch each
			// whole (a search result may be partial).
			if err == nil {
				var whole []tracing.Span
				for _, id := range tracing.Find(spans, q) {
					t, err2 := j.Trace(id)
					if err2 != nil {
						err = err2
						break
					}
					whole = append(whole, t...)
				}
				spans = whole
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "wasmstream trace: jaeger: %s\n", termsafe.Line(err.Error()))
			return 1
		}
	} else {
		path := *file
		if path == "" {
			cfg, err := config.Load(*cfgPath, os.Environ(), nil)
			if err != nil {
				printErr(stderr, "wasmstream trace: no --file given and "+termsafe.Line(*cfgPath)+" does not say", err)
				return 2
			}
			if cfg.Tracing.Exporter != "jsonl" {
				fmt.Fprintf(stderr, "wasmstream trace: %s has tracing.exporter %q, not jsonl: give --file or --jaeger\n", *cfgPath, cfg.Tracing.Exporter)
				return 2
			}
			path = cfg.TracingFile()
		}
		f, err := os.Open(path)
		if err != nil {
			printErr(stderr, "wasmstream trace", err)
			return 1
		}
		var skipped int
		spans, skipped, err = tracing.ReadJSONLTail(f, tracing.MaxReadSpans, tracing.MaxReadBytes)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "wasmstream trace: %s: %s\n", path, termsafe.Line(err.Error()))
			return 1
		}
		if skipped > 0 {
			fmt.Fprintf(stderr, "wasmstream trace: %s: read its newest %d spans; %d older ones were left out\n", path, len(spans), skipped)
		}
	}

	if *retried {
		sums := tracing.Summarize(spans, true)
		if *pipeline != "" {
			// Filter before counting: --limit is of the pipeline's records.
			kept := sums[:0]
			for _, s := range sums {
				if s.Pipeline == *pipeline {
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
			if i == *limit {
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
		fmt.Fprintf(stdout, "\n%d more traces match, newest first: %s\n", len(ids)-1, termsafe.Line(strings.Join(ids[1:max(1, min(len(ids), *limit))], " ")))
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
