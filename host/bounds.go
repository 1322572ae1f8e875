package host

import (
	"fmt"
	"strings"

	"github.com/wasmstream/wasmstream/host/internal/wasmbin"
	"github.com/wasmstream/wasmstream/host/limits"
)

// Fixed bounds on what a module may declare, checked by Engine.Load before
// wazero decodes the module (RATIONALE.md, "Every guest resource is
// bounded"). wazero sizes its allocations from these declarations, once per
// module when it decodes and compiles it and again per instance, so each
// bound caps memory the host would otherwise spend at the module's word. They
// are the WebAssembly JS API's implementation limits (which every browser
// enforces, so toolchains stay under them) tightened where wazero spends
// memory per instance; the Go and C guests use a small fraction of each
// (a Go guest: ~20 imports, ~2,000 functions, 8 globals, ~40,000 data
// segments, ≤ 20 locals per function, a 6,000-element table). A module over
// one is refused at load with a message naming the bound.
const (
	// MaxModuleBytes caps the module binary. Compiling takes about 25 times
	// the module's size in memory, once per module.
	MaxModuleBytes = limits.MaxModuleBytes
	MaxTypes       = 100_000
	// MaxImports is generous: a module may only import the host's
	// functions and the allowed WASI calls, about 40 in all.
	MaxImports   = 1_000
	MaxFunctions = 1_000_000
	MaxGlobals   = 10_000
	MaxExports   = 10_000
	// MaxTables caps tables per module; their elements together are
	// bounded by Limits.TableElements.
	MaxTables          = 16
	MaxElementSegments = 100_000
	MaxDataSegments    = 1_000_000
	MaxParams          = 1_000 // per function type, and as many results
	// MaxLocals caps the locals one function declares: wazero allocates
	// for each when decoding and in each call frame.
	MaxLocals      = 50_000
	MaxBodyBytes   = 7_654_321 // one function's code
	MaxNameEntries = 10_000_000
	MaxTags        = 10_000
	tableElemBytes = 8 // a table element is a pointer-sized reference
	// MaxTableElements is the highest limits.table_elements (128 MiB of
	// references per instance).
	MaxTableElements = limits.MaxTableElements
)

// TableBytes is the most memory the tables of one instance may use under
// limits: table_elements references of 8 bytes.
func (l Limits) TableBytes() int64 {
	return int64(l.withDefaults().TableElements) * tableElemBytes
}

// bound reads wasm, refuses what can never fit the bounds and returns the
// module to compile: wasm itself, or a copy whose tables declare a maximum
// so that table.grow past limits.table_elements returns -1 in the guest, as
// memory.grow does past limits.memory_pages. Every problem is listed.
func bound(wasm []byte, lim Limits) ([]byte, error) {
	if len(wasm) > MaxModuleBytes {
		return nil, fmt.Errorf("%w: module of %d bytes exceeds the host's bound of %d bytes (host.MaxModuleBytes)", ErrIncompatible, len(wasm), MaxModuleBytes)
	}
	s, err := wasmbin.Read(wasm)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrIncompatible, err)
	}
	var probs []string
	over := func(what string, n uint64, bound uint64, name string) {
		if n > bound {
			probs = append(probs, fmt.Sprintf("declares %d %s, over the host's bound of %d (%s)", n, what, bound, name))
		}
	}
	over("types", uint64(s.Types), MaxTypes, "host.MaxTypes")
	over("imports", uint64(s.Imports), MaxImports, "host.MaxImports")
	over("functions", uint64(s.Functions+s.ImportedFunctions), MaxFunctions, "host.MaxFunctions")
	over("globals", uint64(s.Globals+s.ImportedGlobals), MaxGlobals, "host.MaxGlobals")
	over("exports", uint64(s.Exports), MaxExports, "host.MaxExports")
	over("tables", uint64(len(s.Tables)+s.ImportedTables), MaxTables, "host.MaxTables")
	over("element segments", uint64(s.ElementSegments), MaxElementSegments, "host.MaxElementSegments")
	over("data segments", uint64(s.DataSegments), MaxDataSegments, "host.MaxDataSegments")
	over("parameters in a function type", uint64(s.MaxParams), MaxParams, "host.MaxParams")
	over("results in a function type", uint64(s.MaxResults), MaxParams, "host.MaxParams")
	over("names in its name section", uint64(s.NameEntries), MaxNameEntries, "host.MaxNameEntries")
	over("tags", uint64(s.Tags+s.ImportedTags), MaxTags, "host.MaxTags")
	if s.MaxLocals > MaxLocals {
		probs = append(probs, fmt.Sprintf("function %d declares %d locals, over the host's bound of %d per function (host.MaxLocals)", s.ImportedFunctions+s.MaxLocalsFunc, s.MaxLocals, MaxLocals))
	}
	if s.MaxBodyBytes > MaxBodyBytes {
		probs = append(probs, fmt.Sprintf("has a function body of %d bytes, over the host's bound of %d (host.MaxBodyBytes)", s.MaxBodyBytes, MaxBodyBytes))
	}
	if s.ImportedTables > 0 || s.ImportedGlobals > 0 || s.ImportedTags > 0 {
		probs = append(probs, "imports a table, global or tag; a module may import only functions (ABI.md §1)")
	}
	// Tables: the declared minimums must fit, and element segments (which
	// fill tables) cannot hold more references than the tables may.
	limit := uint64(lim.TableElements)
	var mins uint64
	for _, t := range s.Tables {
		mins += uint64(t.Min)
	}
	if mins > limit {
		probs = append(probs, fmt.Sprintf("tables declare %d elements (%d MiB) at instantiation, over the limit of %d elements (limits.table_elements)", mins, mins*tableElemBytes>>20, limit))
	}
	if s.ElementEntries > limit {
		probs = append(probs, fmt.Sprintf("element segments hold %d references, over the limit of %d table elements (limits.table_elements)", s.ElementEntries, limit))
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrIncompatible, strings.Join(probs, "; "))
	}
	return boundTables(wasm, s, limit-mins), nil
}

// boundTables gives each table a maximum: its minimum plus an even share of
// the headroom the limit leaves above the minimums (or its own maximum when
// lower), so that the tables of an instance never hold more than the limit
// together. A module whose tables already fit is returned unchanged.
func boundTables(wasm []byte, s *wasmbin.Summary, headroom uint64) []byte {
	if len(s.Tables) == 0 {
		return wasm
	}
	share := headroom / uint64(len(s.Tables))
	maxes := make([]uint32, len(s.Tables))
	change := false
	for i, t := range s.Tables {
		m := uint64(t.Min) + share
		if t.HasMax && uint64(t.Max) <= m {
			maxes[i] = t.Max
			continue
		}
		maxes[i], change = uint32(m), true
	}
	if !change {
		return wasm
	}
	return wasmbin.WithTableMax(wasm, s, maxes)
}
