package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/rpabi"
)

// Redpanda's schema-registry module (redpanda_schema_registry), served to a
// Redpanda transform whose pipeline grants the registry
// (async.schema_registry.enabled; docs/REDPANDA-TRANSFORMS.md, "Schema
// registry"). Its imports are synchronous: each runs the pipeline's own
// schema-registry operation (host/asyncop/schema.go: the same grants, the
// same bounds, the process's client and its cache by id, so a new id costs
// one registry request per host) and waits for its answer on the guest's
// goroutine, bounded by the record's deadline (and, within it, by the
// client's schema_registry.request_timeout). The guest is not running
// meanwhile: its instance is what waits, as the Redpanda broker's own
// lookup blocks the transform.
//
// An answer that will be the same next time (the schema, no such schema,
// a refusal by the section's bounds) is the guest's: the SDKs turn a
// failure into an error the transform handles. One that may change (the
// registry did not answer, answered 5xx, refused the credentials, or the
// record's deadline came first) is not: the SDK's error cannot say "try
// again", and a transform that skips records it cannot decode would drop
// the record. So the host fails the record itself (a fault: the instance
// ends, the record is retried as any fault's) and the transform never sees
// it.

// srSigs are the redpanda_schema_registry functions the host serves.
var srSigs = map[string]sig{
	rpabi.SRCheckABIVersion0:    {},
	rpabi.SRGetSchemaDefLen:     {[]api.ValueType{i32, i32}, []api.ValueType{i32}},
	rpabi.SRGetSchemaDef:        {[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}},
	rpabi.SRGetSubjectSchemaLen: {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}},
	rpabi.SRGetSubjectSchema:    {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}},
	rpabi.SRCreateSubjectSchema: {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}},
}

// srImportProblem is what is wrong with a Redpanda transform importing
// redpanda_schema_registry's name as s; "" when nothing is. The module is
// served only when key (the pipeline's async.schema_registry) is enabled:
// nothing is granted by default.
func srImportProblem(name string, s sig, enabled bool, key string) string {
	want, ok := srSigs[name]
	switch {
	case !ok:
		return fmt.Sprintf("imports unknown host function %s.%s (this host serves %s)", rpabi.SchemaRegistryModule, name, joinKeys(srSigs))
	case !want.matches(s.params, s.results):
		return fmt.Sprintf("imports %s.%s as %s, want %s", rpabi.SchemaRegistryModule, name, s, want)
	case !enabled:
		return fmt.Sprintf("imports %s.%s: the schema registry is not granted to the pipeline (set %s.enabled: true, with schema_registry.url)", rpabi.SchemaRegistryModule, name, key)
	}
	return ""
}

func joinKeys(m map[string]sig) string { return strings.Join(sortedKeys(m), ", ") }

// srKey is the pipeline's schema-registry section, as refusals name it.
func (m *Module) srKey() string {
	key := m.async.Key
	if key == "" {
		key = "async"
	}
	return key + ".schema_registry"
}

func (m *Module) instantiateSRModule(ctx context.Context) error {
	b := m.rt.NewHostModuleBuilder(rpabi.SchemaRegistryModule)
	def := func(name string, fn api.GoModuleFunc) {
		s := srSigs[name]
		b.NewFunctionBuilder().WithGoModuleFunction(fn, s.params, s.results).Export(name)
	}
	def(rpabi.SRCheckABIVersion0, func(context.Context, api.Module, []uint64) {})
	def(rpabi.SRGetSchemaDefLen, hostSRGetSchemaDefLen)
	def(rpabi.SRGetSchemaDef, hostSRGetSchemaDef)
	def(rpabi.SRGetSubjectSchemaLen, hostSRGetSubjectSchemaLen)
	def(rpabi.SRGetSubjectSchema, hostSRGetSubjectSchema)
	def(rpabi.SRCreateSubjectSchema, hostSRCreateSubjectSchema)
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("host: instantiate %s: %w", rpabi.SchemaRegistryModule, err)
	}
	return nil
}

// srAnswer is the last lookup's answer, kept by the instance between a
// _len call and the call that copies it out: the SDKs make the two in a
// row, and the second must see the first's answer (a subject's latest
// version may change in between). A schema by id, or by a fixed version,
// does not change, so the next record's lookup of the same one is answered
// from it too; a subject's latest is asked again at each _len call. On the
// guest goroutine only.
type srAnswer struct {
	kind    abi.OpKind
	id      int    // OpSchemaByID
	subject string // OpSchemaBySubject
	version int
	enc     []byte // the encoded answer, without the completion code
}

