package host

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero/api"

	"github.com/wasmstream/wasmstream/abi"
)

// witFunc matches one function of abi/wasmstream.wit:
// "[export ]name: func(a: u32, b: s32) -> s32;".
var witFunc = regexp.MustCompile(`(?m)^\s*(export\s+)?([a-z][a-z0-9-]*):\s*func\(([^)]*)\)\s*(->\s*([a-z0-9]+))?\s*;`)

// TestWITMatchesTheHost keeps abi/wasmstream.wit true: every host function
// the host provides, and every export it calls, is in the WIT file with the
// same parameters and result (u32 and s32 are both a core i32), and the file
// names nothing else.
func TestWITMatchesTheHost(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "abi", "wasmstream.wit"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]sig{}
	for _, m := range witFunc.FindAllStringSubmatch(string(b), -1) {
		name := strings.ReplaceAll(m[2], "-", "_")
		if m[1] != "" {
			name = "export " + name
		}
		var s sig
		for _, p := range strings.Split(m[3], ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			s.params = append(s.params, witCoreType(t, p[strings.LastIndex(p, ":")+1:]))
		}
		if m[5] != "" {
			s.results = []api.ValueType{witCoreType(t, m[5])}
		}
		if _, dup := got[name]; dup {
			t.Errorf("%s appears twice in the WIT file", name)
		}
		got[name] = s
	}
	want := map[string]sig{}
	for name, s := range hostFuncs {
		want[name] = s
	}
	for name, s := range requiredExports {
		want["export "+name] = s
	}
	want["export "+abi.ExportOnComplete] = onCompleteSig
	want["export "+abi.ExportOnTimer] = onTimerSig
	for name, s := range batchFuncs {
		want[name] = s
	}
	want["export "+abi.ExportOnBatch] = onBatchSig
	want["export "+abi.ExportOnCompletions] = onCompletionsSig
	for _, name := range sortedKeys(want) {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("the WIT file lacks %s %s", name, want[name])
		case !g.matches(want[name].params, want[name].results):
			t.Errorf("the WIT file has %s as %s, the host %s", name, g, want[name])
		}
	}
	var extra []string
	for name := range got {
		if _, ok := want[name]; !ok {
			extra = append(extra, name)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("the WIT file names functions the host does not have: %v", extra)
	}
}

func witCoreType(t *testing.T, w string) api.ValueType {
	switch strings.TrimSpace(w) {
	case "u32", "s32":
		return api.ValueTypeI32
	case "u64", "s64":
		return api.ValueTypeI64
	}
	t.Fatalf("WIT type %q has no core mapping here", w)
	return 0
}
