package host

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/asyncop"
	"github.com/wasmstream/wasmstream/host/internal/linmem"
	"github.com/wasmstream/wasmstream/host/internal/meter"
	"github.com/wasmstream/wasmstream/host/internal/slots"
	"github.com/wasmstream/wasmstream/host/limits"
)

// Limits bound what one instance may use.
type Limits struct {
	// MemoryPages caps each instance's linear memory (64 KiB pages). A module
	// whose declared minimum exceeds it is refused at load; a memory.grow past
	// it fails inside the guest.
	MemoryPages uint32
	// TableElements caps the elements of each instance's tables together
	// (8 bytes each). A module whose tables' declared minimums or element
	// segments exceed it is refused at load; a table.grow past it returns
	// -1 inside the guest (bounds.go).
	TableElements uint32
	// RecordTimeout is the deadline of one call into the guest. A guest still
	// running then is interrupted and the instance discarded.
	RecordTimeout time.Duration
	// MaxOutputs and MaxOutputBytes cap what one record may emit.
	MaxOutputs     int
	MaxOutputBytes int
	// LogBytesPerSecond and LogBurstBytes rate-limit each instance's log
	// calls: a token bucket of bytes refilled at LogBytesPerSecond up to
	// LogBurstBytes, where a line costs its message (at most 4 KiB) plus 256
	// bytes. Lines over it are dropped and counted (guestlog.go).
	LogBytesPerSecond int
	LogBurstBytes     int
}

// DefaultLimits are used for zero fields. They are the only defaults: the
// configuration (limits.*) takes its defaults from the same numbers (package
// host/limits).
var DefaultLimits = Limits{
	MemoryPages:       limits.MemoryPages,
	TableElements:     limits.TableElements,
	RecordTimeout:     limits.RecordTimeout,
	MaxOutputs:        limits.MaxOutputs,
	MaxOutputBytes:    limits.MaxOutputBytes,
	LogBytesPerSecond: limits.LogBytesPerSecond,
	LogBurstBytes:     limits.LogBurstBytes,
}

func (l Limits) withDefaults() Limits {
	if l.MemoryPages == 0 {
		l.MemoryPages = DefaultLimits.MemoryPages
	}
	if l.TableElements == 0 {
		l.TableElements = DefaultLimits.TableElements
	}
	if l.RecordTimeout <= 0 {
		l.RecordTimeout = DefaultLimits.RecordTimeout
	}
	if l.MaxOutputs <= 0 {
		l.MaxOutputs = DefaultLimits.MaxOutputs
	}
	if l.MaxOutputBytes <= 0 {
		l.MaxOutputBytes = DefaultLimits.MaxOutputBytes
	}
	if l.LogBytesPerSecond <= 0 {
		l.LogBytesPerSecond = DefaultLimits.LogBytesPerSecond
	}
	if l.LogBurstBytes <= 0 {
		l.LogBurstBytes = DefaultLimits.LogBurstBytes
	}
	return l
}

// InstantiateTimeout bounds instantiation, the guest's initialiser and the
// version handshake. A Go guest initialises in milliseconds; the bound only
// stops an initialiser that never returns.
const InstantiateTimeout = 30 * time.Second

// ModuleConfig is how a pipeline runs a module.
type ModuleConfig struct {
	// Name identifies the module in logs and errors (the pipeline name).
	Name   string
	Limits Limits
	// AllowedTopics are the topics a guest may name in an output besides ""
	// (the pipeline's output).
	AllowedTopics []string
	// Async configures asynchronous operations.
	Async AsyncConfig
	// Env is the instances' environment (WASI environment variables).
	Env map[string]string
	// Observer, when set, sees every guest call and asynchronous operation.
	Observer Observer
	// Weight is the module's share of the engine's guest-call slots relative
	// to other names' (pipelines[].weight; 0 means 1). Modules of one Name
	// share one share.
	Weight int
	// Redpanda is how a Redpanda transform runs (redpanda.go); a
	// wasmstream module ignores it.
	Redpanda RedpandaConfig
}

// Observer sees the timing of guest calls and asynchronous operations, with
// the tag of the record they were for (as given to Process). It is called on
// the goroutine that owns the instance and must not block.
type Observer interface {
	GuestCall(tag any, export string, start time.Time, d time.Duration, err error)
	AsyncOp(tag any, kind abi.OpKind, desc string, start time.Time, d time.Duration, outcome string)
}

