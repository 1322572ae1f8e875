package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/wasmstream/wasmstream/internal/avrogen"
)

// cmdGen is `wasmstream gen avro`: a schema-specific codec for the SDKs'
// typed serde (internal/avrogen).
func cmdGen(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "avro" {
		fmt.Fprint(stderr, "Usage: wasmstream gen avro --lang go|rust [--package NAME] [--strings copy|view] [--timestamps time|int64] [--out FILE] SCHEMA.avsc\n")
		return 2
	}
	fs := flag.NewFlagSet("gen avro", flag.ContinueOnError)
	fs.SetOutput(stderr)
	lang := fs.String("lang", "", "the language to write the codec in: go or rust")
	pkg := fs.String("package", "main", "the Go package the file belongs to")
	out := fs.String("out", "", "the file to write (default: standard output)")
	strs := fs.String("strings", "copy", "Go: copy (a decoded string is the value's own) or view (a view of the decoded bytes, valid while they are unchanged: no copy; docs/SDK.md, \"Strings as views\")")
	stamps := fs.String("timestamps", "time", "Go: time (timestamp-millis/micros as time.Time) or int64 (in the schema's unit, as on the wire)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: wasmstream gen avro --lang go|rust [--package NAME] [--strings copy|view] [--timestamps time|int64] [--out FILE] SCHEMA.avsc\n\nWrites the record schema's type with a codec of its own (no reflection), which the SDKs' typed serde uses when a record's writer schema is the schema's.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	opt, msg := goOptions(*lang, *strs, *stamps)
	if msg != "" {
		fmt.Fprintf(stderr, "wasmstream gen avro: %s\n", msg)
		return 2
	}
	text, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		printErr(stderr, "wasmstream gen avro", err)
		return 1
	}
	var code []byte
	switch *lang {
	case "go":
		code, err = avrogen.Go(text, *pkg, opt)
	case "rust":
		code, err = avrogen.Rust(text)
	default:
		fmt.Fprintf(stderr, "wasmstream gen avro: --lang is %q: go or rust\n", *lang)
		return 2
	}
	if err != nil {
		printErr(stderr, "wasmstream gen avro: "+fs.Arg(0), err)
		return 1
	}
	if *out == "" {
		_, err = stdout.Write(code)
	} else {
		err = os.WriteFile(*out, code, 0o644)
	}
	if err != nil {
		printErr(stderr, "wasmstream gen avro", err)
		return 1
	}
	return 0
}

// goOptions reads --strings and --timestamps, which only the Go codec
// has: a refusal names the flag.
func goOptions(lang, strs, stamps string) (avrogen.GoOptions, string) {
	var opt avrogen.GoOptions
	switch strs {
	case "copy":
	case "view":
		opt.StringViews = true
	default:
		return opt, fmt.Sprintf("--strings is %q: copy or view", strs)
	}
	switch stamps {
	case "time":
	case "int64":
		opt.IntTimestamps = true
	default:
		return opt, fmt.Sprintf("--timestamps is %q: time or int64", stamps)
	}
	if lang == "rust" && opt != (avrogen.GoOptions{}) {
		return opt, "--strings and --timestamps are for --lang go"
	}
	return opt, ""
}
