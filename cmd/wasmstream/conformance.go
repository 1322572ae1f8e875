package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/internal/conformance"
	"github.com/wasmstream/wasmstream/internal/termsafe"
)

func cmdConformance(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(stderr)
	example := fs.String("example", "", "the example the modules implement: "+strings.Join(conformance.Examples, ", "))
	quiet := fs.Bool("quiet", false, "print only the checks that fail and the summary")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: wasmstream conformance --example NAME module.wasm...

Checks each module against the conformance kit (internal/conformance): the
example's test vectors (null and empty keys and values, binary values, a
210 KiB value, 50 headers, null header values, non-ASCII text, an incoming
traceparent), asynchronous completions delivered in several orders (lookup),
and failures of each kind the example can produce, judged by the ABI. Prints
PASS or FAIL per check; exits 1 if any module fails a check.

  wasmstream conformance --example uppercase plugins/examples/c-uppercase/uppercase.wasm
  wasmstream conformance --example lookup plugins/examples/lookup/lookup.wasm

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 || *example == "" {
		fs.Usage()
		return 2
	}
	if _, err := conformance.VectorsOf(*example); err != nil {
		fmt.Fprintf(stderr, "wasmstream conformance: --example %q: want one of %s\n", *example, strings.Join(conformance.Examples, ", "))
		return 2
	}
	return eachModule(fs.Args(), stderr, func(ctx context.Context, e *host.Engine, path string, b []byte) bool {
		rep, err := conformance.Run(ctx, e, b, *example)
		if err != nil {
			printErr(stderr, termsafe.Line(path), err)
			return false
		}
		fmt.Fprintf(stdout, "== %s (%s)\n", termsafe.Line(path), *example)
		if *quiet {
			failed := &conformance.Report{Example: rep.Example, Checks: rep.Failed()}
			for _, c := range failed.Checks {
				fmt.Fprintf(stdout, "FAIL  %s: %s\n", c.Name, termsafe.Text(c.Detail, "  "))
			}
			fmt.Fprintf(stdout, "%s: %d of %d checks passed\n", rep.Example, len(rep.Checks)-len(failed.Checks), len(rep.Checks))
		} else {
			var sb strings.Builder
			rep.Write(&sb)
			fmt.Fprint(stdout, termsafe.Text(sb.String(), ""))
		}
		return rep.OK()
	})
}
