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
	"slices"
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
  wasmstream test --config F --schema SUBJECT=FILE... MODULE.wasm --file vectors.jsonl

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

A field left out of a record takes its default: key and value null, no
headers, "offset" the record's index in the file (0, 1, ...), "partition"
0, "timestamp" 0, "attempt" 1, "topic" the pipeline's first input. In an
expected output, a left-out "key" or "value" means null (checked), a
left-out "headers" means not checked, and a left-out "topic" the
pipeline's output; a left-out "outputs" is not checked ([] means none).
An expected JSON object or array that differs is shown field by field
("output 0 value.ID: got 3, want 4").

Stream time (a pipeline with state.enabled; docs/SDK.md, "Stream time in
wasmstream test"): a record's "timestamp" moves the run's stream time, and
the timers due fire after the record. Control lines, not records, move it
between records and touch the state:

  {"advance_to": 120000, "expect": {...}}   to 120000 ms, as a record of that timestamp;
                                             the due timers fire, "expect" checks their outputs
  {"advance": "30s"}                         on by a duration
  {"idle": "45s"}                            45s of wall clock on a caught-up partition under
                                             the pipeline's timers.idle_advance (refused without it)
  {"state": {"put": [{"key": "k", "sub": "s", "value": "v"}], "delete": [{"key": "x"}],
             "timers": [{"key": "k", "at": 2100}]}}    written before the next record
  {"expect_state": {"get": [{"key": "k", "sub": "s", "value": "v"}, {"key": "x", "absent": true}],
                    "timers": [{"key": "k", "at": 2100}]}}   checked here; "timers": every timer set

"sub" makes a two-part key; keys, subs and values are text or JSON, or
key_base64, sub_base64, value_base64 for bytes.

Schema-registry data (docs/SCHEMA-REGISTRY.md): where the pipeline's
input_format is confluent, a record's value (key) is JSON, framed as a
producer's serializer would with the subject of its topic (<topic>-value),
or with the vector's "value_schema" (a .avsc, .proto or .json file) or
"value_subject"; the host's decode path then gives the guest its JSON.
Outputs take the host's encode path (output_format), and an expected
output's JSON is encoded with the same schema and compared as read back.
--schema SUBJECT=FILE serves schema files from a registry in this process,
in place of schema_registry.url: no registry is needed; --registry URL
names a registry instead of the config's.

  wasmstream test --config config.yaml --schema orders-value=order.avsc \
    --schema totals-value=total.avsc proc.wasm --file vectors.jsonl

Exit status: 0 when every expectation holds, 1 when one does not (with the
difference), 2 for a module that does not load or a bad vectors file or flag.

Flags:
`

// listFlag collects a repeatable flag's values (--record, --header, --env).
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// testCmd is `wasmstream test`'s flags and the module it runs.
type testCmd struct {
	fs                                  *flag.FlagSet
	cfgPath, pipeline, file, key, topic string
	records, headers, env               listFlag
	schemas                             schemaFlag
	registry                            string
	attempt                             int
	asJSON                              bool
	keySet                              bool // --key was given (an empty key is not a null one)
	modPath                             string
	stderr                              io.Writer
}

func cmdTest(args []string, stdout, stderr io.Writer) int {
	c := &testCmd{stderr: stderr}
	if code := c.parse(args); code >= 0 {
		return code
	}
	if c.attempt < 1 {
		return c.bad(fmt.Errorf("--attempt %d: want 1 or more", c.attempt))
	}
	cfg, pc, err := testPipeline(c.cfgPath, c.pipeline, c.modPath)
	if err != nil {
		return c.bad(err)
	}
	cases, err := c.cases(pc)
	if err != nil {
		return c.bad(err)
	}
	wasm, err := os.ReadFile(c.modPath)
	if err != nil {
		return c.bad(err)
	}
	ctx := context.Background()
	fr, err := newTestFramer(ctx, cfg, pc, testSources{cfgPath: c.cfgPath, vectors: c.file, registry: c.registry, schemas: &c.schemas, stderr: c.stderr}, cases)
	if err != nil {
		return c.bad(err)
	}
	if fr != nil {
		defer fr.close()
	}
	s := &testSession{modPath: c.modPath, pc: pc, fr: fr}
	defer s.close(ctx)
	if err := s.start(ctx, cfg, wasm, stderr); err != nil {
		return c.bad(err)
	}
	if err := s.checkControls(c.file, cases); err != nil {
		return c.bad(err)
	}
	results, err := s.run(ctx, cases)
	if err != nil {
		return c.bad(err)
	}
	return c.report(stdout, pc, results)
}

// parse reads the flags, which may follow the module's path, into c; it
// returns the exit code when they do not parse or name no module or no
// record, else -1.
func (c *testCmd) parse(args []string) int {
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.fs = fs
	fs.SetOutput(c.stderr)
	fs.StringVar(&c.cfgPath, "config", "", "config file whose pipeline's limits, env, state and async settings to run under (default: the defaults)")
	fs.StringVar(&c.pipeline, "pipeline", "", "the config's pipeline (default: the one whose module is MODULE, or the only one)")
	fs.StringVar(&c.file, "file", "", "vectors file: JSON lines, one record each, with optional expectations")
	fs.Var(&c.records, "record", "a record's value, as given (repeatable)")
	fs.StringVar(&c.key, "key", "", "the --record records' key (default: null)")
	fs.Var(&c.headers, "header", "a header of the --record records, k=v (repeatable)")
	fs.Var(&c.env, "env", "an environment variable of the module, K=V (repeatable; over the config's env)")
	fs.IntVar(&c.attempt, "attempt", 1, "the --record records' attempt number")
	fs.StringVar(&c.topic, "topic", "", "the records' topic where the vectors do not say (default: the pipeline's first input, or \"in\")")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON document instead of text")
	fs.Var(&c.schemas, "schema", schemaFlagUsage)
	fs.StringVar(&c.registry, "registry", "", "the schema registry (its Confluent-compatible API's URL) whose subjects the vectors and the pipeline name, in place of the config's schema_registry.url")
	fs.Usage = func() {
		fmt.Fprint(c.stderr, testUsage)
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
	if len(positional) != 1 || (c.file == "" && len(c.records) == 0) {
		fs.Usage()
		return 2
	}
	c.modPath = positional[0]
	fs.Visit(func(f *flag.Flag) { c.keySet = c.keySet || f.Name == "key" })
	return -1
}

// bad reports a module, vectors file or flag the command cannot use, and
// returns its exit code.
func (c *testCmd) bad(err error) int {
	printErr(c.stderr, "wasmstream test", err)
	return 2
}

// cases sets --env on pc and returns the records to run: the vectors
// file's, then the --record ones, on --topic or pc's first input where they
// name no topic.
func (c *testCmd) cases(pc *config.Pipeline) ([]conformance.Case, error) {
	for _, kv := range c.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--env %q: want K=V", kv)
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
	if c.topic != "" {
		defTopic = c.topic
	}
	var cases []conformance.Case
	if c.file != "" {
		var err error
		if cases, err = conformance.ReadCases(c.file); err != nil {
			return nil, err
		}
		for i := range cases {
			if cases[i].Record.Topic == "" {
				cases[i].Record.Topic = defTopic
			}
		}
	}
	var hs []abi.Header
	for _, h := range c.headers {
		k, v, ok := strings.Cut(h, "=")
		if !ok {
			return nil, fmt.Errorf("--header %q: want k=v", h)
		}
		hs = append(hs, abi.Header{Key: k, Value: []byte(v)})
	}
	records := 0 // a --record's offset follows the vectors' records (control lines take none)
	for i := range cases {
		if cases[i].Control == nil {
			records++
		}
	}
	for i, v := range c.records {
		rc := conformance.Case{Name: fmt.Sprintf("--record %d", i+1), Record: abi.Record{Topic: defTopic, Offset: int64(records + i), Value: []byte(v), Headers: hs, Attempt: uint32(c.attempt)}}
		// With a pipeline that decodes values (input_format), the value
		// is JSON, framed with the topic's subject.
		rc.ValueFrame.JSON = []byte(v)
		if c.keySet {
			rc.Record.Key = []byte(c.key)
			rc.KeyFrame.JSON = []byte(c.key)
		}
		cases = append(cases, rc)
	}
	return cases, nil
}

// report prints the results, as text or JSON, and returns the exit code:
// 1 when an expectation does not hold.
func (c *testCmd) report(stdout io.Writer, pc *config.Pipeline, results []testResult) int {
	failed := 0
	for _, r := range results {
		if len(r.diff) > 0 {
			failed++
		}
	}
	if c.asJSON {
		writeTestJSON(stdout, pc, results, failed)
	} else {
		writeTestText(stdout, pc, results, failed)
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// testSession is the module loaded as pipeline pc's worker would run it,
// every record traced into traceBuf.
type testSession struct {
	modPath  string
	pc       *config.Pipeline
	e        *host.Engine
	m        *host.Module
	ls       *scheduler.LocalState
	traceBuf lockedBuffer
	tr       *tracing.Tracer
	runner   *conformance.CaseRunner
	fr       *testFramer // nil: nothing framed
}

// start makes the engine and the tracer and loads the module, with a fake
// HTTP service where the pipeline grants no host, and its local state.
func (s *testSession) start(ctx context.Context, cfg *config.Config, wasm []byte, stderr io.Writer) error {
	// Guest log lines go to stderr, quoted by the text handler. Compiled
	// modules are kept as the host keeps them (host.compile_cache_dir), so
	// that a second run of the same module starts at once.
	e, err := scheduler.NewEngine(cfg, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		return err
	}
	s.e = e
	s.tr = tracing.NewWriter(&s.traceBuf, tracing.Config{ServiceName: "wasmstream-test", SampleRatio: 1})
	mc := scheduler.ModuleConfig(s.pc, attemptObserver{})
	s.runner = &conformance.CaseRunner{Engine: e}
	fakeHTTP := len(s.pc.Async.HTTP.AllowHosts) == 0
	if fakeHTTP {
		s.runner.Fake = &conformance.FakeHTTP{}
		mc.Async.Operations = map[abi.OpKind]host.Operation{abi.OpHTTP: s.runner.Fake}
	}
	m, err := e.Load(ctx, wasm, mc)
	if err != nil {
		s.tr.Shutdown(ctx)
		return fmt.Errorf("%s: %w", s.modPath, err)
	}
	s.m = m
	s.runner.Module = m
	if s.pc.State.Enabled {
		ls, err := scheduler.OpenLocalState(s.pc)
		if err != nil {
			s.tr.Shutdown(ctx)
			return err
		}
		s.ls = ls
		s.runner.State, s.runner.Keep = ls.Begin, ls.CommitAt
		if m.Info().Timers {
			s.runner.Fire = ls.FireDue // timers fire after the record that made them due
		}
	}
	return nil
}

// run runs the cases one after another, each traced, and returns their
// results with their traces.
func (s *testSession) run(ctx context.Context, cases []conformance.Case) ([]testResult, error) {
	results := make([]testResult, len(cases))
	for i := range cases {
		r, err := s.runCase(ctx, i, &cases[i])
		if err != nil {
			s.runner.Close(ctx)
			s.tr.Shutdown(ctx)
			return nil, fmt.Errorf("%s: %w", s.modPath, err)
		}
		results[i] = r
	}
	s.runner.Close(ctx)
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	s.tr.Shutdown(sctx)
	cancel()
	spans, _ := tracing.ReadJSONL(bytes.NewReader(s.traceBuf.Bytes()))
	for i := range results {
		if results[i].traceID != "" { // a control line has no trace
			results[i].spans = tracing.Trace(spans, results[i].traceID)
		}
	}
	return results, nil
}

// runCase runs case ci as one traced attempt and checks its expectation.
// With a framer, its record takes the host's decode path first (a record
// that does not decode fails without a call, as in the pipeline) and its
// outputs the encode path.
func (s *testSession) runCase(ctx context.Context, ci int, c *conformance.Case) (testResult, error) {
	if c.Control != nil {
		return s.runControl(ctx, ci, c)
	}
	a := s.tr.Begin(tracing.Info{Pipeline: s.pc.Name, Module: filepath.Base(s.modPath), ModuleDigest: s.m.Info().Digest,
		Topic: c.Record.Topic, Partition: c.Record.Partition, Offset: c.Record.Offset, Key: c.Record.Key, Attempt: int(c.Record.Attempt),
		OriginTopic: c.Record.Topic, OriginPartition: c.Record.Partition, OriginOffset: c.Record.Offset}, recordHeaders(c.Record.Headers))
	r := testResult{c: c, in: c.Record}
	decoded := true
	if s.fr != nil {
		in, fp, err := s.fr.decode(ctx, c)
		if err != nil {
			r.kind, decoded = schemaFailed(&r.res, err), false
		} else {
			r.in, r.inFP = in, fp
		}
	}
	if decoded {
		gc := *c
		gc.Record = r.in
		res, err := s.runner.Run(ctx, &gc, a)
		if err != nil {
			return testResult{}, err
		}
		r.res = res
		a.SetInstance(res.Instance)
		r.outs = res.Outputs
		if s.fr != nil && res.Outcome == conformance.OutcomeOK {
			if r.outs, r.outFP, err = s.fr.outputs(ctx, res.Outputs); err != nil {
				r.kind = schemaFailed(&r.res, err)
			}
		}
	}
	a.Decide(true) // every record is traced
	kind := r.kind
	switch {
	case kind != "":
	case r.res.Fault != "":
		kind = "fault." + string(r.res.Fault)
	case r.res.Outcome == conformance.OutcomeRetry:
		kind = scheduler.KindGuestRetry
	case r.res.Outcome == conformance.OutcomeFail:
		kind = scheduler.KindGuestFail
	}
	a.End(map[string]string{"ok": "ok", "drop": "ok", "retry": "retry", "fail": "dead_letter"}[r.res.Outcome], kind, r.res.Message)
	r.traceID = a.TraceID()
	if c.Expect != nil {
		r.checked = true
		d := r.res.Decision
		d.Outputs = slices.Clone(r.outs)
		var own []string
		if s.fr != nil {
			own = s.fr.checkOwn(ctx, ci, d.Outputs)
		}
		r.diff = append(c.Expect.Check(d), own...)
	}
	return r, nil
}

// schemaFailed makes res the outcome of a record whose key or value did
// not decode, or whose outputs did not encode: failed (retried while the
// registry is down), its outputs discarded. It returns the failure's kind.
func schemaFailed(res *conformance.CaseResult, err error) string {
	kind, _, retryable := scheduler.SchemaFailure(err)
	res.Outcome, res.Fault, res.Message, res.Outputs = conformance.OutcomeFail, "", err.Error(), nil
	if retryable {
		res.Outcome = conformance.OutcomeRetry
	}
	return kind
}

// close closes what start opened, the local state first.
func (s *testSession) close(ctx context.Context) {
	if s.ls != nil {
		s.ls.Close()
	}
	if s.m != nil {
		s.m.Close(ctx)
	}
	if s.e != nil {
		s.e.Close(ctx)
	}
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
	c   *conformance.Case
	res conformance.CaseResult
	// in is the record as the guest was given it (framed keys and values
	// decoded; inFP says how they were framed), outs its outputs as read
	// back from what the host writes (outFP: how each was framed).
	in      abi.Record
	inFP    [2]framedPart
	outs    []abi.Output
	outFP   [][2]framedPart
	kind    string // a schema failure's kind (schema.decode, ...): the record failed in the host, not the guest
	traceID string
	spans   []tracing.Span
	checked bool
	diff    []string
	// A control line's: the stream time after it, its idle rounds, and
	// whether its check is an expect_state.
	streamTime, rounds int64
	stateCheck         bool
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

// writeTestText prints each record's run (writeTestRecord) and a line of
// counts.
func writeTestText(w io.Writer, pc *config.Pipeline, results []testResult, failed int) {
	counts := map[string]int{}
	checked, controls := 0, 0
	for _, r := range results {
		if r.c.Control != nil {
			controls++
		} else {
			counts[r.res.Outcome]++
		}
		writeTestRecord(w, pc, &r)
		if r.checked {
			checked++
		}
	}
	fmt.Fprintf(w, "%d record(s): %d ok, %d dropped, %d retry, %d fail", len(results)-controls, counts["ok"], counts["drop"], counts["retry"], counts["fail"])
	if controls > 0 {
		fmt.Fprintf(w, "; %d control line(s)", controls)
	}
	if checked > 0 {
		fmt.Fprintf(w, "; expectations: %d passed, %d failed", checked-failed, failed)
	}
	fmt.Fprintln(w)
}

// writeTestRecord prints one record's run: the record, its outcome, its
// outputs, state writes and HTTP requests, its trace and its expectation.
func writeTestRecord(w io.Writer, pc *config.Pipeline, r *testResult) {
	if r.c.Control != nil {
		writeTestControl(w, r, func() { writeTestOutputs(w, pc, r) })
		writeTestExpect(w, r)
		return
	}
	writeTestInput(w, r)
	writeTestOutcome(w, r)
	writeTestOutputs(w, pc, r)
	for _, s := range r.res.Changelog {
		fmt.Fprintf(w, "  state: %s = %s\n", show(s.Key), show(s.Value))
	}
	for _, q := range r.res.Requests { // the fake's: real requests are in the trace
		fmt.Fprintf(w, "  http: %s (answered from the vectors)\n", termsafe.Line(q))
	}
	for _, e := range r.res.TimerErrors { // a pipeline dead-letters these firings
		fmt.Fprintf(w, "  timer failed: %s\n", termsafe.Line(e))
	}
	if len(r.spans) > 0 {
		var sb strings.Builder
		tracing.Render(&sb, r.spans)
		fmt.Fprintf(w, "  trace:\n    %s\n", strings.TrimSuffix(strings.ReplaceAll(sb.String(), "\n", "\n    "), "\n    "))
	}
	writeTestExpect(w, r)
}

// writeTestExpect prints a record's or control line's check: PASS, or
// FAIL with the differences.
func writeTestExpect(w io.Writer, r *testResult) {
	if !r.checked {
		return
	}
	if len(r.diff) == 0 {
		fmt.Fprintln(w, "  expect: PASS")
		return
	}
	fmt.Fprintln(w, "  expect: FAIL")
	for _, d := range r.diff {
		fmt.Fprintf(w, "    %s\n", termsafe.Line(d))
	}
}

// writeTestInput prints the record as the guest read it.
func writeTestInput(w io.Writer, r *testResult) {
	c := r.c
	where := ""
	if c.Line > 0 && c.Name != fmt.Sprintf("line %d", c.Line) {
		where = fmt.Sprintf(" (line %d)", c.Line)
	}
	fmt.Fprintf(w, "── %s%s: key %s value %s", termsafe.Line(c.Name), where, show(r.in.Key), show(r.in.Value))
	if len(c.Record.Headers) > 0 {
		fmt.Fprintf(w, " headers %s", showHeaders(c.Record.Headers))
	}
	if c.Record.Attempt > 1 {
		fmt.Fprintf(w, " attempt %d", c.Record.Attempt)
	}
	fmt.Fprintln(w)
	if note := framedNote(r.inFP); note != "" {
		fmt.Fprintf(w, "  (%s; the guest read the JSON above)\n", note)
	}
	if r.res.NewInstance {
		fmt.Fprintln(w, "  (on a new instance: the previous one faulted)")
	}
}

// writeTestOutcome prints the record's outcome: ok, dropped, or retry or
// fail with who decided it (the guest, a fault, the host) and why.
func writeTestOutcome(w io.Writer, r *testResult) {
	res := r.res
	switch res.Outcome {
	case conformance.OutcomeOK:
		fmt.Fprintf(w, "  ok: %d output(s)\n", len(res.Outputs))
	case conformance.OutcomeDrop:
		fmt.Fprintln(w, "  ok: dropped (no output)")
	default:
		kind := "reported by the guest"
		switch {
		case r.kind != "":
			kind = r.kind + ", in the host"
		case res.Fault != "":
			kind = string(res.Fault) + " fault"
		}
		fmt.Fprintf(w, "  %s (%s): %s\n", res.Outcome, kind, termsafe.Text(res.Message, "    "))
	}
}

// writeTestOutputs prints the record's outputs, as read back.
func writeTestOutputs(w io.Writer, pc *config.Pipeline, r *testResult) {
	for i, o := range r.outs {
		fmt.Fprintf(w, "  → output %d to %s: key %s value %s", i, outputTopic(pc, o.Topic), show(o.Key), show(o.Value))
		if o.Partition >= 0 {
			fmt.Fprintf(w, " partition %d", o.Partition)
		}
		if len(o.Headers) > 0 {
			fmt.Fprintf(w, " headers %s", showHeaders(o.Headers))
		}
		if i < len(r.outFP) {
			if note := framedNote(r.outFP[i]); note != "" {
				fmt.Fprintf(w, " (%s, read back)", note)
			}
		}
		fmt.Fprintln(w)
	}
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
		if r.kind != "" {
			m["kind"] = r.kind
		}
		jsonFramed(m, r.inFP)
		outs := []map[string]any{}
		for i, o := range r.outs {
			om := map[string]any{"topic": o.Topic, "partition": o.Partition, "headers": jsonHeaders(o.Headers)}
			if o.Topic == "" {
				om["topic"] = pc.Output
			}
			jsonBytes(om, "key", o.Key)
			jsonBytes(om, "value", o.Value)
			if i < len(r.outFP) {
				jsonFramed(om, r.outFP[i])
			}
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
		if len(r.res.TimerErrors) > 0 {
			m["timer_errors"] = r.res.TimerErrors
		}
		if r.traceID != "" {
			m["trace_id"] = r.traceID
			m["trace"] = r.spans
		}
		if r.checked {
			m["expect"] = map[string]any{"pass": len(r.diff) == 0, "diff": append([]string{}, r.diff...)}
		}
		if r.c.Control != nil {
			jsonControl(m, &r)
		}
		recs = append(recs, m)
	}
	b, _ := json.MarshalIndent(map[string]any{"records": recs, "expectations_failed": failed}, "", "  ")
	w.Write(termsafe.JSON(append(b, '\n')))
}

// framedNote says how a record's or output's key and value were framed:
// "value framed: schema id 3, 41 bytes"; "" when neither was.
func framedNote(fp [2]framedPart) string {
	var parts []string
	for i, name := range []string{partKey, partValue} {
		if fp[i].n > 0 {
			parts = append(parts, fmt.Sprintf("%s framed: schema id %d, %d bytes", name, fp[i].id, fp[i].n))
		}
	}
	return strings.Join(parts, "; ")
}

// jsonFramed puts the schema ids of a framed key and value in m
// (key_schema_id, value_schema_id).
func jsonFramed(m map[string]any, fp [2]framedPart) {
	for i, name := range []string{partKey, partValue} {
		if fp[i].n > 0 {
			m[name+"_schema_id"] = fp[i].id
		}
	}
}
