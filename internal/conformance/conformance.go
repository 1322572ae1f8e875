// Package conformance is wasmstream's conformance kit: checks that any
// processor module must pass, test vectors of the example processors
// (uppercase, filter, lookup) whatever language they are written in, and a
// user's own records with their expectations. It drives the module through
// the host's own instance API (host.Module, host.Instance), so what it
// checks is what a pipeline would do with the module.
//
// The ABI checks (abichecks.go) hold for every module, whatever it does:
// the kit's records (vectors.go: null and empty keys and values, binary
// values, a 210 KiB value, 50 headers, null header values, non-ASCII text,
// an incoming traceparent) are each decided without a fault; an emit
// refused by a limit and memory exhausted under the page limit fail the
// record and the instance (or its replacement) goes on; for a module that
// makes HTTP requests, a record never completed fails at its deadline and
// the completions' order does not change decisions (ABI.md §3, §6, §7).
//
// An example's checks compare each vector's outcome with the example's
// specification (expect.go), twice on one instance; the lookup example's
// completions are delivered forward, in reverse, interleaved and in every
// order of three records, and its failures (a panic in a continuation, a
// completion leak) are checked against the ABI.
//
// A user's records come from a vectors file (cases.go: JSON lines with
// expectations), run by CaseRunner (runcases.go), which `wasmstream test`
// uses too.
//
// `wasmstream conformance [--example NAME] [--vectors FILE] module.wasm`
// runs it.
package conformance

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
)

// Outcome is what one vector produced, comparable across modules.
type Outcome struct {
	Status   abi.Status
	Outputs  [][]byte // the encodings of the outputs (abi.AppendOutput), in emit order
	Fault    host.FaultKind
	HasError bool   // an error message or fault explains a failure
	Err      string // the message (differs across SDKs; not compared)
}

func outcomeOf(res host.Result) Outcome {
	o := Outcome{Status: res.Status}
	for i := range res.Outputs {
		o.Outputs = append(o.Outputs, abi.AppendOutput(nil, &res.Outputs[i]))
	}
	if f := res.Fault(); f != nil {
		o.Fault = f.Kind
	}
	if res.Err != nil {
		o.HasError, o.Err = true, res.Err.Error()
	}
	return o
}

func (o Outcome) errSuffix() string {
	if o.Err == "" {
		return ""
	}
	e := o.Err
	if len(e) > 160 {
		e = e[:160] + "…"
	}
	return " (" + e + ")"
}

// Same reports whether two outcomes are the same: status, fault kind and
// outputs byte for byte (messages aside).
func (o Outcome) Same(p Outcome) bool {
	return o.Status == p.Status && o.Fault == p.Fault && o.HasError == p.HasError &&
		slices.EqualFunc(o.Outputs, p.Outputs, func(a, b []byte) bool { return string(a) == string(b) })
}

// Check is one verdict of a run.
type Check struct {
	Name   string
	Pass   bool
	Detail string // why it failed, or a note
}

// Report is the result of checking one module.
type Report struct {
	Example string
	Checks  []Check
	// Outcomes are the vectors' outcomes (the first round, or the forward
	// order), by vector name, for comparing modules with each other.
	Outcomes map[string]Outcome
}

// OK reports whether every check passed.
func (r *Report) OK() bool {
	for _, c := range r.Checks {
		if !c.Pass {
			return false
		}
	}
	return len(r.Checks) > 0
}

// Failed returns the checks that failed.
func (r *Report) Failed() []Check {
	var f []Check
	for _, c := range r.Checks {
		if !c.Pass {
			f = append(f, c)
		}
	}
	return f
}

// String is the report as Write prints it.
func (r *Report) String() string {
	var sb strings.Builder
	r.Write(&sb)
	return sb.String()
}

