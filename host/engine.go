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
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/wasmstream/wasmstream/host/asyncop"
	"github.com/wasmstream/wasmstream/host/internal/codecache"
	"github.com/wasmstream/wasmstream/host/internal/slots"
)

// Engine compiles modules and owns the compiled-code cache. Safe for
// concurrent use.
type Engine struct {
	// cache is the in-memory compilation cache, used when disk is nil.
	cache wazero.CompilationCache
	// disk keeps compiled code across restarts (nil: memory only); caches
	// holds one compilation cache per digest of compiled code, on its
	// directory in disk (compilecache.go).
	disk     *codecache.Cache
	cacheMu  sync.Mutex
	caches   map[string]wazero.CompilationCache
	cacheHit atomic.Int64 // modules loaded from verified entries on disk
	cacheRej atomic.Int64 // entries on disk found not to match their manifest, deleted
	log      *slog.Logger
	// slots bounds guest calls executing at once to the cores the Go
	// runtime uses (RATIONALE.md, "Faults and instances", on guest calls
	// and cores) and shares them
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
	// clockRes is the resolution, in nanoseconds, of the clocks guests read
	// (clock.go); started is the zero of their monotonic clock.
	clockRes atomic.Int64
	started  time.Time
	// asyncEnv is what the asynchronous operations of every module share
	// (SetAsyncEnv; nil: nothing).
	asyncEnv atomic.Pointer[asyncop.Env]
}

// AsyncInFlight is the number of asynchronous operations in flight across
// every module of the engine.
func (e *Engine) AsyncInFlight() int64 { return e.asyncOps.Load() }

// NewEngine returns an engine. With a non-empty cacheDir compiled code is
// also kept on disk, so a restart does not recompile; the directory must
// belong to this process's user and be writable by no one else.
func NewEngine(cacheDir string, log *slog.Logger) (*Engine, error) {
	if log == nil {
		log = slog.Default()
	}
	e := &Engine{log: log, slots: slots.New(runtime.GOMAXPROCS(0), slots.Options{}),
		cache: wazero.NewCompilationCache(), caches: map[string]wazero.CompilationCache{}, started: time.Now()}
	e.SetClockResolution(DefaultClockResolution)
	if cacheDir != "" {
		d, err := codecache.Open(cacheDir)
		if err != nil {
			return nil, fmt.Errorf("host: compile cache: %w", err)
		}
		e.disk = d
	}
	return e, nil
}

// Close releases the compilation caches. Modules loaded from the engine
// must be closed first.
func (e *Engine) Close(ctx context.Context) error {
	e.cacheMu.Lock()
	defer e.cacheMu.Unlock()
	errs := []error{e.cache.Close(ctx)}
	for k, c := range e.caches {
		errs = append(errs, c.Close(ctx))
		delete(e.caches, k)
	}
	return errors.Join(errs...)
}
