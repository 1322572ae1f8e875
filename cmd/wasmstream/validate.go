package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/termsafe"
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// validateFlags are validate's: the limits a module is checked against,
// or the config whose pipeline runs it (its limits and its grants: an
// async section, the schema registry a Redpanda transform may import).
type validateFlags struct {
	pages, tables    *uint
	cfgPath, pipe    string
	pagesSet, tabSet bool
}

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	defaults := config.PipelineDefaults().Limits
	var f validateFlags
	f.pages = fs.Uint("memory-pages", uint(defaults.MemoryPages), "memory limit to check the module against, in 64 KiB pages (as limits.memory_pages; with --config: the pipeline's)")
	f.tables = fs.Uint("table-elements", uint(defaults.TableElements), "table limit to check the module against, in elements of all its tables together (as limits.table_elements; with --config: the pipeline's)")
	fs.StringVar(&f.cfgPath, "config", "", "config file whose pipeline runs the module: checked under its limits and grants (async, async.schema_registry)")
	fs.StringVar(&f.pipe, "pipeline", "", "the config's pipeline (default: the one whose module is MODULE, or the only one)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: wasmstream validate [--memory-pages N] [--table-elements N] [--config FILE [--pipeline NAME]] module.wasm...\n\nChecks each module against the wasmstream ABI: format, imports, exports,\nmemory minimum, initialisation and the version handshake. Prints what it\nimports and exports. Exits 1 if any module does not fit. Without --config a\nmodule is checked under no pipeline's grants: one that needs an async\nsection (a Redpanda transform importing redpanda_schema_registry) is\nchecked with --config as the pipeline that grants it runs it.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fs.Visit(func(fl *flag.Flag) {
		f.pagesSet = f.pagesSet || fl.Name == "memory-pages"
		f.tabSet = f.tabSet || fl.Name == "table-elements"
	})
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	if *f.pages == 0 || *f.pages > 65536 {
		fmt.Fprintf(stderr, "wasmstream validate: --memory-pages %d: want 1 to 65536\n", *f.pages)
		return 2
	}
	if *f.tables == 0 || *f.tables > host.MaxTableElements {
		fmt.Fprintf(stderr, "wasmstream validate: --table-elements %d: want 1 to %d\n", *f.tables, host.MaxTableElements)
		return 2
	}
	if f.pipe != "" && f.cfgPath == "" {
		fmt.Fprintf(stderr, "wasmstream validate: --pipeline needs --config\n")
		return 2
	}
	return eachModule(fs.Args(), stderr, func(ctx context.Context, e *host.Engine, path string, b []byte) bool {
		mc, pipeline, err := f.moduleConfig(path)
		if err != nil {
			printErr(stderr, "wasmstream validate", err)
			return false
		}
		start := time.Now()
		m, err := e.Load(ctx, b, mc)
		if err != nil {
			printErr(stderr, termsafe.Line(path), err)
			if f.cfgPath == "" && strings.Contains(err.Error(), ".schema_registry.enabled") {
				fmt.Fprintf(stderr, "  (checked under no pipeline's grants: --config FILE [--pipeline NAME] checks it as a pipeline that sets pipelines.<name>.async.schema_registry.enabled runs it)\n")
			}
			return false
		}
		printModule(stdout, path, pipeline, m.Info(), mc, time.Since(start))
		m.Close(ctx)
		return true
	})
}

// moduleConfig is how the module at path is loaded, and the pipeline it
// is loaded as: the config's pipeline that runs it (--config), or none:
// the limits of the flags and no grants, its refusals naming the key a
// pipeline sets (pipelines.<name>.async...). A limit flag given beside
// --config is the one checked.
func (f *validateFlags) moduleConfig(path string) (mc host.ModuleConfig, pipeline string, err error) {
	mc = host.ModuleConfig{Name: path, Limits: host.Limits{MemoryPages: uint32(*f.pages), TableElements: uint32(*f.tables)},
		Async: host.AsyncConfig{Key: "pipelines.<name>.async"}}
	if f.cfgPath == "" {
		return mc, "", nil
	}
	_, pc, err := testPipeline(f.cfgPath, f.pipe, path)
	if err != nil {
		return mc, "", err
	}
	mc = scheduler.ModuleConfig(pc, nil)
	if f.pagesSet {
		mc.Limits.MemoryPages = uint32(*f.pages)
	}
	if f.tabSet {
		mc.Limits.TableElements = uint32(*f.tables)
	}
	return mc, pc.Name, nil
}

// printModule is validate's report of a module that loaded: the pipeline
// it was checked as, its kind, digest, memory against the limit, the
// grants it runs under, exports and imports.
func printModule(stdout io.Writer, path, pipeline string, info host.Info, mc host.ModuleConfig, took time.Duration) {
	fmt.Fprintf(stdout, "%s: ok\n", termsafe.Line(path))
	if pipeline != "" {
		fmt.Fprintf(stdout, "  pipeline: %s\n", termsafe.Line(pipeline))
	}
	if info.Kind == host.KindRedpanda {
		fmt.Fprintf(stdout, "  kind: Redpanda Data Transform (imports redpanda_transform; runs unmodified, docs/REDPANDA-TRANSFORMS.md)\n")
	} else {
		fmt.Fprintf(stdout, "  kind: wasmstream module\n  ABI version: %d\n", info.ABIVersion)
	}
	fmt.Fprintf(stdout, "  sha256: %s\n  size: %d bytes\n  memory: min %d pages", info.Digest, info.Size, info.MemoryMin)
	if info.MemoryMax > 0 {
		fmt.Fprintf(stdout, ", max %d pages", info.MemoryMax)
	}
	fmt.Fprintf(stdout, " (limit %d)\n", mc.Limits.MemoryPages)
	if info.Async {
		fmt.Fprintf(stdout, "  asynchronous operations: yes (needs async.http.allow_hosts for any network access)\n")
	}
	if mc.Async.SchemaRegistry.Enabled {
		fmt.Fprintf(stdout, "  schema registry: granted (%s.schema_registry)\n", mc.Async.Key)
	}
	fmt.Fprintf(stdout, "  load + first instance: %s\n  exports:\n", took.Round(time.Millisecond))
	// Names come from the module: printed escaped, so a hostile one
	// cannot drive the terminal.
	for _, x := range info.Exports {
		fmt.Fprintf(stdout, "    %s\n", termsafe.Line(x))
	}
	fmt.Fprintf(stdout, "  imports:\n")
	for _, x := range info.Imports {
		fmt.Fprintf(stdout, "    %s\n", termsafe.Line(x))
	}
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
