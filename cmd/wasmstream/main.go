// Command wasmstream runs WebAssembly stream processors over Kafka topics.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/wasmstream/wasmstream/internal/termsafe"
	"github.com/wasmstream/wasmstream/scheduler"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `wasmstream runs WebAssembly processors over Kafka topics.

Usage:
  wasmstream <command> [flags]

Commands:
  run        run the pipelines of a config file
  demo       run the config's pipelines on an embedded broker with demo input, showing the output
  validate   check that modules fit the wasmstream ABI and print what they import and export
  test       run a module on your own records, in process, and check what it produces
  conformance check a module against the ABI and an example's or your own test vectors
  init       create a processor project (Go, C, AssemblyScript or Rust) that builds as generated
  gen        write a typed Avro codec for a record schema (gen avro --lang go|rust SCHEMA.avsc)
  dlq        list, show and redrive dead-lettered records
  trace      print a record's path (attempts, retries, outputs) from its trace
  deploy     upload a processor to a running host and hot-swap a pipeline to it (or roll back)
  processors list the pipelines of a running host and their module versions
  version    print the version and the ABI version

Examples:
  # Run the pipelines in config.yaml against a real cluster:
  wasmstream run --config config.yaml --brokers 127.0.0.1:9092

  # Override any key: flags beat WASMSTREAM_* variables, which beat the file:
  WASMSTREAM_KAFKA_GROUP=prod wasmstream run --config config.yaml --set kafka.commit_interval=500ms

  # Build a Go processor and check it:
  GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o proc.wasm ./myproc
  wasmstream validate proc.wasm

  # Start a processor in Go, C, AssemblyScript or Rust, build it, check it:
  wasmstream init --lang rust myproc && make -C myproc
  wasmstream conformance --example uppercase myproc/myproc.wasm

  # Run a processor on your own records (no Kafka), or on a vectors file with expectations:
  wasmstream test myproc/myproc.wasm --key k --record 'hello'
  wasmstream test --config config.yaml myproc/myproc.wasm --file vectors.jsonl

  # Dead letters: inspect, then send back after fixing the processor:
  wasmstream dlq list --config config.yaml --pipeline uppercase --since 1h
  wasmstream dlq redrive --config config.yaml --pipeline uppercase --kind guest.fail --dry-run

  # Ship a new version of a processor without stopping (admin API), list, roll back:
  wasmstream deploy --config config.yaml --pipeline uppercase ./uppercase-v2.wasm
  wasmstream processors --config config.yaml
  wasmstream deploy --config config.yaml --pipeline uppercase --rollback

  # One record's path through its retries, from the demo's trace file or Jaeger:
  wasmstream trace --config config.yaml --topic demo-in --partition 2 --offset 17
  wasmstream trace --jaeger http://127.0.0.1:16686 --retried

  # The zero-install demo (embedded broker, demo input, output on screen):
  wasmstream demo --config config.yaml

Run 'wasmstream <command> --help' for a command's flags.
`

func main() {
	scheduler.Version = version // once, before anything runs: run is called concurrently by the tests
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "demo":
		return cmdDemo(args[1:], stdout, stderr)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "conformance":
		return cmdConformance(args[1:], stdout, stderr)
	case "test":
		return cmdTest(args[1:], stdout, stderr)
	case "init":
		return cmdInit(args[1:], stdout, stderr)
	case "gen":
		return cmdGen(args[1:], stdout, stderr)
	case "dlq":
		return cmdDLQ(args[1:], stdout, stderr)
	case "trace":
		return cmdTrace(args[1:], stdout, stderr)
	case "deploy":
		return cmdDeploy(args[1:], stdout, stderr)
	case "processors":
		return cmdProcessors(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return cmdVersion(stdout)
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "wasmstream: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}

// printErr prints err after prefix on w, escaped for the terminal
// (termsafe): an error may quote a module's import or export names, a
// record's fields, a broker's or another host's text. Every command prints
// text that did not come from its own code through termsafe.
func printErr(w io.Writer, prefix string, err error) {
	fmt.Fprintf(w, "%s: %s\n", prefix, termsafe.Text(err.Error(), "  "))
}
