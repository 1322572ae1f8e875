package host

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/internal/meter"
	"github.com/wasmstream/wasmstream/host/internal/rpabi"
	"github.com/wasmstream/wasmstream/host/internal/wasmbin"
)

// A second kind of module: an unmodified Redpanda Data Transform (a WASI
// command importing redpanda_transform), recognised by its imports at load
// (docs/REDPANDA-TRANSFORMS.md). Its instances serve the same interface as
// a wasmstream module's: ProcessBatch hands the transform's parked
// read_batch_header a batch and collects its writes (redpanda_instance.go),
// so the engine drives both kinds alike.

// The kinds of module (Info.Kind).
const (
	KindWasmstream = "wasmstream"         // exports wasmstream_on_record (abi/ABI.md)
	KindRedpanda   = "redpanda-transform" // imports redpanda_transform, exports _start
)

// RedpandaMemoryPages is the memory limit of a Redpanda transform's
// instances when ModuleConfig.Limits sets none. A transform built with the
// standard Go toolchain (GOOS=wasip1) declares a minimum of 35 to 38 pages
// (2.2 to 2.4 MiB; 38 built with go1.26), over Redpanda's own 2 MiB
// default (RedpandaConfig.Strict keeps that one), and its garbage
// collector lets the heap reach 4 MB before it collects: the Go
// conformance transform settles at 117 pages (7.3 MiB) copying 64 KiB
// records (TestRedpandaMemory). 256 pages (16 MiB) run it with room to
// spare; a Rust transform stays near 22 pages.
const RedpandaMemoryPages = 256

// RedpandaConfig is how a Redpanda transform runs; a wasmstream module
// ignores it.
type RedpandaConfig struct {
	// InputTopic is REDPANDA_INPUT_TOPIC. The output topics
	// (REDPANDA_OUTPUT_TOPIC_0..n-1) are ModuleConfig.AllowedTopics, the
	// first the pipeline's output.
	InputTopic string
	// Strict keeps Redpanda's own limits: 2 MiB of memory (32 pages,
	// whatever Limits.MemoryPages says) and at most 8 output topics.
	Strict bool
	// PartitionSameAsInput pins each output to the input record's
	// partition, which the output partitioner takes modulo the topic's
	// partition count (Redpanda's rule); else Partition is -1 and the
	// partitioner hashes the key.
	PartitionSameAsInput bool
}

// rpSigs are the redpanda_transform functions the host serves.
var rpSigs = map[string]sig{
	rpabi.CheckABIVersion1:       {},
	rpabi.CheckABIVersion2:       {},
	rpabi.CheckABIVersion3:       {},
	rpabi.ReadBatchHeader:        {[]api.ValueType{i32, i32, i32, i32, i32, i32, i32, i32, i32, i32}, []api.ValueType{i32}},
	rpabi.ReadNextRecord:         {[]api.ValueType{i32, i32, i32, i32, i32}, []api.ValueType{i32}},
	rpabi.WriteRecord:            {[]api.ValueType{i32, i32}, []api.ValueType{i32}},
	rpabi.WriteRecordWithOptions: {[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}},
	rpabi.ReadBatchMetadata:      {[]api.ValueType{i32, i32, i32}, []api.ValueType{i32}},
}

// rpStartSig is a WASI command's entry.
var rpStartSig = sig{}

// isRedpandaTransform reports whether wasm imports from redpanda_transform:
// the one sign of a Redpanda transform. A module that does not decode is
// not one (Load then says what is wrong with it).
func isRedpandaTransform(wasm []byte) bool {
	if len(wasm) < 8 {
		return false
	}
	r := &wasmbin.Reader{Buf: wasm, Pos: 8, End: len(wasm)}
	for r.Left() > 0 {
		id, _ := r.Byte()
		size, err := r.U32()
		if err != nil || uint64(size) > uint64(r.Left()) {
			return false
		}
		if id == wasmbin.SecImport {
			sec := &wasmbin.Reader{Buf: wasm, Pos: r.Pos, End: r.Pos + int(size)}
			return importsModule(sec, rpabi.Module)
		}
		if id != 0 && id > wasmbin.SecImport {
			return false // sections are ordered: the imports come before any of these
		}
		r.Pos += int(size)
	}
	return false
}