// Info describes a loaded module.
type Info struct {
	Kind       string // KindWasmstream or KindRedpanda, from the module's imports
	ABIVersion int    // wasmstream's ABI version; 0 for a Redpanda transform
	Digest     string // sha256 of the module bytes, hex
	Size       int
	Exports    []string // "name: signature"
	Imports    []string // "module.name: signature"
	MemoryMin  uint32   // pages
	MemoryMax  uint32   // pages; 0 when the module declares none
	Async      bool     // the module starts asynchronous operations (imports async_start)
	Batch      bool     // the module exports the batch entry (ABI.md §10): Instance.ProcessBatch runs many records per call
	// Completions: the module exports the completions entry (ABI.md §10.1):
	// Instance.Poll delivers several completions per call.
	Completions bool
	// Timers: the module sets event-time timers (imports timer_set, ABI.md
	// §4.2) and exports wasmstream_on_timer, which Instance.ProcessTimer
	// calls.
	Timers bool
}

// Module is a compiled, validated module ready to be instantiated. Safe for
// concurrent use; Close it after every instance is closed.
type Module struct {
	cfg      ModuleConfig
	limits   Limits
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	info     Info
	allowed  map[string]bool
	log      *slog.Logger
	nextID   atomic.Uint64
	slots    *slots.Group // its share of the engine's guest-call slots
	held     *heldOutputs // the engine's account of held outputs
	clock    guestClock   // the clocks its instances read
	async    AsyncConfig
	ops      map[abi.OpKind]Operation
	asyncOps *atomic.Int64  // the engine's count of operations in flight
	logStats *guestLogStats // the engine's, for this pipeline name
	// fromCache: the compiled code was read from the compile cache on
	// disk, not compiled.
	fromCache bool
	// rpEnv is a Redpanda transform's environment (nil: a wasmstream
	// module).
	rpEnv [][2]string
	// mems are its instances' memories: a new one starts with room for
	// twice what the first one (the load check's) grew to (linmem.Family).
	mems *linmem.Family
}

// FromCache reports whether the module's compiled code was read from the
// engine's compile cache on disk rather than compiled.
func (m *Module) FromCache() bool { return m.fromCache }

// ErrIncompatible is wrapped by every error that refuses a module at load.
var ErrIncompatible = errors.New("incompatible module")

// Load validates and compiles wasm and checks that an instance starts and
// speaks ABI v1. The error says precisely what does not fit.
func (e *Engine) Load(ctx context.Context, wasm []byte, cfg ModuleConfig) (*Module, error) {
	lim := cfg.Limits.withDefaults()
	// The one place the kind of a module is decided: by its imports.
	redpanda := isRedpandaTransform(wasm)
	if redpanda {
		if err := checkRedpandaConfig(cfg); err != nil {
			return nil, err
		}
		lim = redpandaLimits(cfg)
	}
	if len(wasm) < 8 || string(wasm[:4]) != "\x00asm" {
		return nil, fmt.Errorf("%w: not a WebAssembly module (no \\0asm magic number)", ErrIncompatible)
	}
	if v := uint32(wasm[4]) | uint32(wasm[5])<<8 | uint32(wasm[6])<<16 | uint32(wasm[7])<<24; v != 1 {
		return nil, fmt.Errorf("%w: WebAssembly binary format version %d (want 1)", ErrIncompatible, v)
	}
	// Measure before wazero decodes anything: it allocates what the module
	// declares. code is what is compiled: tables given a maximum.
	code, err := bound(wasm, lim)
	if err != nil {
		return nil, err
	}
	// Then meter its code: the record deadline interrupts a guest through
	// the fuel counter (fuel.go), not through wazero's checks.
	code, _, err = meter.Instrument(code)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrIncompatible, err)
	}
	rt, compiled, fromDisk, err := e.compileCode(ctx, code, lim.MemoryPages)
	if err != nil {
		if msg := err.Error(); strings.Contains(msg, "section memory") && strings.Contains(msg, "over limit") {
			return nil, fmt.Errorf("%w: memory minimum exceeds the limit of %d pages (limits.memory_pages): %v", ErrIncompatible, lim.MemoryPages, err)
		}
		return nil, fmt.Errorf("%w: %v", ErrIncompatible, err)
	}
	m := &Module{cfg: cfg, limits: lim, rt: rt, log: e.log.With("pipeline", cfg.Name), slots: e.slots.Group(cfg.Name, cfg.Weight), held: &e.held, clock: e.clock(), asyncOps: &e.asyncOps, async: cfg.Async, logStats: e.guestLogStats(cfg.Name), fromCache: fromDisk, mems: linmem.NewFamily()}
	m.async.SetDefaults()
	m.ops = e.operations(m.async)
	ok := false
	defer func() {
		if !ok {
			rt.Close(ctx)
		}
	}()
	m.compiled = compiled
	sum := sha256.Sum256(wasm)
	m.info = Info{Kind: KindWasmstream, ABIVersion: abi.Version, Digest: hex.EncodeToString(sum[:]), Size: len(wasm)}
	setup := m.setupWasmstream
	if redpanda {
		m.rpEnv = redpandaEnv(cfg)
		setup = m.setupRedpanda
	}
	if err := setup(ctx); err != nil {
		return nil, err
	}
	if err := m.instantiateMeter(ctx); err != nil {
		return nil, err
	}
	m.allowed = make(map[string]bool, len(cfg.AllowedTopics))
	for _, t := range cfg.AllowedTopics {
		m.allowed[t] = true
	}
	// A trial instance proves the module initialises and speaks our version.
	in, err := m.NewInstance(ctx)
	if err != nil {
		return nil, err
	}
	in.Close(ctx)
	ok = true
	return m, nil
}

