package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler/assembly"
	"github.com/wasmstream/wasmstream/scheduler/registry"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// hostileName is text a module, a record or a registry record can carry
// where a name belongs: it retitles the terminal, clears it, returns the
// carriage, starts a C1 (8-bit) CSI sequence and reverses what follows. It
// is valid UTF-8 (wasm names and JSON must be); hostileBytes adds a byte
// that is not.
const (
	hostileName  = "\x1b]0;pwned\x07\x1b[2J\r\u009b31m\u202egnp.exe"
	hostileBytes = hostileName + " \xff\x9b"
	// escapedMark is how the start of hostileName reads once escaped.
	escapedMark = `\x1b]0;pwned`
)

// hostileImportModule imports a host function named hostileName: every
// command that loads it refuses it with a message quoting the name.
func hostileImportModule(t *testing.T, dir string) string {
	m := wt.Minimal(wt.I32Const(0), wt.Import{Module: abi.HostModule, Name: hostileName, Params: []byte{wt.I32}, Results: []byte{wt.I32}})
	return writeFile(t, dir, "hostile-import.wasm", m.Bytes())
}

// hostileLogModule logs hostileBytes (log level warn) for every record.
func hostileLogModule(t *testing.T, dir string) string {
	var body []byte
	for i := 0; i < len(hostileBytes); i++ { // i32.store8 at i
		body = append(body, wt.I32Const(int32(i))...)
		body = append(body, wt.I32Const(int32(hostileBytes[i]))...)
		body = append(body, 0x3a, 0x00, 0x00)
	}
	body = append(body, wt.I32Const(abi.LogWarn)...)
	body = append(body, wt.I32Const(0)...)
	body = append(body, wt.I32Const(int32(len(hostileBytes)))...)
	body = append(body, wt.Call(0)...)
	body = append(body, wt.I32Const(0)...)
	m := wt.Minimal(body, wt.Import{Module: abi.HostModule, Name: abi.ImportLog, Params: []byte{wt.I32, wt.I32, wt.I32}})
	return writeFile(t, dir, "hostile-log.wasm", m.Bytes())
}