// importsModule reports whether the import section r holds an import from
// module.
func importsModule(r *wasmbin.Reader, module string) bool {
	n, err := r.Count(4)
	if err != nil {
		return false
	}
	for i := 0; i < n; i++ {
		mod, err := r.Name()
		if err != nil {
			return false
		}
		if string(mod) == module {
			return true
		}
		if _, err := r.Name(); err != nil {
			return false
		}
		kind, err := r.Byte()
		if err != nil {
			return false
		}
		switch kind {
		case 0: // function: a type index
			_, err = r.U32()
		case 1: // table: a reference type, limits
			if _, err = r.Byte(); err == nil {
				_, _, _, err = r.Limits()
			}
		case 2: // memory: limits
			_, _, _, err = r.Limits()
		case 3: // global: a value type, mutability
			if _, err = r.Byte(); err == nil {
				_, err = r.Byte()
			}
		default:
			return false
		}
		if err != nil {
			return false
		}
	}
	return false
}

// redpandaLimits are the limits a Redpanda transform runs under: the
// configured ones, RedpandaMemoryPages when none is set, Redpanda's 2 MiB
// in strict mode.
func redpandaLimits(cfg ModuleConfig) Limits {
	l := cfg.Limits
	if l.MemoryPages == 0 {
		l.MemoryPages = RedpandaMemoryPages
	}
	if cfg.Redpanda.Strict {
		l.MemoryPages = rpabi.StrictMemoryPages
	}
	return l.withDefaults()
}

// checkRedpandaConfig refuses a configuration a Redpanda transform cannot
// run under: its environment may not set the REDPANDA_ variables the host
// sets, and strict mode allows Redpanda's 8 output topics.
func checkRedpandaConfig(cfg ModuleConfig) error {
	var probs []string
	for _, k := range sortedKeys(cfg.Env) {
		if strings.HasPrefix(k, rpabi.EnvPrefix) {
			probs = append(probs, fmt.Sprintf("env %s: names starting %s are the host's to set for a Redpanda transform (pipelines.%s.env)", k, rpabi.EnvPrefix, cfg.Name))
		}
	}
	if n := len(cfg.AllowedTopics); cfg.Redpanda.Strict && n > rpabi.StrictMaxOutputTopics {
		probs = append(probs, fmt.Sprintf("%d output topics: Redpanda's strict mode allows %d (the output and allowed_outputs of pipelines.%s)", n, rpabi.StrictMaxOutputTopics, cfg.Name))
	}
	if len(probs) > 0 {
		return fmt.Errorf("%w: %s", ErrIncompatible, strings.Join(probs, "; "))
	}
	return nil
}

// redpandaEnv is a transform's environment: the pipeline's, then the
// topics (REDPANDA_INPUT_TOPIC, REDPANDA_OUTPUT_TOPIC_i).
func redpandaEnv(cfg ModuleConfig) [][2]string {
	env := make([][2]string, 0, len(cfg.Env)+1+len(cfg.AllowedTopics))
	for _, k := range sortedKeys(cfg.Env) {
		env = append(env, [2]string{k, cfg.Env[k]})
	}
	env = append(env, [2]string{rpabi.EnvInputTopic, cfg.Redpanda.InputTopic})
	for i, t := range cfg.AllowedTopics {
		env = append(env, [2]string{rpabi.EnvOutputTopic + strconv.Itoa(i), t})
	}
	return env
}