// setupWasmstream checks a wasmstream module against ABI v1 and
// instantiates the host modules it may import (WASI, the ABI's, the batch
// entry's); the meter's is instantiated by Load for both kinds.
func (m *Module) setupWasmstream(ctx context.Context) error {
	if err := m.check(); err != nil {
		return err
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, m.rt); err != nil {
		return fmt.Errorf("host: wasi: %w", err)
	}
	if err := m.instantiateHostModule(ctx); err != nil {
		return err
	}
	return m.instantiateBatchModule(ctx)
}

// compile compiles code, turning a panic of wazero's into an error: wazero
// v1.12 panics on some invalid modules (a function imported with a type
// index out of range; the meter refuses those first), and no module may
// take the host down.
func compile(ctx context.Context, rt wazero.Runtime, code []byte) (cm wazero.CompiledModule, err error) {
	defer func() {
		if p := recover(); p != nil {
			cm, err = nil, fmt.Errorf("the runtime failed on the module: %v", p)
		}
	}()
	return rt.CompileModule(ctx, code)
}

// Info describes the module.
func (m *Module) Info() Info { return m.info }

// Limits are the limits the module's instances run under.
func (m *Module) Limits() Limits { return m.limits }

// CoreUse is the slot time every pipeline's guest calls held so far on the
// engine, and its number of slots (one per core): sampled twice, it tells
// how many cores ran guest calls on average in between, and how many had
// none to run.
func (m *Module) CoreUse() (busy time.Duration, cores int) {
	p := m.slots.Pool()
	return p.Busy(), p.Size()
}

// Close releases the module and every instance still open, and writes the
// summary of guest log lines dropped since the last one.
func (m *Module) Close(ctx context.Context) error {
	m.flushLogSummary()
	// The module's HTTP connections (one transport per module) would
	// otherwise stay open, each with its reading and writing goroutines,
	// until their idle timeout; requests still running keep theirs.
	for _, op := range m.ops {
		if c, ok := op.(asyncop.IdleCloser); ok {
			c.CloseIdleConnections()
		}
	}
	return m.rt.Close(ctx)
}

type sig struct {
	params, results []api.ValueType
}

func (s sig) String() string {
	f := func(ts []api.ValueType) string {
		n := make([]string, len(ts))
		for i, t := range ts {
			n[i] = api.ValueTypeName(t)
		}
		return strings.Join(n, ", ")
	}
	return fmt.Sprintf("func(%s) -> (%s)", f(s.params), f(s.results))
}

func (s sig) matches(params, results []api.ValueType) bool {
	return string(s.params) == string(params) && string(s.results) == string(results)
}

