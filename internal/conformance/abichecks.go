package conformance

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
)

// The ABI checks hold for every module, whatever it does with a record:
// each of the kit's records (Records) is decided — ok with any outputs, or a
// retry or fail the guest reports — without a fault, twice on one instance;
// an emit refused by limits.max_output_bytes fails the record with a status
// and the instance goes on; memory exhausted under limits.memory_pages
// fails the record (a status, or an oom, trap or panic fault) and the next
// record is decided as before; and, for a module that starts asynchronous
// operations, a record whose operations never complete fails at its
// deadline without losing the instance, and completions delivered forward,
// in reverse and interleaved give each record the same decision; and for a
// module with the batch entry (ABI.md §10), the records in one batch are
// decided as one call each. The module's HTTP requests are answered 200
// with the body {} (genericAnswer).

// genericAnswer is the ABI checks' answer to every HTTP request.
var genericAnswer = HTTPAnswer{Status: 200, Headers: []abi.Header{{Key: "Content-Type", Value: []byte("application/json")}}, Body: []byte("{}")}

// abiCase is a kit record as a Case whose HTTP requests get genericAnswer.
func abiCase(v Vector) Case {
	hs := make([]HTTPAnswer, 64)
	for i := range hs {
		hs[i] = genericAnswer
	}
	return Case{Name: v.Name, Record: v.Record, HTTP: hs}
}

// abiConfig is how the ABI checks load the module: env, the fake HTTP
// service, limits.
func abiConfig(env map[string]string, f *FakeHTTP, l host.Limits) host.ModuleConfig {
	return host.ModuleConfig{Name: "conformance", Limits: l, Env: maps.Clone(env),
		Async: host.AsyncConfig{Operations: map[abi.OpKind]host.Operation{abi.OpHTTP: f}}}
}

// describe is a decision in a check's detail.
func (d Decision) describe() string {
	s := d.Outcome
	if d.Outcome == OutcomeOK {
		s = fmt.Sprintf("ok with %d output(s)", len(d.Outputs))
	}
	if d.Fault != "" {
		s += " (" + string(d.Fault) + " fault)"
	}
	if d.Message != "" {
		s += ": " + OneLine(d.Message, 160)
	}
	return s
}

// sameDecision compares two decisions: outcome, fault kind and outputs.
func sameDecision(a, b Decision) bool {
	return a.Outcome == b.Outcome && a.Fault == b.Fault &&
		slices.EqualFunc(a.Outputs, b.Outputs, func(x, y abi.Output) bool {
			return string(abi.AppendOutput(nil, &x)) == string(abi.AppendOutput(nil, &y))
		})
}

// abiChecks runs the ABI checks and reports whether the module loaded.
func abiChecks(ctx context.Context, e *host.Engine, wasm []byte, env map[string]string, r *Report) bool {
	f := &FakeHTTP{}
	m, err := e.Load(ctx, wasm, abiConfig(env, f, host.Limits{}))
	r.add("abi: load: the module fits the ABI", errString(err))
	if err != nil {
		return false
	}
	info := m.Info()
	run := &CaseRunner{Engine: e, Module: m, Fake: f}
	first := map[string]Decision{}
	pending := map[string]bool{}
	for _, v := range Records() {
		c := abiCase(v)
		var bad []string
		for round := 1; round <= 2; round++ {
			res, err := run.Run(ctx, &c, round)
			if err != nil {
				bad = append(bad, fmt.Sprintf("round %d: no instance: %v", round, err))
				break
			}
			if round == 1 {
				first[v.Name] = res.Decision
				pending[v.Name] = len(res.Requests) > 0
			}
			if res.Fault != "" {
				bad = append(bad, fmt.Sprintf("round %d: %s", round, res.describe()))
			}
		}
		r.addNote("abi: record "+v.Name+" is decided without a fault, twice on one instance", strings.Join(bad, "; "), first[v.Name].describe())
	}
	run.Close(ctx)
	m.Close(ctx)
	batchEntry(ctx, e, wasm, env, info, first, pending, r)
	emitRefused(ctx, e, wasm, env, first, r)
	memoryExhausted(ctx, e, wasm, env, info.MemoryMin, first, r)
	const never = "abi: a record whose operations never complete fails at its deadline (deadline fault), the instance lives on"
	const orders = "abi: completions delivered forward, in reverse and interleaved give the same decisions"
	if !info.Async {
		r.addNote(never, "", "not applicable: the module starts no asynchronous operation")
		r.addNote(orders, "", "not applicable: the module starts no asynchronous operation")
		return true
	}
	var async []Vector
	for _, v := range Records() {
		if pending[v.Name] {
			async = append(async, v)
		}
	}
	if len(async) == 0 {
		r.addNote(never, "", "not applicable: no record of the kit made an HTTP request")
		r.addNote(orders, "", "not applicable: no record of the kit made an HTTP request")
		return true
	}
	neverDecided(ctx, e, wasm, env, async[0], first, r)
	completionOrders(ctx, e, wasm, env, async, r)
	return true
}

