package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/wasmstream/wasmstream/host/internal/codecache"
)

// CacheStats counts what the engine's compile cache on disk did.
type CacheStats struct {
	Dir      string // "" with no cache on disk
	Hits     int64  // modules loaded from verified entries, not compiled
	Rejected int64  // entries that did not match their manifest: deleted, compiled again
}

// CacheStats returns the compile cache's counts.
func (e *Engine) CacheStats() CacheStats {
	s := CacheStats{Hits: e.cacheHit.Load(), Rejected: e.cacheRej.Load()}
	if e.disk != nil {
		s.Dir = e.disk.Dir()
	}
	return s
}

// compileCode compiles code (the module as bounded and metered) in a new
// runtime whose memories are bounded to memPages, through the compile
// cache: on disk if the engine has one, else in memory. The cache only
// saves time: an entry on disk that does not verify is deleted and the code
// compiled again; if the compile fails with the cache on disk, the module's
// entries are dropped and the code compiled without it. fromDisk reports that nothing
// was compiled.
func (e *Engine) compileCode(ctx context.Context, code []byte, memPages uint32) (rt wazero.Runtime, cm wazero.CompiledModule, fromDisk bool, err error) {
	runtime := func(c wazero.CompilationCache) wazero.Runtime {
		return wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().
			WithCompilationCache(c).
			WithMemoryLimitPages(memPages))
	}
	h := sha256.New()
	h.Write([]byte(compilerID()))
	h.Write([]byte{0})
	h.Write(code)
	digest := hex.EncodeToString(h.Sum(nil))
	cache, mod := e.cacheFor(digest)
	rt = runtime(cache)
	cm, err = compile(ctx, rt, code)
	if mod != nil {
		switch {
		case err == nil:
			added, serr := mod.Seal()
			if serr != nil {
				e.log.Warn("compile cache: cannot record the module's entries; it will be compiled again next time", "dir", mod.Dir(), "err", serr)
			}
			fromDisk = serr == nil && mod.Verified > 0 && added == 0
		default:
			// Entries this host wrote and verified yet refused (a wazero
			// that reads them differently), or an entry that could not be
			// written (a full disk): compile without the cache. (An invalid
			// module fails twice.)
			e.log.Warn("compile cache: failed with the cache; compiling without it", "dir", mod.Dir(), "err", err)
			rt.Close(ctx)
			e.dropCache(ctx, digest, mod)
			rt = runtime(e.cache)
			cm, err = compile(ctx, rt, code)
		}
	}
	if err != nil {
		rt.Close(ctx)
		return nil, nil, false, err
	}
	if fromDisk {
		e.cacheHit.Add(1)
	}
	return rt, cm, fromDisk, nil
}

// compilerID names the compiler that wrote an entry: wazero's module
// version and checksum from the binary's build information. wazero keys its
// entries by its version too, but a binary built without module information
// (a test binary, go run) calls every version "dev"; there the executable's
// own digest stands in, so a rebuilt binary never reads an older one's code.
var compilerID = sync.OnceValue(func() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/tetratelabs/wazero" {
				if d.Replace != nil {
					d = d.Replace
				}
				if d.Version != "" && d.Version != "(devel)" && d.Sum != "" {
					return "wazero " + d.Version + " " + d.Sum
				}
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		if f, err := os.Open(exe); err == nil {
			defer f.Close()
			h := sha256.New()
			if _, err := io.Copy(h, f); err == nil {
				return "executable " + hex.EncodeToString(h.Sum(nil))
			}
		}
	}
	return "unknown " + time.Now().String() // no cache entry outlives the process
})

// cacheFor returns the compilation cache for the code of the given digest.
// The first time in this process, with a cache on disk, it also returns the
// module's directory, its entries checked (see codecache): the caller seals
// it after compiling. A cache on disk that cannot be used costs a compile,
// never the module.
func (e *Engine) cacheFor(digest string) (wazero.CompilationCache, *codecache.Module) {
	if e.disk == nil {
		return e.cache, nil
	}
	e.cacheMu.Lock()
	defer e.cacheMu.Unlock()
	if c, ok := e.caches[digest]; ok {
		return c, nil
	}
	mod, err := e.disk.Module(digest)
	if err != nil {
		e.log.Warn("compile cache: module directory unusable; compiling without the cache", "dir", e.disk.Dir(), "err", err)
		return e.cache, nil
	}
	if len(mod.Rejected) > 0 {
		e.cacheRej.Add(int64(len(mod.Rejected)))
		e.log.Warn("compile cache: entries not written by this host or damaged were deleted", "dir", mod.Dir(), "entries", mod.Rejected)
	}
	c, err := wazero.NewCompilationCacheWithDir(mod.Dir())
	if err != nil {
		e.log.Warn("compile cache: compiling without the cache", "dir", mod.Dir(), "err", err)
		return e.cache, nil
	}
	e.caches[digest] = c
	return c, mod
}

// dropCache deletes a module's entries on disk and forgets its cache.
func (e *Engine) dropCache(ctx context.Context, digest string, mod *codecache.Module) {
	e.cacheMu.Lock()
	c := e.caches[digest]
	delete(e.caches, digest)
	e.cacheMu.Unlock()
	if c != nil {
		c.Close(ctx)
	}
	if err := mod.Drop(); err != nil {
		e.log.Warn("compile cache: cannot delete the module's entries", "dir", mod.Dir(), "err", err)
	}
}