var (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64

	requiredExports = map[string]sig{
		abi.ExportVersion:  {nil, []api.ValueType{i32}},
		abi.ExportOnRecord: {[]api.ValueType{i32, i32}, []api.ValueType{i32}},
	}
	hostFuncs = map[string]sig{
		abi.ImportRecordRead:  {[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}},
		abi.ImportEmit:        {[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}},
		abi.ImportSetError:    {[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}},
		abi.ImportLog:         {[]api.ValueType{i32, i32, i32}, nil},
		abi.ImportAsyncStart:  {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}},
		abi.ImportResultRead:  {[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}},
		abi.ImportStateGet:    {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}},
		abi.ImportStatePut:    {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}},
		abi.ImportStateDelete: {[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}},
		abi.ImportStateScan:   {[]api.ValueType{i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}},
		// ABI.md §4.2 (two-part keys, stream time).
		abi.ImportStateGet2:    {[]api.ValueType{i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}},
		abi.ImportStatePut2:    {[]api.ValueType{i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}},
		abi.ImportStateDelete2: {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}},
		abi.ImportStateScan2:   {[]api.ValueType{i32, i32, i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}},
		abi.ImportStreamTime:   {[]api.ValueType{i32, i32}, []api.ValueType{i32}},
		abi.ImportTimerSet:     {[]api.ValueType{i32, i32, i32, i64}, []api.ValueType{i32}},
		abi.ImportTimerDelete:  {[]api.ValueType{i32, i32, i32, i64}, []api.ValueType{i32}},
	}
	onCompleteSig = sig{[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}}
	onTimerSig    = sig{[]api.ValueType{i32, i32}, []api.ValueType{i32}}

	// The batch entry (ABI.md §10), versioned apart from ABI v1.
	batchFuncs = map[string]sig{
		abi.ImportRecordNext:     {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}},
		abi.ImportCompletionNext: {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}},
	}
	onBatchSig       = sig{[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}}
	onCompletionsSig = sig{[]api.ValueType{i32, i32}, []api.ValueType{i32}}
)

// check validates the module's imports, exports and memory against ABI v1
// and the limits, collecting every problem.
func (m *Module) check() error {
	probs, imp := m.checkImports()
	exports := m.compiled.ExportedFunctions()
	for _, name := range sortedKeys(requiredExports) {
		want := requiredExports[name]
		f, ok := exports[name]
		if !ok {
			probs = append(probs, fmt.Sprintf("missing required export %s (%s)", name, want))
			continue
		}
		if !want.matches(f.ParamTypes(), f.ResultTypes()) {
			probs = append(probs, fmt.Sprintf("export %s is %s, want %s", name, sig{f.ParamTypes(), f.ResultTypes()}, want))
		}
	}
	m.info.Async = imp.async
	probs = checkOnComplete(exports, imp.async, probs)
	probs = m.checkOnTimer(exports, imp.timers, probs)
	probs = m.checkBatch(exports, imp.recordNext, probs)
	probs = m.checkCompletions(exports, imp.completionNext, probs)
	for _, name := range sortedKeys(exports) {
		f := exports[name]
		m.info.Exports = append(m.info.Exports, fmt.Sprintf("%s: %s", name, sig{f.ParamTypes(), f.ResultTypes()}))
	}
	probs = m.checkMemory(probs)
	if len(probs) > 0 {
		return fmt.Errorf("%w: %s", ErrIncompatible, strings.Join(probs, "; "))
	}
	return nil
}

// importsUsed are the imports an entry point of the module depends on.
type importsUsed struct {
	async          bool // wasmstream_v1.async_start
	recordNext     bool // the batch entry's record_next
	completionNext bool // the batch entry's completion_next
	timers         bool // wasmstream_v1.timer_set (ABI.md §4.2)
}

// checkImports lists the module's imports in its info and returns the
// problems with them, and which of those the entry points depend on it
// imports.
func (m *Module) checkImports() ([]string, importsUsed) {
	var probs []string
	var imp importsUsed
	for _, f := range m.compiled.ImportedFunctions() {
		mod, name, _ := f.Import()
		imp.async = imp.async || mod == abi.HostModule && name == abi.ImportAsyncStart
		imp.recordNext = imp.recordNext || mod == abi.BatchModule && name == abi.ImportRecordNext
		imp.completionNext = imp.completionNext || mod == abi.BatchModule && name == abi.ImportCompletionNext
		imp.timers = imp.timers || mod == abi.HostModule && name == abi.ImportTimerSet
		if mod == meter.ImportModule {
			continue // added by the meter: the module itself may not import it
		}
		s := sig{f.ParamTypes(), f.ResultTypes()}
		m.info.Imports = append(m.info.Imports, fmt.Sprintf("%s.%s: %s", mod, name, s))
		if p := importProblem(mod, name, s); p != "" {
			probs = append(probs, p)
		}
	}
	for _, mem := range m.compiled.ImportedMemories() {
		mod, name, _ := mem.Import()
		probs = append(probs, fmt.Sprintf("imports memory %s.%s; a module must define and export its own memory", mod, name))
	}
	return probs, imp
}