// batchEntry: for a module with the batch entry (ABI.md §10), the kit's
// records in one batch are decided as they were one call each; a record
// that made an HTTP request is pending in the batch.
func batchEntry(ctx context.Context, e *host.Engine, wasm []byte, env map[string]string, info host.Info, first map[string]Decision, pending map[string]bool, r *Report) {
	const name = "abi §10: the kit's records in one batch are decided as one call each"
	if !info.Batch {
		r.addNote(name, "", "not applicable: the module has no batch entry ("+abi.ExportOnBatch+")")
		return
	}
	m, in, err := load(ctx, e, wasm, abiConfig(env, &FakeHTTP{}, host.Limits{}))
	if err != nil {
		r.add(name, err.Error())
		return
	}
	defer closeAll(ctx, m, in)
	vecs := Records()
	recs := make([]host.BatchRecord, len(vecs))
	for i := range vecs {
		recs[i] = host.BatchRecord{Rec: &vecs[i].Record, Tag: i}
	}
	out := make([]host.Outcome, len(recs))
	ran := in.ProcessBatch(ctx, recs, out)
	var bad []string
	if ran != len(recs) {
		bad = append(bad, fmt.Sprintf("%d of %d records ran", ran, len(recs)))
	}
	for i, o := range out[:ran] {
		v := vecs[i]
		switch {
		case pending[v.Name]:
			if o.Status != abi.StatusPending {
				bad = append(bad, fmt.Sprintf("record %s: %s, want pending (it made a request alone)", v.Name, DecisionOf(o.Result).describe()))
			}
		case o.Status == abi.StatusPending || !sameDecision(DecisionOf(o.Result), first[v.Name]):
			bad = append(bad, fmt.Sprintf("record %s: %s, alone: %s", v.Name, DecisionOf(o.Result).describe(), first[v.Name].describe()))
		}
	}
	r.add(name, strings.Join(bad, "; "))
}

// largeKeep is the 210 KiB record, with the word the filter example keeps.
func largeKeep() Vector {
	large := vecByName(Records(), "large-210KiB")
	large.Record.Value = append(slices.Clone(large.Record.Value), " keep"...)
	return large
}

// emitRefused: under limits.max_output_bytes 64 KiB, a module that emits
// the 210 KiB record's bytes (or more than 64 KiB for it) is refused (emit
// answers -5); it must fail the record itself (a retry or fail status, not
// a fault) and its instance must decide the next record as before.
func emitRefused(ctx context.Context, e *host.Engine, wasm []byte, env map[string]string, first map[string]Decision, r *Report) {
	const name = "abi: an emit refused by limits.max_output_bytes (64 KiB) fails the record with a status, the instance lives on"
	const limit = 64 << 10
	f := &FakeHTTP{}
	m, err := e.Load(ctx, wasm, abiConfig(env, f, host.Limits{MaxOutputBytes: limit}))
	if err != nil {
		r.add(name, "load: "+err.Error())
		return
	}
	defer m.Close(ctx)
	run := &CaseRunner{Engine: e, Module: m, Fake: f}
	defer run.Close(ctx)
	large := abiCase(largeKeep())
	res, err := run.Run(ctx, &large, 0)
	if err != nil {
		r.add(name, "no instance: "+err.Error())
		return
	}
	if res.Outcome == OutcomeOK || res.Outcome == OutcomeDrop {
		n := 0
		for i := range res.Outputs {
			n += len(abi.AppendOutput(nil, &res.Outputs[i]))
		}
		if n > limit {
			r.add(name, fmt.Sprintf("the record succeeded with %d bytes of outputs over the %d-byte limit", n, limit))
			return
		}
		r.addNote(name, "", "not applicable: the module emits nothing over 64 KiB for the 210 KiB record")
		return
	}
	if res.Fault != "" {
		r.add(name, fmt.Sprintf("%s, want a retry or fail the guest reports", res.describe()))
		return
	}
	if r.nextDecidedAsBefore(ctx, name, run, first) {
		r.addNote(name, "", res.describe())
	}
}

