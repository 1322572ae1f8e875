// Package host loads wasmstream processor modules with wazero and runs them.
//
// An Engine compiles each module once (compiled code is cached, in memory and
// optionally on disk) and a Module instantiates it as many times as the
// scheduler asks. An Instance belongs to one goroutine at a time: it is not
// safe for concurrent use. Every guest fault (trap, exit, deadline, out of
// memory, bad pointer) is returned as a *Fault in a Result and leaves the
// instance dead; the caller replaces it with a fresh one. Nothing a guest does
// panics the host.
package host

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tetratelabs/wazero"

	"github.com/wasmstream/wasmstream/host/internal/slots"
)

// Engine compiles modules and owns the compiled-code cache. Safe for
// concurrent use.
type Engine struct {
	cache wazero.CompilationCache
	log   *slog.Logger
	// slots bounds guest calls executing at once to the cores the Go
	// runtime uses (RATIONALE.md, "Guest calls and cores") and shares them
	// among pipelines by weight: one group per module name, so a pipeline's
	// retry tier and its deployed versions share one share.
	slots *slots.Pool
	// asyncOps counts guest asynchronous operations in flight.
	asyncOps atomic.Int64
	// held counts the bytes of emitted outputs held (heldoutputs.go).
	held heldOutputs
	// logStats counts dropped guest log lines per pipeline name (guestlog.go).
	logMu    sync.Mutex
	logStats map[string]*guestLogStats
}

// AsyncInFlight is the number of asynchronous operations in flight across
// every module of the engine.
func (e *Engine) AsyncInFlight() int64 { return e.asyncOps.Load() }

// NewEngine returns an engine. With a non-empty cacheDir compiled code is
// also kept on disk, so a restart does not recompile.
func NewEngine(cacheDir string, log *slog.Logger) (*Engine, error) {
	if log == nil {
		log = slog.Default()
	}
	e := &Engine{log: log, slots: slots.New(runtime.GOMAXPROCS(0), slots.Options{})}
	if cacheDir == "" {
		e.cache = wazero.NewCompilationCache()
		return e, nil
	}
	c, err := wazero.NewCompilationCacheWithDir(cacheDir)
	if err != nil {
		return nil, fmt.Errorf("host: compilation cache %s: %w", cacheDir, err)
	}
	e.cache = c
	return e, nil
}

// Close releases the compilation cache. Modules loaded from the engine must
// be closed first.
func (e *Engine) Close(ctx context.Context) error { return e.cache.Close(ctx) }