func (a *srAnswer) is(kind abi.OpKind, id int, subject string, version int) bool {
	return a.enc != nil && a.kind == kind && a.id == id && a.subject == subject && a.version == version
}

// srAsk runs op with req and waits for its answer: the payload of a
// completed operation, or ok false when the answer is the guest's failure
// (no such schema, a refusal). A failure that may not repeat faults the
// call (srTransient).
func (in *Instance) srAsk(kind abi.OpKind, req []byte) (payload []byte, ok bool) {
	op := in.m.ops[kind]
	if op == nil { // an embedder replaced the operations without these
		return nil, false
	}
	// As many registry operations a record as a wasmstream module's
	// asynchronous ones (async.max_per_record): a transform looping on
	// lookups of new ids or on registrations cannot flood the registry.
	// Answers kept by the instance do not count.
	rp := in.entry.rp
	var rec uint32 // 0: outside a record (the transform's initialisation)
	if in.cur != nil {
		rec = in.cur.handle // a record's state is reused; its handle is not
	}
	if rp.srRec != rec {
		rp.srRec, rp.srOps = rec, 0
	}
	if rp.srOps >= in.m.async.MaxPerRecord {
		return nil, false
	}
	rp.srOps++
	parent := in.fuel.parent
	if parent == nil {
		parent = in.base
	}
	ctx, cancel := context.WithDeadline(parent, in.fuel.deadline)
	defer cancel()
	res := make(chan []byte, 1) // done is called once, from any goroutine
	start := time.Now()
	desc, err := op.Start(ctx, req, func(r []byte) { res <- r })
	if err != nil { // the request is the host's own: it is well formed
		in.fault = &Fault{Kind: FaultProtocol, Msg: fmt.Sprintf("%s: %v", rpabi.SchemaRegistryModule, err)}
		panic(in.fault)
	}
	var r []byte
	select {
	case r = <-res:
	case <-ctx.Done():
		// The operation ends with ctx too; its answer is not awaited.
		r = abi.AppendCompletionError(nil, abi.CompletionCanceled, "schema registry: "+context.Cause(ctx).Error())
	}
	if obs := in.m.cfg.Observer; obs != nil && in.cur != nil {
		obs.AsyncOp(in.cur.tag, kind, desc, start, time.Since(start), outcomeOf(r))
	}
	c, err := abi.DecodeCompletion(r)
	switch {
	case err != nil:
		in.srTransient(ctx, desc, "a malformed answer: "+err.Error())
	case c.Code == abi.CompletionOK:
		return c.Payload, true
	case c.Code == abi.CompletionRefused:
		return nil, false
	}
	in.srTransient(ctx, desc, c.Message)
	return nil, false
}

// srTransient faults the call: the registry's answer to desc may differ
// next time (msg says why), so the record is retried rather than the
// transform told it failed. A deadline fault when the record's deadline
// came first, else a trap the host raises.
func (in *Instance) srTransient(ctx context.Context, desc, msg string) {
	kind := FaultTrap
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		kind = FaultDeadline
	}
	if !strings.Contains(msg, desc) {
		msg = desc + ": " + msg
	}
	in.fault = &Fault{Kind: kind, Msg: fmt.Sprintf("%s: %s; the transform was not answered", rpabi.SchemaRegistryModule, msg)}
	panic(in.fault)
}

// srByID is the encoded definition of schema id, or ok false.
func (in *Instance) srByID(id int) ([]byte, bool) {
	a := &in.entry.rp.sr
	if a.is(abi.OpSchemaByID, id, "", 0) {
		return a.enc, true
	}
	p, ok := in.srAsk(abi.OpSchemaByID, abi.AppendSchemaByID(nil, id))
	if !ok {
		return nil, false
	}
	*a = srAnswer{kind: abi.OpSchemaByID, id: id, enc: append(a.enc[:0], p...)}
	return a.enc, true
}

// srBySubject is the encoded subject schema of subject at version, or ok
// false; fresh asks again for a latest version (-1) kept from before.
// subject aliases guest memory; what is kept is a copy.
func (in *Instance) srBySubject(subject []byte, version int, fresh bool) ([]byte, bool) {
	a := &in.entry.rp.sr
	if a.is(abi.OpSchemaBySubject, 0, string(subject), version) && !(fresh && version == -1) {
		return a.enc, true
	}
	p, ok := in.srAsk(abi.OpSchemaBySubject, abi.AppendSchemaBySubject(nil, string(subject), version))
	if !ok {
		return nil, false
	}
	*a = srAnswer{kind: abi.OpSchemaBySubject, subject: string(subject), version: version, enc: append(a.enc[:0], p...)}
	return a.enc, true
}

