package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/conformance"
	"github.com/wasmstream/wasmstream/internal/termsafe"
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tracing"
)

const testUsage = `Usage:
  wasmstream test [--config F [--pipeline NAME]] MODULE.wasm --record VALUE [--key K] [--header k=v]... [--attempt N]
  wasmstream test [--config F [--pipeline NAME]] MODULE.wasm --file vectors.jsonl

Runs the module in the host, in this process (no Kafka), on your records,
one after another on one instance as a pipeline's worker would, with the
pipeline's limits, environment, state and asynchronous operations when
--config names one (else the defaults). HTTP requests are answered from the
records' "http" lists in the vectors file (a request without an answer is
refused, and the guest reads why), or by the real service when the config
grants its host in async.http.allow_hosts. State, if the pipeline has it,
starts empty and carries from record to record.

Prints each record's outcome (ok, drop, retry or fail, with the fault kind
and message), its outputs, state writes and HTTP requests, and its trace
(the guest calls and operations, with times). A vectors file gives records
as JSON lines, each with an optional "expect" (README.md, "Testing a
processor on your own records"):

  {"key": "k", "value": "hello", "headers": {"h": "v"}, "attempt": 1,
   "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "HELLO"}]}}

Exit status: 0 when every expectation holds, 1 when one does not (with the
difference), 2 for a module that does not load or a bad vectors file or flag.

Flags:
`