// memoryExhausted: with limits.memory_pages a few pages above what the
// module needs to start and decide a small record, the 210 KiB record
// cannot be held. A module that reads it must fail it — its own failure, or
// an oom, trap or panic fault (ABI.md §6: how a runtime reports exhaustion
// differs) — and the instance, or its replacement after a fault, must
// decide the next record as before. A module that never reads the value
// may decide it as without the limit.
func memoryExhausted(ctx context.Context, e *host.Engine, wasm []byte, env map[string]string, minPages uint32, first map[string]Decision, r *Report) {
	const name = "abi: memory exhausted under limits.memory_pages fails the record (a status, or an oom, trap or panic fault); the next record is decided as before"
	plain := abiCase(vecByName(Records(), "plain"))
	large := abiCase(largeKeep())
	// The smallest limit (in steps above the declared minimum) at which
	// an instance starts and decides a small record as without a limit: a
	// runtime may need more than it declares to start (Go's does).
	var (
		m    *host.Module
		run  *CaseRunner
		last string
	)
	pages := minPages + 3
	for ; pages <= minPages+256; pages += max(3, (pages-minPages)/2) {
		f := &FakeHTTP{}
		mm, err := e.Load(ctx, wasm, abiConfig(env, f, host.Limits{MemoryPages: pages}))
		if err != nil {
			last = err.Error()
			continue
		}
		rr := &CaseRunner{Engine: e, Module: mm, Fake: f}
		res, err := rr.Run(ctx, &plain, 0)
		switch {
		case err != nil:
			last = "no instance: " + err.Error()
		case !sameDecision(res.Decision, first["plain"]):
			last = "the small record: " + res.describe()
		default:
			m, run = mm, rr
		}
		if m != nil {
			break
		}
		rr.Close(ctx)
		mm.Close(ctx)
	}
	if m == nil {
		r.add(name, fmt.Sprintf("no limit up to %d pages above the declared minimum lets an instance start and decide a small record as without a limit (%s)", pages-minPages, last))
		return
	}
	defer m.Close(ctx)
	defer run.Close(ctx)
	res, err := run.Run(ctx, &large, 1)
	if err != nil {
		r.add(name, "no instance: "+err.Error())
		return
	}
	note := fmt.Sprintf("%s at %d pages", res.describe(), pages)
	switch {
	case res.Outcome == OutcomeOK || res.Outcome == OutcomeDrop:
		note = fmt.Sprintf("decided within %d pages (%s): the module does not hold the whole value", pages, res.describe())
	case res.Fault != "" && res.Fault != host.FaultOOM && res.Fault != host.FaultTrap && res.Fault != host.FaultPanic:
		r.add(name, note+", want a status or an oom, trap or panic fault")
		return
	}
	next, err := run.Run(ctx, &plain, 2)
	switch {
	case err != nil:
		r.add(name, "no instance for the next record: "+err.Error())
	case !sameDecision(next.Decision, first["plain"]):
		r.add(name, fmt.Sprintf("the next record: %s, before: %s", next.describe(), first["plain"].describe()))
	default:
		if next.NewInstance {
			note += ", the next on a new instance"
		}
		r.addNote(name, "", note)
	}
}

