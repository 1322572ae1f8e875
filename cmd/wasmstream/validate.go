package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/wasmstream/wasmstream/host"
)

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pages := fs.Uint("memory-pages", uint(host.DefaultLimits.MemoryPages), "memory limit to check the module against, in 64 KiB pages (as limits.memory_pages)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: wasmstream validate [--memory-pages N] module.wasm...\n\nChecks each module against the wasmstream ABI: format, imports, exports,\nmemory minimum, initialisation and the version handshake. Prints what it\nimports and exports. Exits 1 if any module does not fit.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	ctx := context.Background()
	e, err := host.NewEngine("", nil)
	if err != nil {
		fmt.Fprintf(stderr, "wasmstream: %v\n", err)
		return 1
	}
	defer e.Close(ctx)
	rc := 0
	for _, path := range fs.Args() {
		b, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
			rc = 1
			continue
		}
		start := time.Now()
		m, err := e.Load(ctx, b, host.ModuleConfig{Name: path, Limits: host.Limits{MemoryPages: uint32(*pages)}})
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", path, err)
			rc = 1
			continue
		}
		info := m.Info()
		fmt.Fprintf(stdout, "%s: ok\n  ABI version: %d\n  sha256: %s\n  size: %d bytes\n  memory: min %d pages", path, info.ABIVersion, info.Digest, info.Size, info.MemoryMin)
		if info.MemoryMax > 0 {
			fmt.Fprintf(stdout, ", max %d pages", info.MemoryMax)
		}
		fmt.Fprintf(stdout, " (limit %d)\n", *pages)
		if info.Async {
			fmt.Fprintf(stdout, "  asynchronous operations: yes (needs async.http.allow_hosts for any network access)\n")
		}
		fmt.Fprintf(stdout, "  load + first instance: %s\n  exports:\n", time.Since(start).Round(time.Millisecond))
		for _, x := range info.Exports {
			fmt.Fprintf(stdout, "    %s\n", x)
		}
		fmt.Fprintf(stdout, "  imports:\n")
		for _, x := range info.Imports {
			fmt.Fprintf(stdout, "    %s\n", x)
		}
		m.Close(ctx)
	}
	return rc
}