// TestCLIEscapesHostileText runs every command that prints text from a
// module, a record, a topic or the fleet's registry with that text hostile
// (ESC, BEL, CR, C1 controls, a bidirectional override, invalid UTF-8) and
// scans stdout and stderr for a raw control or format character: there
// must be none, and the text must be shown, escaped.
func TestCLIEscapesHostileText(t *testing.T) {
	dir := t.TempDir()
	imp := hostileImportModule(t, dir)
	logm := hostileLogModule(t, dir)
	check := func(t *testing.T, what string, code int, out, errs string, wantCode int) {
		t.Helper()
		assertPrintable(t, what, out+errs)
		if code != wantCode || !strings.Contains(out+errs, "pwned") {
			t.Errorf("%s: code %d (want %d), the hostile text not shown:\n%s\n%s", what, code, wantCode, out, errs)
		}
		if t.Failed() {
			t.Logf("%s:\nstdout %q\nstderr %q", what, out, errs)
		}
	}

	t.Run("validate", func(t *testing.T) {
		code, out, errs := runCLI(t, "validate", imp)
		check(t, "validate", code, out, errs, 1)
	})
	t.Run("conformance", func(t *testing.T) {
		code, out, errs := runCLI(t, "conformance", "--example", "uppercase", imp)
		check(t, "conformance", code, out, errs, 1)
	})
	t.Run("run", func(t *testing.T) {
		// With a token: a missing one is said first, before the modules load.
		t.Setenv("WASMSTREAM_ADMIN_TOKEN", testAdminToken)
		cfg := writeFile(t, dir, "run.yaml", []byte(`
kafka: {brokers: ["127.0.0.1:1"], group: g}
pipelines:
  - {name: p, module: `+imp+`, inputs: [a], output: b, dead_letter_topic: c}
`))
		code, out, errs := runCLI(t, "run", "--config", cfg)
		check(t, "run", code, out, errs, 1)
	})
	for _, format := range []string{"text", "json"} {
		t.Run("demo, logs as "+format, func(t *testing.T) {
			cfg := writeFile(t, dir, "demo-"+format+".yaml", []byte(`
kafka: {brokers: [embedded], group: esc-demo}
pipelines:
  - {name: p, module: `+logm+`, inputs: [in], output: out, dead_letter_topic: dlq}
log: {format: `+format+`}
metrics: {listen: ""}
admin: {enabled: false}
host: {compile_cache_dir: none}
`))
			code, out, errs := runCLI(t, "demo", "--config", cfg, "--duration", "3s", "--rate", "5", "--lookup-service", "")
			check(t, "demo", code, out, errs, 0)
		})
	}
	t.Run("init", func(t *testing.T) {
		t.Chdir(t.TempDir())
		code, out, errs := runCLI(t, "init", "--lang", "c", "--name", "proc", "--", hostileBytes)
		check(t, "init", code, out, errs, 0)
	})
	t.Run("dlq", func(t *testing.T) {
		cfg, _ := dlqSetup(t)
		for _, args := range [][]string{{"list"}, {"show", "0@0"}} {
			code, out, errs := runCLI(t, append(append([]string{"dlq"}, args...), "--config", cfg)...)
			check(t, "dlq "+args[0], code, out, errs, 0)
		}
	})
	t.Run("trace", func(t *testing.T) {
		file := traceFile(t)
		code, out, errs := runCLI(t, "trace", "--file", file, "--trace-id", "0123456789abcdef0123456789abcdef")
		check(t, "trace", code, out, errs, 0)
		code, out, errs = runCLI(t, "trace", "--file", file, "--retried")
		check(t, "trace --retried", code, out, errs, 0)
	})

	// deploy and processors talk to a running host: one on the in-process
	// broker, with the admin API and the fleet registry.
	const token = testAdminToken
	t.Setenv("WASMSTREAM_ADMIN_TOKEN", token)
	good := writeFile(t, dir, "good.wasm", wt.Minimal(wt.I32Const(0)).Bytes())
	cfg := adminHostConfig(t, dir, "esc", good, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := assembly.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Shutdown()
	api := h.AdminURL()

	t.Run("deploy refused", func(t *testing.T) {
		code, out, errs := runCLI(t, "deploy", "--admin", api, "--pipeline", "p", imp)
		check(t, "deploy", code, out, errs, 1)
	})
	t.Run("processors with a forged host status", func(t *testing.T) {
		// Anyone who can write to the registry's hosts topic can say
		// anything about a host, its versions and why it failed.
		st := registry.HostStatus{Host: hostileName, Pipelines: map[string]string{"p": hostileName},
			Failed: map[string]registry.Failure{"p": {Digest: hostileName, Error: hostileName}}, At: time.Now()}
		b, _ := json.Marshal(st)
		cl := kafkatest.Client(t, h.Runner().Brokers())
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: cfg.RegistryPrefix() + ".hosts", Key: []byte(hostileName), Value: b}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		var code int
		var out, errs string
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			code, out, errs = runCLI(t, "processors", "--admin", api)
			if strings.Contains(out, "pwned") || time.Now().After(deadline) {
				break
			}
		}
		check(t, "processors", code, out, errs, 0)
		if !strings.Contains(out, "host "+escapedMark) || !strings.Contains(out, "cannot run "+escapedMark) {
			t.Errorf("the forged host and its failure not shown escaped:\n%s", out)
		}
		code, out, errs = runCLI(t, "processors", "--admin", api, "--json")
		check(t, "processors --json", code, out, errs, 0)
		var views []struct {
			Fleet struct{ Hosts map[string]string }
		}
		if err := json.Unmarshal([]byte(out), &views); err != nil || len(views) != 1 || views[0].Fleet.Hosts[hostileName] != hostileName {
			t.Errorf("processors --json does not carry the host's exact name: %v\n%s", err, out)
		}
	})
}
