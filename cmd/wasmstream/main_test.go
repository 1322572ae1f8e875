package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// adminHostConfig is the config of a host on the in-process broker that
// runs module as pipeline p (in -> out) with its admin API on and its
// module store in dir/store, as the tests of the commands that talk to a
// running host start one; metrics is metrics.listen ("": none).
func adminHostConfig(t *testing.T, dir, group, module, metrics string) *config.Config {
	t.Helper()
	path := writeFile(t, dir, "host.yaml", []byte(`
kafka: {brokers: [embedded], group: `+group+`}
pipelines:
  - {name: p, module: `+module+`, inputs: [in], output: out, dead_letter_topic: dlq}
metrics: {listen: "`+metrics+`"}
admin: {listen: "127.0.0.1:0", store_dir: `+filepath.Join(dir, "store")+`}
host: {id: h1, compile_cache_dir: none}
`))
	cfg, err := config.Load(path, os.Environ(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// badModules are modules that do not fit, with the message each must get.
func badModules(t *testing.T, dir string) map[string]string {
	hostImport := wt.Import{Module: "wasmstream_v2", Name: "emit", Params: []byte{wt.I32, wt.I32, wt.I32}, Results: []byte{wt.I32}}
	noExport := wt.Minimal(wt.I32Const(0))
	noExport.Funcs = noExport.Funcs[:1]
	bigMem := wt.Minimal(wt.I32Const(0))
	bigMem.MemoryMin = 1000
	return map[string]string{
		writeFile(t, dir, "notwasm.wasm", []byte("hello, I am text")):                  "not a WebAssembly module",
		writeFile(t, dir, "abi2.wasm", wt.Minimal(wt.I32Const(0), hostImport).Bytes()): "built for wasmstream ABI v2",
		writeFile(t, dir, "noexport.wasm", noExport.Bytes()):                           "missing required export wasmstream_on_record",
		writeFile(t, dir, "bigmem.wasm", bigMem.Bytes()):                               "memory minimum exceeds the limit of 512 pages (limits.memory_pages)",
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good.wasm", wt.Minimal(wt.I32Const(0)).Bytes())
	code, out, errs := runCLI(t, "validate", good)
	if code != 0 || !strings.Contains(out, "ABI version: 1") || !strings.Contains(out, "wasmstream_on_record: func(i32, i32) -> (i32)") {
		t.Fatalf("good module: code %d\n%s\n%s", code, out, errs)
	}
	for path, want := range badModules(t, dir) {
		code, _, errs := runCLI(t, "validate", path)
		if code != 1 || !strings.Contains(errs, want) || !strings.Contains(errs, path) {
			t.Errorf("%s: code %d, stderr %q; want 1 and %q", filepath.Base(path), code, errs, want)
		}
	}
	if code, _, _ := runCLI(t, "validate", filepath.Join(dir, "absent.wasm")); code != 1 {
		t.Errorf("missing file: code %d", code)
	}
}

// validate checks against the table limit it is given, and prints the
// module's own names escaped: a name is not a terminal escape sequence.
func TestValidateTablesAndHostileNames(t *testing.T) {
	dir := t.TempDir()
	m := wt.Minimal(wt.I32Const(0))
	m.Tables = []wt.Table{{Min: 100}}
	tables := writeFile(t, dir, "tables.wasm", m.Bytes())
	if code, _, errs := runCLI(t, "validate", "--table-elements", "10", tables); code != 1 || !strings.Contains(errs, "limits.table_elements") {
		t.Fatalf("table of 100 against --table-elements 10: code %d, stderr %q", code, errs)
	}
	if code, out, errs := runCLI(t, "validate", "--table-elements", "100", tables); code != 0 {
		t.Fatalf("table of 100 against --table-elements 100: code %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := runCLI(t, "validate", "--table-elements", "0", tables); code != 2 || !strings.Contains(errs, "--table-elements 0") {
		t.Fatalf("--table-elements 0: code %d, stderr %q", code, errs)
	}
	m = wt.Minimal(wt.I32Const(0))
	m.Funcs = append(m.Funcs, wt.Func{Export: "evil\x1b]0;owned\x07\x1b[2J", Body: nil})
	evil := writeFile(t, dir, "evil.wasm", m.Bytes())
	code, out, errs := runCLI(t, "validate", evil)
	if strings.ContainsRune(out+errs, 0x1b) || strings.ContainsRune(out+errs, 0x07) {
		t.Fatalf("a module's name reached the terminal unescaped (code %d):\n%q\n%q", code, out, errs)
	}
	if !strings.Contains(out+errs, `evil\x1b]0;owned\x07\x1b[2J`) {
		t.Fatalf("the name is not shown escaped (code %d):\n%q\n%q", code, out, errs)
	}
}

func TestRunRefusesBadModules(t *testing.T) {
	// With a token: a missing one is said first, before the modules load.
	t.Setenv("WASMSTREAM_ADMIN_TOKEN", testAdminToken)
	dir := t.TempDir()
	for path, want := range badModules(t, dir) {
		cfg := writeFile(t, dir, "c.yaml", []byte(`
kafka: {brokers: ["127.0.0.1:1"], group: g}
pipelines:
  - {name: p, module: `+path+`, inputs: [a], output: b, dead_letter_topic: c}
`))
		code, _, errs := runCLI(t, "run", "--config", cfg)
		if code != 1 || !strings.Contains(errs, "pipelines[0].module") || !strings.Contains(errs, want) {
			t.Errorf("%s: code %d, stderr %q; want 1, the key and %q", filepath.Base(path), code, errs, want)
		}
	}
}

func TestRunConfigErrors(t *testing.T) {
	dir := t.TempDir()
	cfg := writeFile(t, dir, "c.yaml", []byte(`
kafka: {brokers: [], group: g, comit_interval: 1s}
pipelines:
  - {name: p, module: nope.wasm, inputs: [a], output: a, dead_letter_topic: c, limits: {record_timeout: soon}}
`))
	code, _, errs := runCLI(t, "run", "--config", cfg)
	if code != 1 || !strings.Contains(errs, "kafka.comit_interval: unknown key") {
		t.Fatalf("code %d: %s", code, errs)
	}
	cfg = writeFile(t, dir, "c.yaml", []byte(`
kafka: {brokers: [], group: g}
pipelines:
  - {name: p, module: nope.wasm, inputs: [a], output: a, dead_letter_topic: c}
`))
	code, _, errs = runCLI(t, "run", "--config", cfg)
	for _, want := range []string{"kafka.brokers: at least one broker", "pipelines[0].module:", "does not exist", `pipelines[0].output: "a" is also an input`} {
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("code %d, stderr lacks %q:\n%s", code, want, errs)
		}
	}
	t.Setenv("WASMSTREAM_KAFKA_GRUOP", "x")
	code, _, errs = runCLI(t, "run", "--config", cfg)
	if code != 1 || !strings.Contains(errs, "WASMSTREAM_KAFKA_GRUOP: matches no config key") {
		t.Errorf("env typo: code %d: %s", code, errs)
	}
}

func TestHelpAndVersion(t *testing.T) {
	if code, out, _ := runCLI(t, "--help"); code != 0 || !strings.Contains(out, "Examples:") {
		t.Fatalf("help: %d %s", code, out)
	}
	if code, out, _ := runCLI(t, "version"); code != 0 || !strings.Contains(out, "ABI v1") {
		t.Fatalf("version: %d %s", code, out)
	}
	if code, _, errs := runCLI(t, "frobnicate"); code != 2 || !strings.Contains(errs, `unknown command "frobnicate"`) {
		t.Fatalf("unknown: %d %s", code, errs)
	}
}

// TestDemo runs the demo for a few seconds on its embedded broker and checks
// what it shows: outputs of the three pipelines (the lookup pipeline calling
// the demo user directory), a dead-lettered fault and the status line.
func TestDemo(t *testing.T) {
	root := wt.RepoRoot(t)
	dir := t.TempDir()
	for _, name := range []string{"uppercase", "enrich", "lookup"} {
		os.MkdirAll(filepath.Join(dir, "plugins/examples", name), 0o755)
		writeFile(t, filepath.Join(dir, "plugins/examples", name), name+".wasm", wt.BuildGoGuest(t, "plugins/examples/"+name))
	}
	b, err := os.ReadFile(filepath.Join(root, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, dir, "config.yaml", b)
	// Free ports, not config.yaml's (9464, 9465, 18089): a demo or host
	// elsewhere on the machine would take them first.
	base := freePortBase(t)
	code, out, errs := runCLI(t, "demo", "--config", cfg, "--duration", "8s", "--rate", "10", "--port-base", strconv.Itoa(base))
	if code != 0 {
		t.Fatalf("demo exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"embedded broker at 127.0.0.1:", "live dashboard: http://127.0.0.1:" + strconv.Itoa(base) + "/dashboard", "← demo-out ", `"USER":"ADA"`, "← demo-enriched ", `"enriched":true`, "✗ demo-enriched.dlq", "guest.fail: asked to fail", "← demo-profiles ", `"lookup":{"name":"Ada Lovelace"`, "── [uppercase]", "rec/s", "lag", "[enrich] done"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("stdout:\n%s\nstderr:\n%s", out, errs)
	}

	// The demo traces to a JSON-lines file; wasmstream trace reads it: a
	// record that panicked on every attempt went through both retry tiers to
	// the dead-letter topic, and its trace shows exactly that path.
	code, list, errs := runCLI(t, "trace", "--config", cfg, "--retried", "--pipeline", "enrich")
	if code != 0 || !strings.Contains(list, "dead_letter") {
		t.Fatalf("trace --retried: exit %d\n%s\n%s", code, list, errs)
	}
	var id string
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, "attempts 3") && strings.Contains(line, "dead_letter") && strings.Contains(line, "fault.panic") {
			id = strings.Fields(line)[1]
			break
		}
	}
	if id == "" {
		t.Fatalf("no record that panicked three times in:\n%s", list)
	}
	code, tree, errs := runCLI(t, "trace", "--config", cfg, "--trace-id", id)
	if code != 0 {
		t.Fatalf("trace --trace-id: exit %d\n%s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(tree), "\n")
	var path []string
	for _, l := range lines[1:] {
		switch {
		case strings.Contains(l, "process demo-in["):
			path = append(path, "attempt 1")
		case strings.Contains(l, "process wasmstream-demo.enrich.retry.1s["):
			path = append(path, "attempt 2")
		case strings.Contains(l, "process wasmstream-demo.enrich.retry.3s["):
			path = append(path, "attempt 3")
		case strings.Contains(l, "send wasmstream-demo.enrich.retry.1s (retry)"):
			path = append(path, "retry 1s")
		case strings.Contains(l, "send wasmstream-demo.enrich.retry.3s (retry)"):
			path = append(path, "retry 3s")
		case strings.Contains(l, "send demo-enriched.dlq (dead letter)"):
			path = append(path, "dead letter")
		}
	}
	if got, want := strings.Join(path, " → "), "attempt 1 → retry 1s → attempt 2 → retry 3s → attempt 3 → dead letter"; got != want {
		t.Fatalf("trace path %q, want %q:\n%s", got, want, tree)
	}
	if !strings.Contains(lines[0], "3 attempt(s) · outcome dead_letter") || !strings.Contains(tree, "✗ fault.panic") {
		t.Fatalf("trace header or errors missing:\n%s", tree)
	}
}

func TestDLQArgumentErrors(t *testing.T) {
	dir := t.TempDir()
	mod := writeFile(t, dir, "m.wasm", wt.Minimal(wt.I32Const(0)).Bytes())
	cfg := writeFile(t, dir, "c.yaml", []byte(`
kafka: {brokers: ["127.0.0.1:1"], group: g}
pipelines:
  - {name: a, module: `+mod+`, inputs: [in], output: out, dead_letter_topic: dlq}
  - {name: b, module: `+mod+`, inputs: [in], output: out2, dead_letter_topic: dlq2}
`))
	embedded := writeFile(t, dir, "e.yaml", []byte(`
kafka: {brokers: [embedded], group: g}
pipelines:
  - {name: a, module: `+mod+`, inputs: [in], output: out, dead_letter_topic: dlq}
`))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"dlq"}, 2, "Usage:"},
		{[]string{"dlq", "purge"}, 2, `unknown subcommand "purge"`},
		{[]string{"dlq", "list", "--config", cfg}, 1, "choose one with --pipeline (a, b)"},
		{[]string{"dlq", "list", "--config", cfg, "--pipeline", "c"}, 1, `--pipeline "c": no such pipeline`},
		{[]string{"dlq", "redrive", "--config", cfg, "--pipeline", "a", "--to", "nowhere"}, 1, `--to "nowhere": want input or retry`},
		{[]string{"dlq", "redrive", "--config", cfg, "--pipeline", "a", "--partition", "sideways"}, 1, `--partition "sideways": want original or key`},
		{[]string{"dlq", "list", "--config", cfg, "--pipeline", "a", "--since", "yesterday"}, 1, `--since "yesterday": want a duration`},
		{[]string{"dlq", "show", "--config", cfg, "--pipeline", "a", "zero"}, 1, `"zero": want PARTITION@OFFSET`},
		{[]string{"dlq", "list", "--config", embedded}, 1, "the config's broker is embedded"},
	} {
		code, _, errs := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: code %d, stderr %q; want %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
}

// A start that fails after the config was read (here: the metrics
// address is taken) exits 1 with the reason, not 0 as a start cut short by
// a signal does.
func TestRunStartFailureExits1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	mod := writeFile(t, dir, "m.wasm", wt.Minimal(wt.I32Const(0)).Bytes())
	cfg := writeFile(t, dir, "c.yaml", []byte(`
kafka: {brokers: [embedded], group: g}
admin: {enabled: false}
metrics: {listen: "`+ln.Addr().String()+`"}
pipelines:
  - {name: p, module: `+mod+`, inputs: [a], output: b, dead_letter_topic: c}
`))
	code, _, errs := runCLI(t, "run", "--config", cfg)
	if code != 1 || !strings.Contains(errs, "metrics.listen") {
		t.Fatalf("code %d (want 1), stderr:\n%s", code, errs)
	}
}