// listFlag collects a repeatable flag's values (--record, --header, --env).
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func cmdTest(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "", "config file whose pipeline's limits, env, state and async settings to run under (default: the defaults)")
	pipeline := fs.String("pipeline", "", "the config's pipeline (default: the one whose module is MODULE, or the only one)")
	file := fs.String("file", "", "vectors file: JSON lines, one record each, with optional expectations")
	var records, headers, env listFlag
	fs.Var(&records, "record", "a record's value, as given (repeatable)")
	key := fs.String("key", "", "the --record records' key (default: null)")
	fs.Var(&headers, "header", "a header of the --record records, k=v (repeatable)")
	fs.Var(&env, "env", "an environment variable of the module, K=V (repeatable; over the config's env)")
	attempt := fs.Int("attempt", 1, "the --record records' attempt number")
	topic := fs.String("topic", "", "the records' topic where the vectors do not say (default: the pipeline's first input, or \"in\")")
	asJSON := fs.Bool("json", false, "print one JSON document instead of text")
	fs.Usage = func() {
		fmt.Fprint(stderr, testUsage)
		fs.PrintDefaults()
	}
	// Flags may follow the module's path.
	var positional []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(positional) != 1 || (*file == "" && len(records) == 0) {
		fs.Usage()
		return 2
	}
	modPath := positional[0]
	bad := func(err error) int {
		printErr(stderr, "wasmstream test", err)
		return 2
	}
	keySet := false
	fs.Visit(func(f *flag.Flag) { keySet = keySet || f.Name == "key" })
	if *attempt < 1 {
		return bad(fmt.Errorf("--attempt %d: want 1 or more", *attempt))
	}
	cfg, pc, err := testPipeline(*cfgPath, *pipeline, modPath)
	if err != nil {
		return bad(err)
	}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return bad(fmt.Errorf("--env %q: want K=V", kv))
		}
		if pc.Env == nil {
			pc.Env = map[string]string{}
		}
		pc.Env[k] = v
	}
	defTopic := "in"
	if len(pc.Inputs) > 0 {
		defTopic = pc.Inputs[0]
	}
	if *topic != "" {
		defTopic = *topic
	}
	var cases []conformance.Case
	if *file != "" {
		if cases, err = conformance.ReadCases(*file); err != nil {
			return bad(err)
		}
		for i := range cases {
			if cases[i].Record.Topic == "" {
				cases[i].Record.Topic = defTopic
			}
		}
	}
	var hs []abi.Header
	for _, h := range headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok {
			return bad(fmt.Errorf("--header %q: want k=v", h))
		}
		hs = append(hs, abi.Header{Key: k, Value: []byte(v)})
	}
	for i, v := range records {
		c := conformance.Case{Name: fmt.Sprintf("--record %d", i+1), Record: abi.Record{Topic: defTopic, Offset: int64(len(cases)), Value: []byte(v), Headers: hs, Attempt: uint32(*attempt)}}
		if keySet {
			c.Record.Key = []byte(*key)
		}
		cases = append(cases, c)
	}
	wasm, err := os.ReadFile(modPath)
	if err != nil {
		return bad(err)
	}

	ctx := context.Background()
	// Guest log lines go to stderr, quoted by the text handler. Compiled
	// modules are kept as the host keeps them (host.compile_cache_dir), so
	// that a second run of the same module starts at once.
	e, err := scheduler.NewEngine(cfg, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		return bad(err)
	}
	defer e.Close(ctx)
	var traceBuf lockedBuffer
	tr := tracing.NewWriter(&traceBuf, tracing.Config{ServiceName: "wasmstream-test", SampleRatio: 1})
	mc := scheduler.ModuleConfig(pc, attemptObserver{})
	runner := &conformance.CaseRunner{Engine: e}
	fakeHTTP := len(pc.Async.HTTP.AllowHosts) == 0
	if fakeHTTP {
		runner.Fake = &conformance.FakeHTTP{}
		mc.Async.Operations = map[abi.OpKind]host.Operation{abi.OpHTTP: runner.Fake}
	}
	m, err := e.Load(ctx, wasm, mc)
	if err != nil {
		tr.Shutdown(ctx)
		return bad(fmt.Errorf("%s: %w", modPath, err))
	}
	defer m.Close(ctx)
	runner.Module = m
	if pc.State.Enabled {
		ls, err := scheduler.OpenLocalState(pc)
		if err != nil {
			tr.Shutdown(ctx)
			return bad(err)
		}
		defer ls.Close()
		runner.State, runner.Keep = ls.Begin, ls.Commit
	}
	results := make([]testResult, len(cases))
	for i := range cases {
		c := &cases[i]
		a := tr.Begin(tracing.Info{Pipeline: pc.Name, Module: filepath.Base(modPath), ModuleDigest: m.Info().Digest,
			Topic: c.Record.Topic, Partition: c.Record.Partition, Offset: c.Record.Offset, Key: c.Record.Key, Attempt: int(c.Record.Attempt),
			OriginTopic: c.Record.Topic, OriginPartition: c.Record.Partition, OriginOffset: c.Record.Offset}, recordHeaders(c.Record.Headers))
		res, err := runner.Run(ctx, c, a)
		if err != nil {
			runner.Close(ctx)
			tr.Shutdown(ctx)
			return bad(fmt.Errorf("%s: %w", modPath, err))
		}
		a.SetInstance(res.Instance)
		a.Decide(true) // every record is traced
		kind := ""
		switch {
		case res.Fault != "":
			kind = "fault." + string(res.Fault)
		case res.Outcome == conformance.OutcomeRetry:
			kind = scheduler.KindGuestRetry
		case res.Outcome == conformance.OutcomeFail:
			kind = scheduler.KindGuestFail
		}
		a.End(map[string]string{"ok": "ok", "drop": "ok", "retry": "retry", "fail": "dead_letter"}[res.Outcome], kind, res.Message)
		results[i] = testResult{c: c, res: res, traceID: a.TraceID()}
		if c.Expect != nil {
			results[i].checked = true
			results[i].diff = c.Expect.Check(res.Decision)
		}
	}
	runner.Close(ctx)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	tr.Shutdown(sctx)
	cancel()
	spans, _ := tracing.ReadJSONL(bytes.NewReader(traceBuf.Bytes()))
	for i := range results {
		results[i].spans = tracing.Trace(spans, results[i].traceID)
	}
	failed := 0
	for _, r := range results {
		if len(r.diff) > 0 {
			failed++
		}
	}
	if *asJSON {
		writeTestJSON(stdout, pc, results, failed)
	} else {
		writeTestText(stdout, pc, results, failed)
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// testPipeline is the pipeline MODULE runs as: the config's (named, or the
// one whose module is MODULE, or its only one), or the defaults.
func testPipeline(cfgPath, name, modPath string) (*config.Config, *config.Pipeline, error) {
	if cfgPath == "" {
		if name != "" {
			return nil, nil, errors.New("--pipeline needs --config")
		}
		cfg := config.Defaults()
		pc := config.PipelineDefaults()
		pc.Name, pc.Inputs = "test", []string{"in"}
		return &cfg, &pc, nil
	}
	cfg, err := config.Load(cfgPath, os.Environ(), nil)
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for i := range cfg.Pipelines {
		names = append(names, cfg.Pipelines[i].Name)
		if name != "" && cfg.Pipelines[i].Name == name {
			return cfg, &cfg.Pipelines[i], nil
		}
	}
	if name != "" {
		return nil, nil, fmt.Errorf("--pipeline %q: %s has %s", name, cfgPath, strings.Join(names, ", "))
	}
	if len(cfg.Pipelines) == 1 {
		return cfg, &cfg.Pipelines[0], nil
	}
	abs, _ := filepath.Abs(modPath)
	for i := range cfg.Pipelines {
		if pa, _ := filepath.Abs(cfg.ModulePath(&cfg.Pipelines[i])); pa == abs {
			return cfg, &cfg.Pipelines[i], nil
		}
	}
	return nil, nil, fmt.Errorf("%s has %d pipelines and none runs %s: name one with --pipeline (%s)", cfgPath, len(cfg.Pipelines), modPath, strings.Join(names, ", "))
}

// attemptObserver hands the guest's calls and operations to the record's
// trace (the tag given to Process is its *tracing.Attempt).
type attemptObserver struct{}

func (attemptObserver) GuestCall(tag any, export string, start time.Time, d time.Duration, err error) {
	if a, ok := tag.(*tracing.Attempt); ok {
		a.Call(export, start, d, err)
	}
}

func (attemptObserver) AsyncOp(tag any, kind abi.OpKind, desc string, start time.Time, d time.Duration, outcome string) {
	if a, ok := tag.(*tracing.Attempt); ok {
		a.Op(kind.String(), desc, start, d, outcome)
	}
}

func recordHeaders(hs []abi.Header) tracing.Headers {
	return tracing.HeaderFunc(func(k string) []byte {
		var v []byte
		for _, h := range hs {
			if h.Key == k {
				v = h.Value
			}
		}
		return v
	})
}

// lockedBuffer is the tracer's output, written from its goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf.Bytes())
}

