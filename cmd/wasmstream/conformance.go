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
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

const conformanceUsage = `Usage: wasmstream conformance [--example NAME] [--vectors FILE] [--env K=V]... module.wasm...

Checks each module against the conformance kit (internal/conformance):

  the ABI checks, for every module whatever it does: records with null and
  empty keys and values, binary values, a 210 KiB value, 50 headers, null
  header values, non-ASCII text and a traceparent must each be decided
  (ok, or a retry or fail the guest reports) without a fault, twice on one
  instance; an emit refused by limits.max_output_bytes must fail the record
  with a status, the instance living on; memory exhausted under
  limits.memory_pages must fail the record and the next one be decided as
  before; for a module that makes HTTP requests (answered 200 {}), a
  record whose requests never complete must fail at its deadline without
  losing the instance, and completions delivered forward, in reverse and
  interleaved must give the same decisions;

  --example: the example's vectors and expected outputs, its asynchronous
  orders (lookup) and its failures;

  --vectors: your records, each with its expectation (README.md, "Testing a
  processor on your own records"), in order on one instance, with state
  that carries from record to record.

Prints PASS or FAIL per check; exits 1 if any module fails a check, 2 for a
bad flag or vectors file.

  wasmstream conformance myproc.wasm
  wasmstream conformance --vectors vectors.jsonl myproc.wasm
  wasmstream conformance --example uppercase plugins/examples/c-uppercase/uppercase.wasm

Flags:
`

// conformanceCmd is `wasmstream conformance`'s flags.
type conformanceCmd struct {
	example, vectors string
	env              listFlag
	quiet            bool
	stdout, stderr   io.Writer
}

func cmdConformance(args []string, stdout, stderr io.Writer) int {
	c := &conformanceCmd{stdout: stdout, stderr: stderr}
	modules, code := c.parse(args)
	if code >= 0 {
		return code
	}
	opt, code := c.options()
	if code >= 0 {
		return code
	}
	return eachModule(modules, stderr, func(ctx context.Context, e *host.Engine, path string, b []byte) bool {
		return c.check(ctx, e, path, b, opt)
	})
}

// parse reads the flags into c and returns the modules named; it returns
// the exit code when the flags do not parse or name no module, else -1.
func (c *conformanceCmd) parse(args []string) ([]string, int) {
	fs := flag.NewFlagSet("conformance", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.StringVar(&c.example, "example", "", "the example the modules implement, if one: "+strings.Join(conformance.Examples, ", "))
	fs.StringVar(&c.vectors, "vectors", "", "your own records and expectations: a vectors file (JSON lines, as wasmstream test --file reads)")
	fs.Var(&c.env, "env", "an environment variable of the modules, K=V (repeatable)")
	fs.BoolVar(&c.quiet, "quiet", false, "print only the checks that fail and the summary")
	fs.Usage = func() {
		fmt.Fprint(c.stderr, conformanceUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return nil, 2
	}
	return fs.Args(), -1
}

// options checks --example, --env and the --vectors file and returns the
// kit's options they make; it returns the exit code when one is bad, else
// -1.
func (c *conformanceCmd) options() (conformance.Options, int) {
	opt := conformance.Options{Example: c.example, File: c.vectors}
	if c.example != "" {
		if _, err := conformance.VectorsOf(c.example); err != nil {
			fmt.Fprintf(c.stderr, "wasmstream conformance: --example %q: want one of %s\n", c.example, strings.Join(conformance.Examples, ", "))
			return opt, 2
		}
	}
	for _, kv := range c.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			fmt.Fprintf(c.stderr, "wasmstream conformance: --env %q: want K=V\n", termsafe.Line(kv))
			return opt, 2
		}
		if opt.Env == nil {
			opt.Env = map[string]string{}
		}
		opt.Env[k] = v
	}
	if c.vectors != "" {
		cases, err := conformance.ReadCases(c.vectors)
		if err == nil {
			err = unframed(c.vectors, cases)
		}
		if err == nil {
			err = conformance.RecordsOnly(c.vectors, cases)
		}
		if err != nil {
			printErr(c.stderr, "wasmstream conformance", err)
			return opt, 2
		}
		opt.Cases = cases
	}
	return opt, -1
}

// check runs the kit on one module and prints its report; it reports
// whether the module passed every check.
func (c *conformanceCmd) check(ctx context.Context, e *host.Engine, path string, b []byte, opt conformance.Options) bool {
	if len(opt.Cases) > 0 {
		// The user's records get state of their own, empty at the
		// start, as a stateful pipeline would give them.
		pc := config.PipelineDefaults()
		ls, err := scheduler.OpenLocalState(&pc)
		if err != nil {
			printErr(c.stderr, "wasmstream conformance", err)
			return false
		}
		defer ls.Close()
		opt.State, opt.Keep, opt.Fire = ls.Begin, ls.CommitAt, ls.FireDue
	}
	rep, err := conformance.CheckModule(ctx, e, b, opt)
	if err != nil {
		printErr(c.stderr, termsafe.Line(path), err)
		return false
	}
	fmt.Fprintf(c.stdout, "== %s (%s)\n", termsafe.Line(path), termsafe.Line(rep.Example))
	if c.quiet {
		failed := &conformance.Report{Example: rep.Example, Checks: rep.Failed()}
		for _, fc := range failed.Checks {
			fmt.Fprintf(c.stdout, "FAIL  %s: %s\n", termsafe.Line(fc.Name), termsafe.Text(fc.Detail, "  "))
		}
		fmt.Fprintf(c.stdout, "%s: %d of %d checks passed\n", termsafe.Line(rep.Example), len(rep.Checks)-len(failed.Checks), len(rep.Checks))
	} else {
		fmt.Fprint(c.stdout, termsafe.Text(rep.String(), ""))
	}
	return rep.OK()
}

// unframed refuses vectors that name a schema: the kit runs records as
// they are, and framing them is wasmstream test's (with the pipeline's
// input_format and the schemas).
func unframed(file string, cases []conformance.Case) error {
	for _, c := range cases {
		named := c.KeyFrame.Named() || c.ValueFrame.Named()
		if c.Expect != nil {
			for _, o := range c.Expect.Outputs {
				named = named || o.KeyFrame.Named() || o.ValueFrame.Named()
			}
		}
		if named {
			return fmt.Errorf("%s:%d: names a schema (*_schema, *_subject): the kit runs records as they are; run schema-registry vectors with wasmstream test (--config, --schema)", file, c.Line)
		}
	}
	return nil
}