// importProblem is what is wrong with importing mod.name as s: a function
// the host does not provide or not with that signature, another ABI's, or
// WASI the ABI forbids; "" when nothing is.
func importProblem(mod, name string, s sig) string {
	switch {
	case mod == abi.HostModule:
		want, ok := hostFuncs[name]
		if !ok {
			return fmt.Sprintf("imports unknown host function %s.%s (ABI v%d provides %s)", mod, name, abi.Version, strings.Join(sortedKeys(hostFuncs), ", "))
		}
		if !want.matches(s.params, s.results) {
			return fmt.Sprintf("imports %s.%s as %s, want %s", mod, name, s, want)
		}
	case mod == abi.BatchModule:
		want, ok := batchFuncs[name]
		if !ok {
			return fmt.Sprintf("imports unknown host function %s.%s (batch entry v%d provides %s)", mod, name, abi.BatchVersion, strings.Join(sortedKeys(batchFuncs), ", "))
		}
		if !want.matches(s.params, s.results) {
			return fmt.Sprintf("imports %s.%s as %s, want %s", mod, name, s, want)
		}
	case strings.HasPrefix(mod, "wasmstream_batch_v"):
		return fmt.Sprintf("built for wasmstream batch entry %s (imports %s.%s); this host implements batch entry v%d (%s)", strings.TrimPrefix(mod, "wasmstream_batch_"), mod, name, abi.BatchVersion, abi.BatchModule)
	case strings.HasPrefix(mod, "wasmstream_v"):
		return fmt.Sprintf("built for wasmstream ABI %s (imports %s.%s); this host implements ABI v%d (%s)", strings.TrimPrefix(mod, "wasmstream_"), mod, name, abi.Version, abi.HostModule)
	case mod == abi.WASIModule:
		if !abi.WASIAllowed(name) {
			return fmt.Sprintf("imports %s.%s, which the ABI forbids: no filesystem, no sockets (ABI.md §1 allows %s)", mod, name, strings.Join(abi.WASIFunctions(), ", "))
		}
	default:
		return fmt.Sprintf("imports %s.%s from unknown module %q (the host provides %s and %s)", mod, name, mod, abi.HostModule, wasi_snapshot_preview1.ModuleName)
	}
	return ""
}

// checkOnComplete checks the completion entry, which a module that starts
// asynchronous operations must export, adding the problems to probs.
func checkOnComplete(exports map[string]api.FunctionDefinition, async bool, probs []string) []string {
	if f, ok := exports[abi.ExportOnComplete]; ok {
		if !onCompleteSig.matches(f.ParamTypes(), f.ResultTypes()) {
			probs = append(probs, fmt.Sprintf("export %s is %s, want %s", abi.ExportOnComplete, sig{f.ParamTypes(), f.ResultTypes()}, onCompleteSig))
		}
	} else if async {
		probs = append(probs, fmt.Sprintf("imports %s.%s but does not export %s (%s): its operations could never complete", abi.HostModule, abi.ImportAsyncStart, abi.ExportOnComplete, onCompleteSig))
	}
	return probs
}

// checkBatch checks the batch entry, if the module exports it, adding the
// problems to probs.
func (m *Module) checkBatch(exports map[string]api.FunctionDefinition, recordNext bool, probs []string) []string {
	f, ok := exports[abi.ExportOnBatch]
	if !ok {
		return probs
	}
	switch {
	case !onBatchSig.matches(f.ParamTypes(), f.ResultTypes()):
		return append(probs, fmt.Sprintf("export %s is %s, want %s", abi.ExportOnBatch, sig{f.ParamTypes(), f.ResultTypes()}, onBatchSig))
	case !recordNext:
		return append(probs, fmt.Sprintf("exports %s but does not import %s.%s: its batch entry could never begin a record", abi.ExportOnBatch, abi.BatchModule, abi.ImportRecordNext))
	}
	m.info.Batch = true
	return probs
}