type testResult struct {
	c       *conformance.Case
	res     conformance.CaseResult
	traceID string
	spans   []tracing.Span
	checked bool
	diff    []string
}

// show is a key, value or header value for the terminal: null, or quoted
// (escaped by strconv, then by termsafe), cut past 500 bytes.
func show(b []byte) string {
	if b == nil {
		return "null"
	}
	s := string(b)
	more := ""
	if len(s) > 500 {
		s, more = s[:500], fmt.Sprintf("…(%d bytes)", len(b))
	}
	return termsafe.Line(strconv.Quote(s)) + more
}

func showHeaders(hs []abi.Header) string {
	var b strings.Builder
	for i, h := range hs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(termsafe.Line(strconv.Quote(h.Key)))
		b.WriteString("=")
		b.WriteString(show(h.Value))
	}
	return b.String()
}

func outputTopic(pc *config.Pipeline, t string) string {
	if t != "" {
		return termsafe.Line(t)
	}
	if pc.Output != "" {
		return termsafe.Line(pc.Output) + " (the pipeline's output)"
	}
	return "(the pipeline's output)"
}

func writeTestText(w io.Writer, pc *config.Pipeline, results []testResult, failed int) {
	counts := map[string]int{}
	checked := 0
	for _, r := range results {
		c, res := r.c, r.res
		counts[res.Outcome]++
		where := ""
		if c.Line > 0 && c.Name != fmt.Sprintf("line %d", c.Line) {
			where = fmt.Sprintf(" (line %d)", c.Line)
		}
		fmt.Fprintf(w, "── %s%s: key %s value %s", termsafe.Line(c.Name), where, show(c.Record.Key), show(c.Record.Value))
		if len(c.Record.Headers) > 0 {
			fmt.Fprintf(w, " headers %s", showHeaders(c.Record.Headers))
		}
		if c.Record.Attempt > 1 {
			fmt.Fprintf(w, " attempt %d", c.Record.Attempt)
		}
		fmt.Fprintln(w)
		if res.NewInstance {
			fmt.Fprintln(w, "  (on a new instance: the previous one faulted)")
		}
		switch res.Outcome {
		case conformance.OutcomeOK:
			fmt.Fprintf(w, "  ok: %d output(s)\n", len(res.Outputs))
		case conformance.OutcomeDrop:
			fmt.Fprintln(w, "  ok: dropped (no output)")
		default:
			kind := "reported by the guest"
			if res.Fault != "" {
				kind = string(res.Fault) + " fault"
			}
			fmt.Fprintf(w, "  %s (%s): %s\n", res.Outcome, kind, termsafe.Text(res.Message, "    "))
		}
		for i, o := range res.Outputs {
			fmt.Fprintf(w, "  → output %d to %s: key %s value %s", i, outputTopic(pc, o.Topic), show(o.Key), show(o.Value))
			if o.Partition >= 0 {
				fmt.Fprintf(w, " partition %d", o.Partition)
			}
			if len(o.Headers) > 0 {
				fmt.Fprintf(w, " headers %s", showHeaders(o.Headers))
			}
			fmt.Fprintln(w)
		}
		for _, s := range res.Changelog {
			fmt.Fprintf(w, "  state: %s = %s\n", show(s.Key), show(s.Value))
		}
		for _, q := range res.Requests { // the fake's: real requests are in the trace
			fmt.Fprintf(w, "  http: %s (answered from the vectors)\n", termsafe.Line(q))
		}
		if len(r.spans) > 0 {
			var sb strings.Builder
			tracing.Render(&sb, r.spans)
			fmt.Fprintf(w, "  trace:\n    %s\n", strings.TrimSuffix(strings.ReplaceAll(sb.String(), "\n", "\n    "), "\n    "))
		}
		if r.checked {
			checked++
			if len(r.diff) == 0 {
				fmt.Fprintln(w, "  expect: PASS")
			} else {
				fmt.Fprintln(w, "  expect: FAIL")
				for _, d := range r.diff {
					fmt.Fprintf(w, "    %s\n", termsafe.Line(d))
				}
			}
		}
	}
	fmt.Fprintf(w, "%d record(s): %d ok, %d dropped, %d retry, %d fail", len(results), counts["ok"], counts["drop"], counts["retry"], counts["fail"])
	if checked > 0 {
		fmt.Fprintf(w, "; expectations: %d passed, %d failed", checked-failed, failed)
	}
	fmt.Fprintln(w)
}

