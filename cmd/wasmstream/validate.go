package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/termsafe"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defaults := config.PipelineDefaults().Limits
	pages := fs.Uint("memory-pages", uint(defaults.MemoryPages), "memory limit to check the module against, in 64 KiB pages (as limits.memory_pages)")
	tables := fs.Uint("table-elements", uint(defaults.TableElements), "table limit to check the module against, in elements of all its tables together (as limits.table_elements)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: wasmstream validate [--memory-pages N] [--table-elements N] module.wasm...\n\nChecks each module against the wasmstream ABI: format, imports, exports,\nmemory minimum, initialisation and the version handshake. Prints what it\nimports and exports. Exits 1 if any module does not fit.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	if *pages == 0 || *pages > 65536 {
		fmt.Fprintf(stderr, "wasmstream validate: --memory-pages %d: want 1 to 65536\n", *pages)
		return 2
	}
	if *tables == 0 || *tables > host.MaxTableElements {
		fmt.Fprintf(stderr, "wasmstream validate: --table-elements %d: want 1 to %d\n", *tables, host.MaxTableElements)
		return 2
	}
	return eachModule(fs.Args(), stderr, func(ctx context.Context, e *host.Engine, path string, b []byte) bool {
		start := time.Now()
		m, err := e.Load(ctx, b, host.ModuleConfig{Name: path, Limits: host.Limits{MemoryPages: uint32(*pages), TableElements: uint32(*tables)}})
		if err != nil {
			printErr(stderr, termsafe.Line(path), err)
			return false
		}
		info := m.Info()
		fmt.Fprintf(stdout, "%s: ok\n", termsafe.Line(path))
		if info.Kind == host.KindRedpanda {
			fmt.Fprintf(stdout, "  kind: Redpanda Data Transform (imports redpanda_transform; runs unmodified, docs/REDPANDA-TRANSFORMS.md)\n")
		} else {
			fmt.Fprintf(stdout, "  kind: wasmstream module\n  ABI version: %d\n", info.ABIVersion)
		}
		fmt.Fprintf(stdout, "  sha256: %s\n  size: %d bytes\n  memory: min %d pages", info.Digest, info.Size, info.MemoryMin)
		if info.MemoryMax > 0 {
			fmt.Fprintf(stdout, ", max %d pages", info.MemoryMax)
		}
		fmt.Fprintf(stdout, " (limit %d)\n", *pages)
		if info.Async {
			fmt.Fprintf(stdout, "  asynchronous operations: yes (needs async.http.allow_hosts for any network access)\n")
		}
		fmt.Fprintf(stdout, "  load + first instance: %s\n  exports:\n", time.Since(start).Round(time.Millisecond))
		// Names come from the module: printed escaped, so a hostile one
		// cannot drive the terminal.
		for _, x := range info.Exports {
			fmt.Fprintf(stdout, "    %s\n", termsafe.Line(x))
		}
		fmt.Fprintf(stdout, "  imports:\n")
		for _, x := range info.Imports {
			fmt.Fprintf(stdout, "    %s\n", termsafe.Line(x))
		}
		m.Close(ctx)
		return true
	})
}

// eachModule reads every module file in paths and hands it to check with an
// engine of its own, reporting an unreadable file on stderr; the exit code is
// 1 when any file could not be read or check reported false.
func eachModule(paths []string, stderr io.Writer, check func(ctx context.Context, e *host.Engine, path string, b []byte) bool) int {
	ctx := context.Background()
	e, err := host.NewEngine("", nil)
	if err != nil {
		printErr(stderr, "wasmstream", err)
		return 1
	}
	defer e.Close(ctx)
	rc := 0
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			printErr(stderr, termsafe.Line(path), err)
			rc = 1
			continue
		}
		if !check(ctx, e, path, b) {
			rc = 1
		}
	}
	return rc
}