// checkMemory checks the exported memory against limits.memory_pages and
// notes its size in the module's info, adding the problems to probs.
func (m *Module) checkMemory(probs []string) []string {
	mem, ok := m.compiled.ExportedMemories()[abi.ExportMemory]
	if !ok {
		return append(probs, fmt.Sprintf("missing required export %q (linear memory)", abi.ExportMemory))
	}
	m.info.MemoryMin = mem.Min()
	if max, ok := mem.Max(); ok {
		m.info.MemoryMax = max
	}
	m.info.Exports = append(m.info.Exports, fmt.Sprintf("memory: min %d pages", mem.Min()))
	if mem.Min() > m.limits.MemoryPages {
		probs = append(probs, fmt.Sprintf("memory minimum of %d pages (%d KiB) exceeds the limit of %d pages (limits.memory_pages)", mem.Min(), mem.Min()*64, m.limits.MemoryPages))
	}
	return probs
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// NewInstance instantiates the module, runs its initialiser and checks its
// ABI version. The instance belongs to the caller's goroutine.
func (m *Module) NewInstance(ctx context.Context) (*Instance, error) {
	if m.rpEnv != nil {
		return m.newRedpandaInstance(ctx) // redpanda_instance.go
	}
	in := &Instance{m: m, id: m.nextID.Add(1), q: completionQueue{ready: make(chan struct{}, 1)}}
	in.stderr.max = 2048
	mc := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(abi.ExportInitialize).
		WithStdout(&in.stderr).
		WithStderr(&in.stderr).
		WithWalltime(m.clock.walltime, m.clock.resolution()).
		WithNanotime(m.clock.nanotime, m.clock.resolution()).
		WithRandSource(rand.Reader)
	for _, k := range sortedKeys(m.cfg.Env) {
		mc = mc.WithEnv(k, m.cfg.Env[k])
	}
	// One context per instance carries it to the host functions; the
	// deadline and the caller's context live in its fuel state, checked by
	// refuel (fuel.go).
	in.ctx = context.WithValue(context.Background(), instanceKey{}, in)
	in.fuel.startCall(ctx, time.Now().Add(max(InstantiateTimeout, m.limits.RecordTimeout)), "initialisation")
	defer in.fuel.endCall()
	// Its memory grows by doubling (linmem), not by the pages asked, from
	// room for twice what its module's load check grew to.
	mod, err := m.rt.InstantiateModule(experimental.WithMemoryAllocator(in.ctx, m.mems.Allocator()), m.compiled, mc)
	if err != nil {
		if in.fault != nil {
			err = in.fault
		}
		return nil, fmt.Errorf("%w: instantiate: %v%s", ErrIncompatible, err, in.stderr.suffix())
	}
	in.mod = mod
	in.entry.record = mod.ExportedFunction(abi.ExportOnRecord)
	in.entry.complete = mod.ExportedFunction(abi.ExportOnComplete)
	in.entry.timer = mod.ExportedFunction(abi.ExportOnTimer)
	if m.info.Batch {
		in.entry.batch = mod.ExportedFunction(abi.ExportOnBatch)
	}
	if m.info.Completions {
		in.entry.completions = mod.ExportedFunction(abi.ExportOnCompletions)
	}
	in.stack = make([]uint64, 3)
	in.base, in.baseCancel = context.WithCancel(context.Background())
	vf := mod.ExportedFunction(abi.ExportVersion)
	res, err := vf.Call(in.ctx)
	if err != nil {
		if in.fault != nil {
			err = in.fault
		}
		mod.Close(ctx)
		return nil, fmt.Errorf("%w: %s(): %v%s", ErrIncompatible, abi.ExportVersion, err, in.stderr.suffix())
	}
	if v := int32(res[0]); v != abi.Version {
		mod.Close(ctx)
		return nil, fmt.Errorf("%w: %s() returned %d; this host implements ABI v%d", ErrIncompatible, abi.ExportVersion, v, abi.Version)
	}
	in.fault = nil
	return in, nil
}

// checkCompletions checks the completions entry (ABI.md §10.1), if the
// module exports it, adding the problems to probs.
func (m *Module) checkCompletions(exports map[string]api.FunctionDefinition, completionNext bool, probs []string) []string {
	f, ok := exports[abi.ExportOnCompletions]
	if !ok {
		return probs
	}
	_, onComplete := exports[abi.ExportOnComplete]
	switch {
	case !onCompletionsSig.matches(f.ParamTypes(), f.ResultTypes()):
		return append(probs, fmt.Sprintf("export %s is %s, want %s", abi.ExportOnCompletions, sig{f.ParamTypes(), f.ResultTypes()}, onCompletionsSig))
	case !completionNext:
		return append(probs, fmt.Sprintf("exports %s but does not import %s.%s: its completions entry could never begin a completion", abi.ExportOnCompletions, abi.BatchModule, abi.ImportCompletionNext))
	case !onComplete:
		return append(probs, fmt.Sprintf("exports %s but not %s (%s), which delivers a completion on its own", abi.ExportOnCompletions, abi.ExportOnComplete, onCompleteSig))
	}
	m.info.Completions = true
	return probs
}