// setupRedpanda checks a Redpanda transform's imports, exports and memory
// and instantiates the host modules it imports (WASI, redpanda_transform,
// redpanda_schema_registry when the pipeline grants the registry);
// the meter's is instantiated by Load for both kinds.
func (m *Module) setupRedpanda(ctx context.Context) error {
	m.info.Kind = KindRedpanda
	m.info.ABIVersion = 0 // not wasmstream's ABI
	m.info.Batch = true   // ProcessBatch runs many records per batch header
	var probs []string
	usesSR := false
	for _, f := range m.compiled.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod == meter.ImportModule {
			continue
		}
		s := sig{f.ParamTypes(), f.ResultTypes()}
		m.info.Imports = append(m.info.Imports, fmt.Sprintf("%s.%s: %s", mod, name, s))
		p := ""
		if mod == rpabi.SchemaRegistryModule {
			p = srImportProblem(name, s, m.async.SchemaRegistry.Enabled, m.srKey())
			usesSR = true
		} else {
			p = redpandaImportProblem(mod, name, s)
		}
		if p != "" {
			probs = append(probs, p)
		}
	}
	for _, mem := range m.compiled.ImportedMemories() {
		mod, name, _ := mem.Import()
		probs = append(probs, fmt.Sprintf("imports memory %s.%s; a module must define and export its own memory", mod, name))
	}
	exports := m.compiled.ExportedFunctions()
	if f, ok := exports[rpabi.ExportStart]; !ok {
		probs = append(probs, fmt.Sprintf("a Redpanda transform must export %s (%s): it imports %s but has no entry", rpabi.ExportStart, rpStartSig, rpabi.Module))
	} else if !rpStartSig.matches(f.ParamTypes(), f.ResultTypes()) {
		probs = append(probs, fmt.Sprintf("export %s is %s, want %s", rpabi.ExportStart, sig{f.ParamTypes(), f.ResultTypes()}, rpStartSig))
	}
	for _, name := range sortedKeys(exports) {
		f := exports[name]
		m.info.Exports = append(m.info.Exports, fmt.Sprintf("%s: %s", name, sig{f.ParamTypes(), f.ResultTypes()}))
	}
	probs = m.checkMemory(probs)
	if len(probs) > 0 {
		return fmt.Errorf("%w: %s", ErrIncompatible, strings.Join(probs, "; "))
	}
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, m.rt); err != nil {
		return fmt.Errorf("host: wasi: %w", err)
	}
	if usesSR {
		if err := m.instantiateSRModule(ctx); err != nil {
			return err
		}
	}
	return m.instantiateRedpandaModule(ctx)
}

// redpandaImportProblem is what is wrong with a Redpanda transform
// importing mod.name as s; "" when nothing is.
func redpandaImportProblem(mod, name string, s sig) string {
	switch mod {
	case rpabi.Module:
		want, ok := rpSigs[name]
		if !ok {
			return fmt.Sprintf("imports unknown host function %s.%s (this host serves %s)", mod, name, strings.Join(sortedKeys(rpSigs), ", "))
		}
		if !want.matches(s.params, s.results) {
			return fmt.Sprintf("imports %s.%s as %s, want %s", mod, name, s, want)
		}
	case rpabi.AIModule:
		return fmt.Sprintf("imports %s.%s: Redpanda's AI module is not supported", mod, name)
	case abi.WASIModule:
		// The whole preview-1 set, as Redpanda links it: a standard-Go
		// transform imports fd_read, path_open and the rest through package
		// os. None reaches anything: an instance has no preopened directory,
		// no socket and an empty stdin (newRedpandaInstance).
	case abi.HostModule, abi.BatchModule:
		return fmt.Sprintf("imports %s.%s beside %s: a module is either a wasmstream module or a Redpanda transform", mod, name, rpabi.Module)
	default:
		return fmt.Sprintf("imports %s.%s from unknown module %q (a Redpanda transform may import %s, %s and %s)", mod, name, mod, rpabi.Module, rpabi.SchemaRegistryModule, wasi_snapshot_preview1.ModuleName)
	}
	return ""
}

func (m *Module) instantiateRedpandaModule(ctx context.Context) error {
	b := m.rt.NewHostModuleBuilder(rpabi.Module)
	def := func(name string, fn api.GoModuleFunc) {
		s := rpSigs[name]
		b.NewFunctionBuilder().WithGoModuleFunction(fn, s.params, s.results).Export(name)
	}
	noop := api.GoModuleFunc(func(context.Context, api.Module, []uint64) {})
	def(rpabi.CheckABIVersion1, noop)
	def(rpabi.CheckABIVersion2, noop)
	def(rpabi.CheckABIVersion3, noop)
	def(rpabi.ReadBatchHeader, hostRPReadBatchHeader)
	def(rpabi.ReadNextRecord, hostRPReadNextRecord)
	def(rpabi.WriteRecord, hostRPWriteRecord)
	def(rpabi.WriteRecordWithOptions, hostRPWriteRecordWithOptions)
	def(rpabi.ReadBatchMetadata, hostRPReadBatchMetadata)
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("host: instantiate %s: %w", rpabi.Module, err)
	}
	return nil
}