// srWriteLen writes n at ptr (an i32 out-parameter) and returns 0.
func (in *Instance) srWriteLen(mod api.Module, fn string, ptr uint32, n int) uint64 {
	if !mod.Memory().WriteUint32Le(ptr, uint32(int32(n))) {
		in.badPointerIn(mod, rpabi.SchemaRegistryModule, fn, ptr, 4)
	}
	return 0
}

// srCopy copies enc to the guest's buf of bufLen bytes: its length, or
// SRFailed when it does not fit.
func (in *Instance) srCopy(mod api.Module, fn string, enc []byte, buf, bufLen uint32) uint64 {
	if uint64(len(enc)) > uint64(bufLen) {
		return rpCode(rpabi.SRFailed)
	}
	if !mod.Memory().Write(buf, enc) {
		in.badPointerIn(mod, rpabi.SchemaRegistryModule, fn, buf, uint32(len(enc)))
	}
	return uint64(len(enc))
}

// get_schema_definition_len(id, len_out *i32) -> 0 | -1
func hostSRGetSchemaDefLen(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	enc, ok := in.srByID(int(int32(stack[0])))
	if !ok {
		stack[0] = rpCode(rpabi.SRFailed)
		return
	}
	stack[0] = in.srWriteLen(mod, rpabi.SRGetSchemaDefLen, uint32(stack[1]), len(enc))
}

// get_schema_definition(id, buf, buf_len) -> written | -1
func hostSRGetSchemaDef(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	enc, ok := in.srByID(int(int32(stack[0])))
	if !ok {
		stack[0] = rpCode(rpabi.SRFailed)
		return
	}
	stack[0] = in.srCopy(mod, rpabi.SRGetSchemaDef, enc, uint32(stack[1]), uint32(stack[2]))
}

// get_subject_schema_len(subject, subject_len, version, len_out *i32) -> 0 | -1
func hostSRGetSubjectSchemaLen(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	subject := in.readIn(mod, rpabi.SchemaRegistryModule, rpabi.SRGetSubjectSchemaLen, uint32(stack[0]), uint32(stack[1]))
	enc, ok := in.srBySubject(subject, int(int32(stack[2])), true)
	if !ok {
		stack[0] = rpCode(rpabi.SRFailed)
		return
	}
	stack[0] = in.srWriteLen(mod, rpabi.SRGetSubjectSchemaLen, uint32(stack[3]), len(enc))
}

// get_subject_schema(subject, subject_len, version, buf, buf_len) -> written | -1
func hostSRGetSubjectSchema(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	subject := in.readIn(mod, rpabi.SchemaRegistryModule, rpabi.SRGetSubjectSchema, uint32(stack[0]), uint32(stack[1]))
	enc, ok := in.srBySubject(subject, int(int32(stack[2])), false)
	if !ok {
		stack[0] = rpCode(rpabi.SRFailed)
		return
	}
	stack[0] = in.srCopy(mod, rpabi.SRGetSubjectSchema, enc, uint32(stack[3]), uint32(stack[4]))
}

// create_subject_schema(subject, subject_len, def, def_len, id_out *i32) -> 0 | -1
//
// Registers the schema definition under subject, as the pipeline's
// register_subjects allow; the id the registry gives it is written to
// id_out.
func hostSRCreateSubjectSchema(ctx context.Context, mod api.Module, stack []uint64) {
	in := instance(ctx)
	fn := rpabi.SRCreateSubjectSchema
	subject := in.readIn(mod, rpabi.SchemaRegistryModule, fn, uint32(stack[0]), uint32(stack[1]))
	raw := in.readIn(mod, rpabi.SchemaRegistryModule, fn, uint32(stack[2]), uint32(stack[3]))
	def, err := abi.DecodeSchemaDef(raw)
	if err != nil {
		stack[0] = rpCode(rpabi.SRFailed)
		return
	}
	p, ok := in.srAsk(abi.OpSchemaRegister, abi.AppendSchemaRegister(nil, string(subject), &def))
	if !ok {
		stack[0] = rpCode(rpabi.SRFailed)
		return
	}
	id, _, err := abi.DecodeSchemaRegistered(p)
	if err != nil {
		in.srTransient(context.Background(), "register a schema", "a malformed answer: "+err.Error())
	}
	in.entry.rp.sr = srAnswer{} // a subject's latest may be this one now
	stack[0] = in.srWriteLen(mod, fn, uint32(stack[4]), id)
}