// jsonBytes puts b in m as name (text) or name_base64 (not UTF-8), or null.
func jsonBytes(m map[string]any, name string, b []byte) {
	switch {
	case b == nil:
		m[name] = nil
	case utf8.Valid(b):
		m[name] = string(b)
	default:
		m[name+"_base64"] = base64.StdEncoding.EncodeToString(b)
	}
}

func jsonHeaders(hs []abi.Header) []map[string]any {
	out := []map[string]any{}
	for _, h := range hs {
		m := map[string]any{"key": h.Key}
		jsonBytes(m, "value", h.Value)
		out = append(out, m)
	}
	return out
}

func writeTestJSON(w io.Writer, pc *config.Pipeline, results []testResult, failed int) {
	var recs []map[string]any
	for _, r := range results {
		m := map[string]any{"name": r.c.Name, "outcome": r.res.Outcome}
		if r.c.Line > 0 {
			m["line"] = r.c.Line
		}
		if r.res.Fault != "" {
			m["fault"] = string(r.res.Fault)
		}
		if r.res.Message != "" {
			m["error"] = r.res.Message
		}
		outs := []map[string]any{}
		for _, o := range r.res.Outputs {
			om := map[string]any{"topic": o.Topic, "partition": o.Partition, "headers": jsonHeaders(o.Headers)}
			if o.Topic == "" {
				om["topic"] = pc.Output
			}
			jsonBytes(om, "key", o.Key)
			jsonBytes(om, "value", o.Value)
			outs = append(outs, om)
		}
		m["outputs"] = outs
		if len(r.res.Changelog) > 0 {
			var st []map[string]any
			for _, s := range r.res.Changelog {
				sm := map[string]any{}
				jsonBytes(sm, "key", s.Key)
				jsonBytes(sm, "value", s.Value)
				st = append(st, sm)
			}
			m["state"] = st
		}
		if len(r.res.Requests) > 0 {
			m["http"] = r.res.Requests
		}
		if r.traceID != "" {
			m["trace_id"] = r.traceID
			m["trace"] = r.spans
		}
		if r.checked {
			m["expect"] = map[string]any{"pass": len(r.diff) == 0, "diff": append([]string{}, r.diff...)}
		}
		recs = append(recs, m)
	}
	b, _ := json.MarshalIndent(map[string]any{"records": recs, "expectations_failed": failed}, "", "  ")
	w.Write(termsafe.JSON(append(b, '\n')))
}