// Write prints one line per check (PASS or FAIL, with why) and a summary.
func (r *Report) Write(w io.Writer) {
	for _, c := range r.Checks {
		v := "PASS"
		if !c.Pass {
			v = "FAIL"
		}
		fmt.Fprintf(w, "%s  %s", v, c.Name)
		switch {
		case c.Detail != "" && c.Pass:
			fmt.Fprintf(w, " (%s)", c.Detail)
		case c.Detail != "":
			fmt.Fprintf(w, ": %s", c.Detail)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%s: %d of %d checks passed\n", r.Example, len(r.Checks)-len(r.Failed()), len(r.Checks))
}

func (r *Report) add(name string, detail string) {
	r.Checks = append(r.Checks, Check{Name: name, Pass: detail == "", Detail: detail})
}

// addNote is add, with a note on a pass.
func (r *Report) addNote(name, detail, note string) {
	if detail != "" {
		r.add(name, detail)
		return
	}
	r.Checks = append(r.Checks, Check{Name: name, Pass: true, Detail: note})
}

// kindOf names how a record failed: its fault kind or its status.
func (o Outcome) kindOf() string {
	if o.Fault != "" {
		return string(o.Fault) + " fault"
	}
	return "status " + o.Status.String()
}

// Options says what a module is checked against besides the ABI.
type Options struct {
	// Example is the example the module implements ("": none).
	Example string
	// Cases are the user's records with their expectations (a vectors
	// file, ReadCases); File names it in the report.
	Cases []Case
	File  string
	// Env is the module's environment in the ABI checks and the user's
	// records (the examples' own checks set theirs).
	Env map[string]string
	// State and Keep, when set, give the user's records state that carries
	// from record to record (CaseRunner); otherwise the state_* functions
	// answer no_state.
	State func() host.State
	Keep  func(st host.State, offset, timestamp int64) []abi.Output
	// Fire, when set, fires the timers a user's record made due (ABI.md
	// §4.2) after it, for a module with timers (CaseRunner.Fire): a
	// window's result is among the outputs of the record that closed it,
	// as wasmstream test has it.
	Fire func(ctx context.Context, in *host.Instance, topic string) ([]abi.Output, []error)
}

// Run checks the module wasm against the ABI and the example's
// specification. The error is for a run that could not start (an unknown
// example); a module that does not load is a failed check.
func Run(ctx context.Context, e *host.Engine, wasm []byte, example string) (*Report, error) {
	return CheckModule(ctx, e, wasm, Options{Example: example})
}

// CheckModule runs the ABI checks every module must pass (abichecks.go), then
// the example's vectors (opt.Example) and the user's records (opt.Cases).
func CheckModule(ctx context.Context, e *host.Engine, wasm []byte, opt Options) (*Report, error) {
	var vecs []Vector
	if opt.Example != "" {
		var err error
		if vecs, err = VectorsOf(opt.Example); err != nil {
			return nil, err
		}
	}
	name := "abi"
	if opt.Example != "" {
		name += " + " + opt.Example
	}
	if len(opt.Cases) > 0 {
		name += " + " + cmp.Or(opt.File, "vectors")
	}
	r := &Report{Example: name, Outcomes: map[string]Outcome{}}
	env := opt.Env
	if opt.Example == "lookup" && env["LOOKUP_URL"] == "" {
		env = maps.Clone(env)
		if env == nil {
			env = map[string]string{}
		}
		env["LOOKUP_URL"] = LookupURL // the example's own setting
	}
	if !abiChecks(ctx, e, wasm, env, r) {
		return r, nil
	}
	switch opt.Example {
	case "":
	case "lookup":
		runAsync(ctx, e, wasm, vecs, r)
	default:
		runSync(ctx, e, wasm, vecs, expectationOf(opt.Example), r)
	}
	if len(opt.Cases) > 0 {
		runUserCases(ctx, e, wasm, opt, r)
	}
	return r, nil
}

// runUserCases runs the user's records in order on one instance, each HTTP
// request answered from the record's "http" list, and checks each
// expectation.
func runUserCases(ctx context.Context, e *host.Engine, wasm []byte, opt Options, r *Report) {
	f := &FakeHTTP{}
	m, err := e.Load(ctx, wasm, abiConfig(opt.Env, f, host.Limits{}))
	if err != nil {
		r.add("vectors: load", err.Error())
		return
	}
	defer m.Close(ctx)
	run := &CaseRunner{Engine: e, Module: m, Fake: f, State: opt.State, Keep: opt.Keep}
	if m.Info().Timers {
		run.Fire = opt.Fire
	}
	defer run.Close(ctx)
	for i := range opt.Cases {
		c := opt.Cases[i]
		if c.Record.Topic == "" {
			c.Record.Topic = "in"
		}
		name := "vectors: " + c.Name
		if c.Line > 0 && c.Name != fmt.Sprintf("line %d", c.Line) {
			name += fmt.Sprintf(" (line %d)", c.Line)
		}
		res, err := run.Run(ctx, &c, i)
		if err != nil {
			r.add(name, "no instance: "+err.Error())
			continue
		}
		if c.Expect == nil {
			r.addNote(name, "", res.describe()+"; no expectation")
			continue
		}
		r.addNote(name, strings.Join(c.Expect.Check(res.Decision), "; "), res.describe())
	}
}

func load(ctx context.Context, e *host.Engine, wasm []byte, cfg host.ModuleConfig) (*host.Module, *host.Instance, error) {
	m, err := e.Load(ctx, wasm, cfg)
	if err != nil {
		return nil, nil, err
	}
	in, err := m.NewInstance(ctx)
	if err != nil {
		m.Close(ctx)
		return nil, nil, err
	}
	return m, in, nil
}

func closeAll(ctx context.Context, m *host.Module, in *host.Instance) {
	in.Close(ctx)
	m.Close(ctx)
}

// runSync runs the vectors through one instance twice (the second round
// reuses whatever the guest kept).
func runSync(ctx context.Context, e *host.Engine, wasm []byte, vecs []Vector, expect func(Vector) want, r *Report) {
	m, in, err := load(ctx, e, wasm, host.ModuleConfig{Name: "conformance"})
	if err != nil {
		r.add("load", err.Error())
		return
	}
	defer func() { closeAll(ctx, m, in) }()
	for _, v := range vecs {
		w := expect(v)
		var detail string
		for round := 1; round <= 2 && detail == ""; round++ {
			if in.Dead() {
				in, err = m.NewInstance(ctx)
				if err != nil {
					r.add("vector "+v.Name, "no new instance: "+err.Error())
					return
				}
			}
			o := outcomeOf(in.Process(ctx, &v.Record, nil))
			if round == 1 {
				r.Outcomes[v.Name] = o
			}
			if msg := w(o); msg != "" {
				detail = fmt.Sprintf("round %d: %s", round, msg)
			}
		}
		r.add("vector "+v.Name, detail)
	}
}

func vecByName(vecs []Vector, name string) Vector {
	for _, v := range vecs {
		if v.Name == name {
			return v
		}
	}
	panic("conformance: no vector " + name)
}

func prefix(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// HeldOp is one HTTP request of the guest, held until the kit delivers its
// answer.
type HeldOp struct {
	Req  abi.HTTPRequest
	done func([]byte)
	once sync.Once
}

// Method is the request's method ("" is GET).
func (op *HeldOp) Method() string {
	if op.Req.Method == "" {
		return "GET"
	}
	return op.Req.Method
}

func (op *HeldOp) Complete(result []byte) { op.once.Do(func() { op.done(result) }) }

// FakeHTTP replaces the host's HTTP operation: it records each request and
// completes it only when the kit says so, so that the kit chooses the order
// in which completions reach the guest.
type FakeHTTP struct {
	mu  sync.Mutex
	ops []*HeldOp
}

func (f *FakeHTTP) Start(ctx context.Context, req []byte, done func([]byte)) (string, error) {
	r, err := abi.DecodeHTTPRequest(slices.Clone(req))
	if err != nil {
		return "", err
	}
	op := &HeldOp{Req: r, done: done}
	f.mu.Lock()
	f.ops = append(f.ops, op)
	f.mu.Unlock()
	go func() { // the host requires done also when the record ends first
		<-ctx.Done()
		op.Complete(abi.AppendCompletionError(nil, abi.CompletionCanceled, "canceled: "+ctx.Err().Error()))
	}()
	return op.Method() + " " + r.URL, nil
}

// take returns the requests started since the last take.
func (f *FakeHTTP) Take() []*HeldOp {
	f.mu.Lock()
	defer f.mu.Unlock()
	ops := f.ops
	f.ops = nil
	return ops
}

// answer is what the kit's lookup service answers op, and a complaint
// about the request, if any.
func answer(op *HeldOp, rec *abi.Record) ([]byte, string) {
	key, err := lookupKey(op.Req.URL)
	if err != nil {
		return abi.AppendCompletionError(nil, abi.CompletionError, err.Error()), err.Error()
	}
	var complaint []string
	if key != string(rec.Key) {
		complaint = append(complaint, fmt.Sprintf("asked for key %q, the record's is %q", key, rec.Key))
	}
	if op.Req.Method != "" && op.Req.Method != "GET" {
		complaint = append(complaint, "method "+op.Req.Method+", want GET")
	}
	idem := fmt.Sprintf("%s/%d/%d", rec.Topic, rec.Partition, rec.Offset)
	got := ""
	for _, h := range op.Req.Headers {
		if strings.EqualFold(h.Key, "Idempotency-Key") {
			got = string(h.Value)
		}
	}
	if got != idem {
		complaint = append(complaint, fmt.Sprintf("Idempotency-Key %q, want %q (ABI.md §7.4)", got, idem))
	}
	return answerFor(key).result(), strings.Join(complaint, "; ")
}

const asyncTimeout = 10 * time.Second

func lookupConfig(f *FakeHTTP) host.ModuleConfig { return asyncConfig(f, asyncTimeout) }

func asyncConfig(f *FakeHTTP, timeout time.Duration) host.ModuleConfig {
	return host.ModuleConfig{Name: "conformance", Limits: host.Limits{RecordTimeout: timeout},
		Env:   map[string]string{"LOOKUP_URL": LookupURL},
		Async: host.AsyncConfig{Operations: map[abi.OpKind]host.Operation{abi.OpHTTP: f}}}
}

// order is how the requests of a run are completed: a permutation of
// their indexes.
type order struct {
	name string
	perm func(n int) []int
}

var orders = []order{
	{"forward", func(n int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = i
		}
		return p
	}},
	{"reverse", func(n int) []int {
		p := make([]int, n)
		for i := range p {
			p[i] = n - 1 - i
		}
		return p
	}},
	{"interleaved", func(n int) []int { // outside in: 0, n-1, 1, n-2, ...
		p := make([]int, 0, n)
		for lo, hi := 0, n-1; lo <= hi; lo, hi = lo+1, hi-1 {
			p = append(p, lo)
			if hi != lo {
				p = append(p, hi)
			}
		}
		return p
	}},
}

// permutations returns every order of 0..n-1.
func permutations(n int) [][]int {
	if n == 0 {
		return [][]int{{}}
	}
	var out [][]int
	for _, p := range permutations(n - 1) {
		for i := 0; i <= len(p); i++ {
			q := append(append(append([]int{}, p[:i]...), n-1), p[i:]...)
			out = append(out, q)
		}
	}
	return out
}

// asyncRun processes vecs on a fresh instance of the module as cfg loads
// it, completes their requests with answer in the order perm gives, and
// returns each vector's outcome and complaints
// about the requests. A nil perm completes them all (forward) before
// delivering any: a module with the completions entry (ABI.md §10.1) gets
// them in one call.
func asyncRun(ctx context.Context, e *host.Engine, wasm []byte, vecs []Vector, perm func(int) []int,
	cfg func(*FakeHTTP) host.ModuleConfig, answer func(*HeldOp, *abi.Record) ([]byte, string)) (map[string]Outcome, []string, error) {
	f := &FakeHTTP{}
	m, in, err := load(ctx, e, wasm, cfg(f))
	if err != nil {
		return nil, nil, err
	}
	defer closeAll(ctx, m, in)
	out := map[string]Outcome{}
	var complaints []string
	type started struct {
		op  *HeldOp
		vec int
	}
	var ops []started
	waiting := 0
	for i := range vecs {
		res := in.Process(ctx, &vecs[i].Record, i)
		for _, op := range f.Take() {
			ops = append(ops, started{op, i})
		}
		if res.Status == abi.StatusPending {
			waiting++
			continue
		}
		out[vecs[i].Name] = outcomeOf(res)
	}
	collect := func(ds []host.Done) {
		for _, d := range ds {
			out[vecs[d.Tag.(int)].Name] = outcomeOf(d.Result)
			waiting--
		}
	}
	together := perm == nil
	if together {
		perm = orders[0].perm
	}
	for _, j := range perm(len(ops)) {
		res, complaint := answer(ops[j].op, &vecs[ops[j].vec].Record)
		if complaint != "" {
			complaints = append(complaints, vecs[ops[j].vec].Name+": "+complaint)
		}
		ops[j].op.Complete(res)
		if !together {
			// Deliver this completion (and whatever else is due) now, so
			// that the guest sees the completions in this order.
			collect(in.Poll(ctx, time.Now()))
		}
	}
	if together {
		// Every completion queued: one Poll delivers them all.
		collect(in.Poll(ctx, time.Now()))
	}
	// Chained operations (the timer of "chain") complete by themselves;
	// requests started in continuations are answered as they come.
	end := time.Now().Add(asyncTimeout + time.Second)
	for waiting > 0 && time.Now().Before(end) {
		for _, op := range f.Take() {
			res, _ := answer(op, &abi.Record{})
			op.Complete(res)
		}
		select {
		case <-in.Ready():
		case <-time.After(10 * time.Millisecond):
		}
		collect(in.Poll(ctx, time.Now()))
	}
	if waiting > 0 {
		return out, complaints, fmt.Errorf("%d record(s) still undecided after %s", waiting, asyncTimeout)
	}
	return out, complaints, nil
}

// runAsync checks the lookup example.
func runAsync(ctx context.Context, e *host.Engine, wasm []byte, vecs []Vector, r *Report) {
	f := &FakeHTTP{}
	m, err := e.Load(ctx, wasm, asyncConfig(f, asyncTimeout))
	if err != nil {
		r.add("load with LOOKUP_URL", err.Error())
		return
	}
	async := m.Info().Async
	m.Close(ctx)
	r.add("load: the module imports async_start and exports wasmstream_on_complete", map[bool]string{true: "", false: "it starts no asynchronous operation"}[async])
	if !async {
		return
	}
	byOrder := map[string]map[string]Outcome{}
	for _, o := range orders {
		out, complaints, err := asyncRun(ctx, e, wasm, vecs, o.perm, lookupConfig, answer)
		if err != nil {
			complaints = append(complaints, err.Error())
		}
		r.add("requests ("+o.name+"): GET LOOKUP_URL+path-escaped key, Idempotency-Key topic/partition/offset", strings.Join(complaints, "; "))
		byOrder[o.name] = out
	}
	for _, v := range vecs {
		w := expectLookup(v)
		var bad []string
		for _, o := range orders {
			got, ok := byOrder[o.name][v.Name]
			if !ok {
				bad = append(bad, o.name+": undecided")
				continue
			}
			if msg := w(got); msg != "" {
				bad = append(bad, o.name+": "+msg)
			}
		}
		r.Outcomes[v.Name] = byOrder["forward"][v.Name]
		r.add("vector "+v.Name+" (completions forward, reverse, interleaved)", strings.Join(bad, "; "))
	}
	// Every order of three lookups (and a 404 and a retry among them).
	three := []Vector{vecByName(vecs, "plain"), vecByName(vecs, "lookup-404"), vecByName(vecs, "lookup-503-retry")}
	var bad []string
	perms := permutations(3)
	for _, p := range perms {
		out, _, err := asyncRun(ctx, e, wasm, three, func(n int) []int {
			if n != 3 {
				return orders[0].perm(n)
			}
			return p
		}, lookupConfig, answer)
		if err != nil {
			bad = append(bad, fmt.Sprintf("order %v: %v", p, err))
			continue
		}
		for _, v := range three {
			if msg := expectLookup(v)(out[v.Name]); msg != "" {
				bad = append(bad, fmt.Sprintf("order %v, %s: %s", p, v.Name, msg))
			}
		}
	}
	r.add(fmt.Sprintf("completions in every order of three records (%d orders) give the same outcomes", len(perms)), strings.Join(bad, "; "))
	completionsTogether(ctx, e, wasm, vecs, r)
	panicInContinuation(ctx, e, wasm, vecs, r)
	completionLeak(ctx, e, wasm, vecs, r)
}

// completionsTogether: the vectors' completions all queued before any is
// delivered, so that a module with the completions entry (ABI.md §10.1)
// gets them several in one call, with mixed outcomes (ok, 404, retry, fail,
// a chained timer that keeps its record pending): each vector's outcome is
// what it is delivered one per call.
func completionsTogether(ctx context.Context, e *host.Engine, wasm []byte, vecs []Vector, r *Report) {
	const name = "completions delivered several in one call (ABI.md §10.1) give the same outcomes"
	obs := &entryCounter{}
	cfg := func(f *FakeHTTP) host.ModuleConfig {
		c := lookupConfig(f)
		c.Observer = obs
		return c
	}
	out, _, err := asyncRun(ctx, e, wasm, vecs, nil, cfg, answer)
	if err != nil {
		r.add(name, err.Error())
		return
	}
	var bad []string
	for _, v := range vecs {
		if msg := expectLookup(v)(out[v.Name]); msg != "" {
			bad = append(bad, v.Name+": "+msg)
		}
	}
	note := fmt.Sprintf("%d completions through %s", obs.n, abi.ExportOnCompletions)
	if obs.n == 0 {
		note = "the module has no completions entry (" + abi.ExportOnCompletions + "): one call per completion"
	}
	r.addNote(name, strings.Join(bad, "; "), note)
}

// entryCounter is an Observer counting the completions delivered through
// the completions entry.
type entryCounter struct{ n int }

func (c *entryCounter) GuestCall(_ any, export string, _ time.Time, _ time.Duration, _ error) {
	if export == abi.ExportOnCompletions {
		c.n++
	}
}

func (c *entryCounter) AsyncOp(any, abi.OpKind, string, time.Time, time.Duration, string) {}

// panicInContinuation: lookup.mode "panic" panics (or aborts) in the
// continuation: a panic or trap fault that names the message, the instance
// discarded, and the other record waiting on it failed as instance_lost
// (ABI.md §6, §7.1).
func panicInContinuation(ctx context.Context, e *host.Engine, wasm []byte, vecs []Vector, r *Report) {
	const name = "failure: a panic in a continuation is a panic or trap fault, the instance is discarded, the other waiting record is instance_lost"
	f := &FakeHTTP{}
	m, in, err := load(ctx, e, wasm, asyncConfig(f, asyncTimeout))
	if err != nil {
		r.add(name, err.Error())
		return
	}
	defer closeAll(ctx, m, in)
	other := vecByName(vecs, "plain").Record
	boom := abi.Record{Topic: "in", Key: []byte("boom"), Value: []byte(`"v"`), Attempt: 1, Headers: []abi.Header{{Key: "lookup.mode", Value: []byte("panic")}}}
	for i, rec := range []*abi.Record{&other, &boom} {
		if res := in.Process(ctx, rec, i); res.Status != abi.StatusPending {
			r.add(name, fmt.Sprintf("record %d: status %s%s, want pending", i, res.Status, outcomeOf(res).errSuffix()))
			return
		}
	}
	ops := f.Take()
	if len(ops) != 2 {
		r.add(name, fmt.Sprintf("%d requests, want 2", len(ops)))
		return
	}
	res, _ := answer(ops[1], &boom)
	ops[1].Complete(res)
	got := map[int]host.Result{}
	end := time.Now().Add(asyncTimeout)
	for len(got) < 2 && time.Now().Before(end) {
		for _, d := range in.Poll(ctx, time.Now()) {
			got[d.Tag.(int)] = d.Result
		}
		if len(got) < 2 {
			select {
			case <-in.Ready():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	var bad []string
	if f := got[1].Fault(); f == nil || (f.Kind != host.FaultPanic && f.Kind != host.FaultTrap) || !strings.Contains(got[1].Err.Error(), "asked to panic in the continuation") {
		bad = append(bad, fmt.Sprintf("the panicking record: %s%s", got[1].Status, outcomeOf(got[1]).errSuffix()))
	}
	if f := got[0].Fault(); f == nil || f.Kind != host.FaultInstanceLost {
		bad = append(bad, fmt.Sprintf("the other record: %s%s, want instance_lost", got[0].Status, outcomeOf(got[0]).errSuffix()))
	}
	if !in.Dead() {
		bad = append(bad, "the instance lives on")
	}
	r.addNote(name, strings.Join(bad, "; "), outcomeOf(got[1]).kindOf())
}

// completionLeak: lookup.mode "leak" never decides its record: a deadline
// fault at limits.record_timeout, the instance kept (the guest was not
// running), its canceled timer delivered, and the next record decided.
func completionLeak(ctx context.Context, e *host.Engine, wasm []byte, vecs []Vector, r *Report) {
	const name = "failure: a record never decided fails at its deadline (deadline fault), the instance lives on"
	f := &FakeHTTP{}
	m, in, err := load(ctx, e, wasm, asyncConfig(f, time.Second))
	if err != nil {
		r.add(name, err.Error())
		return
	}
	defer closeAll(ctx, m, in)
	leak := abi.Record{Topic: "in", Key: []byte("leak"), Value: []byte(`"v"`), Attempt: 1, Headers: []abi.Header{{Key: "lookup.mode", Value: []byte("leak")}}}
	if res := in.Process(ctx, &leak, 0); res.Status != abi.StatusPending {
		r.add(name, fmt.Sprintf("status %s%s, want pending", res.Status, outcomeOf(res).errSuffix()))
		return
	}
	var got *host.Result
	end := time.Now().Add(5 * time.Second)
	for got == nil && time.Now().Before(end) {
		select {
		case <-in.Ready():
		case <-time.After(10 * time.Millisecond):
		}
		for _, d := range in.Poll(ctx, time.Now()) {
			got = &d.Result
		}
	}
	if got == nil {
		r.add(name, "the record was not failed at its deadline")
		return
	}
	if flt := got.Fault(); flt == nil || flt.Kind != host.FaultDeadline || !flt.Keep || in.Dead() {
		r.add(name, fmt.Sprintf("%s%s (instance dead: %v), want a deadline fault that keeps the instance", got.Status, outcomeOf(*got).errSuffix(), in.Dead()))
		return
	}
	// The canceled timer is delivered; the instance takes the next record.
	time.Sleep(20 * time.Millisecond)
	in.Poll(ctx, time.Now())
	plain := vecByName(vecs, "plain").Record
	res := in.Process(ctx, &plain, 1)
	for _, op := range f.Take() {
		a, _ := answer(op, &plain)
		op.Complete(a)
	}
	if res.Status == abi.StatusPending {
		end := time.Now().Add(5 * time.Second)
		for res.Status == abi.StatusPending && time.Now().Before(end) {
			select {
			case <-in.Ready():
			case <-time.After(10 * time.Millisecond):
			}
			for _, d := range in.Poll(ctx, time.Now()) {
				res = d.Result
			}
		}
	}
	r.add(name, prefix("the next record: ", expectLookup(vecByName(vecs, "plain"))(outcomeOf(res))))
}