// neverDecided: v's HTTP requests are never answered; under
// limits.record_timeout 1 s the record must fail with a deadline fault
// that keeps the instance, and the instance must decide the next record
// as before.
func neverDecided(ctx context.Context, e *host.Engine, wasm []byte, env map[string]string, v Vector, first map[string]Decision, r *Report) {
	const name = "abi: a record whose operations never complete fails at its deadline (deadline fault), the instance lives on"
	f := &FakeHTTP{}
	m, in, err := load(ctx, e, wasm, abiConfig(env, f, host.Limits{RecordTimeout: time.Second}))
	if err != nil {
		r.add(name, err.Error())
		return
	}
	defer closeAll(ctx, m, in)
	res := in.Process(ctx, &v.Record, 0)
	if res.Status != abi.StatusPending {
		r.add(name, fmt.Sprintf("record %s: %s, want pending (it made a request before)", v.Name, DecisionOf(res).describe()))
		return
	}
	var got *host.Result
	end := time.Now().Add(5 * time.Second)
	for got == nil && time.Now().Before(end) {
		select {
		case <-in.Ready():
		case <-time.After(10 * time.Millisecond):
		}
		f.Take() // held, never answered (canceled when the record ends)
		for _, d := range in.Poll(ctx, time.Now()) {
			got = &d.Result
		}
	}
	if got == nil {
		r.add(name, "the record was not failed at its deadline")
		return
	}
	if flt := got.Fault(); flt == nil || flt.Kind != host.FaultDeadline || !flt.Keep || in.Dead() {
		r.add(name, fmt.Sprintf("%s (instance discarded: %v), want a deadline fault that keeps the instance", DecisionOf(*got).describe(), in.Dead()))
		return
	}
	// The canceled operations are delivered; the instance takes the next
	// record.
	time.Sleep(20 * time.Millisecond)
	in.Poll(ctx, time.Now())
	run := &CaseRunner{Engine: e, Module: m, Fake: f, in: in}
	ok := r.nextDecidedAsBefore(ctx, name, run, first)
	in = run.in
	if ok {
		r.add(name, "")
	}
}

// completionOrders: the records that made requests run together on one
// instance, their completions delivered forward, in reverse and
// interleaved; each record's decision must not depend on the order
// (ABI.md §7.1).
func completionOrders(ctx context.Context, e *host.Engine, wasm []byte, env map[string]string, vecs []Vector, r *Report) {
	const name = "abi: completions delivered forward, in reverse and interleaved give the same decisions"
	cfg := func(f *FakeHTTP) host.ModuleConfig {
		return abiConfig(env, f, host.Limits{RecordTimeout: asyncTimeout})
	}
	gen := func(*HeldOp, *abi.Record) ([]byte, string) { return genericAnswer.Result(), "" }
	var ref map[string]Outcome
	var bad []string
	for _, o := range orders {
		out, _, err := asyncRun(ctx, e, wasm, vecs, o.perm, cfg, gen)
		if err != nil {
			bad = append(bad, o.name+": "+err.Error())
			continue
		}
		if ref == nil {
			ref = out
			continue
		}
		for _, v := range vecs {
			if !out[v.Name].Same(ref[v.Name]) {
				bad = append(bad, fmt.Sprintf("%s, record %s: %s%s, forward: %s%s", o.name, v.Name, out[v.Name].kindOf(), out[v.Name].errSuffix(), ref[v.Name].kindOf(), ref[v.Name].errSuffix()))
			}
		}
	}
	r.addNote(name, strings.Join(bad, "; "), fmt.Sprintf("%d records", len(vecs)))
}

// nextDecidedAsBefore runs the kit's "plain" record on run's instance after
// a check's fault: it must be decided as before (first), on the same
// instance. It reports a failure under name and returns false otherwise.
func (r *Report) nextDecidedAsBefore(ctx context.Context, name string, run *CaseRunner, first map[string]Decision) bool {
	plain := abiCase(vecByName(Records(), "plain"))
	next, err := run.Run(ctx, &plain, 1)
	switch {
	case err != nil:
		r.add(name, "no instance for the next record: "+err.Error())
	case next.NewInstance:
		r.add(name, "the instance was discarded")
	case !sameDecision(next.Decision, first["plain"]):
		r.add(name, fmt.Sprintf("the next record: %s, before: %s", next.describe(), first["plain"].describe()))
	default:
		return true
	}
	return false
}
