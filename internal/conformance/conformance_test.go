package conformance

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/wasmstream/wasmstream/host"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// The examples of every SDK, built from source here (the Go toolchain,
// clang, the AssemblyScript SDK's pinned compiler, Debian's cargo: the
// test command installs them all). A missing toolchain fails the test: it
// does not skip.
var examples = map[string][]struct {
	lang  string
	build func(testing.TB) []byte
}{
	"uppercase": {
		{"go", func(t testing.TB) []byte { return wt.BuildGoGuest(t, "plugins/examples/uppercase") }},
		{"c", func(t testing.TB) []byte { return wt.BuildCGuest(t, "plugins/examples/c-uppercase/uppercase.c") }},
		{"assemblyscript", func(t testing.TB) []byte {
			return wt.BuildASGuest(t, "plugins/examples/as-uppercase/assembly/index.ts")
		}},
		{"rust", func(t testing.TB) []byte { return wt.BuildRustGuest(t, "plugins/examples/rust-uppercase") }},
	},
	"filter": {
		{"go", func(t testing.TB) []byte { return wt.BuildGoGuest(t, "plugins/examples/filter") }},
		{"assemblyscript", func(t testing.TB) []byte { return wt.BuildASGuest(t, "plugins/examples/as-filter/assembly/index.ts") }},
		{"rust", func(t testing.TB) []byte { return wt.BuildRustGuest(t, "plugins/examples/rust-filter") }},
	},
	"lookup": {
		{"go", func(t testing.TB) []byte { return wt.BuildGoGuest(t, "plugins/examples/lookup") }},
		{"assemblyscript", func(t testing.TB) []byte { return wt.BuildASGuest(t, "plugins/examples/as-lookup/assembly/index.ts") }},
		{"rust", func(t testing.TB) []byte { return wt.BuildRustGuest(t, "plugins/examples/rust-lookup") }},
	},
}

var engine = sync.OnceValue(func() *host.Engine {
	e, err := host.NewEngine("", nil)
	if err != nil {
		panic(err)
	}
	return e
})

// TestExamplesConform runs the kit over each example in every language
// that has it (C has only uppercase): each must pass every check, and all
// languages must give the same outcome for every vector — the same
// outputs, byte for byte, and the same statuses.
func TestExamplesConform(t *testing.T) {
	for _, ex := range []string{"uppercase", "filter", "lookup"} {
		t.Run(ex, func(t *testing.T) {
			reports := map[string]*Report{}
			for _, m := range examples[ex] {
				rep, err := Run(context.Background(), engine(), m.build(t), ex)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range rep.Failed() {
					t.Errorf("%s %s: FAIL %s: %s", m.lang, ex, c.Name, c.Detail)
				}
				if len(rep.Checks) < 10 {
					t.Errorf("%s %s: only %d checks", m.lang, ex, len(rep.Checks))
				}
				if ex == "lookup" {
					// Every SDK's lookup has the completions entry: the
					// kit's check delivered completions through it.
					found := false
					for _, c := range rep.Checks {
						if strings.HasPrefix(c.Name, "completions delivered several in one call") {
							found = true
							if !strings.Contains(c.Detail, "completions through") {
								t.Errorf("%s lookup: %s: %s", m.lang, c.Name, c.Detail)
							}
						}
					}
					if !found {
						t.Errorf("%s lookup: no check of the completions entry", m.lang)
					}
				}
				reports[m.lang] = rep
			}
			ref := reports["go"]
			names := make([]string, 0, len(ref.Outcomes))
			for n := range ref.Outcomes {
				names = append(names, n)
			}
			sort.Strings(names)
			for lang, rep := range reports {
				if len(rep.Outcomes) != len(ref.Outcomes) {
					t.Errorf("%s: %d outcomes, Go %d", lang, len(rep.Outcomes), len(ref.Outcomes))
				}
				for _, n := range names {
					if !rep.Outcomes[n].Same(ref.Outcomes[n]) {
						t.Errorf("%s %s, vector %s: %+v, Go: %+v", lang, ex, n, brief(rep.Outcomes[n]), brief(ref.Outcomes[n]))
					}
				}
			}
		})
	}
}

func brief(o Outcome) string {
	var b strings.Builder
	b.WriteString(o.Status.String())
	if o.Fault != "" {
		b.WriteString(" fault " + string(o.Fault))
	}
	for _, enc := range o.Outputs {
		b.WriteString(" [" + describeOutput(enc) + "]")
	}
	return b.String()
}

// The kit tells a wrong module from a right one: the uppercase example is
// not a filter, and an uppercase that upper-cases ASCII only fails the
// non-ASCII vectors.
func TestKitCatchesNonConformingModules(t *testing.T) {
	rep, err := Run(context.Background(), engine(), wt.BuildGoGuest(t, "plugins/examples/uppercase"), "filter")
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || len(rep.Failed()) < 5 {
		t.Fatalf("the uppercase example passed as a filter: %d failed", len(rep.Failed()))
	}
	rep, err = Run(context.Background(), engine(), wt.BuildGoGuest(t, "plugins/examples/uppercase"), "lookup")
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() {
		t.Fatal("the uppercase example passed as lookup")
	}
	if _, err := Run(context.Background(), engine(), nil, "nope"); err == nil || !strings.Contains(err.Error(), "uppercase, filter, lookup") {
		t.Fatalf("unknown example: %v", err)
	}
}

func TestPermutations(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range permutations(4) {
		seen[fmtInts(p)] = true
	}
	if len(seen) != 24 {
		t.Fatalf("%d distinct permutations of 4, want 24", len(seen))
	}
	for _, o := range orders {
		p := o.perm(7)
		m := map[int]bool{}
		for _, i := range p {
			m[i] = true
		}
		if len(p) != 7 || len(m) != 7 {
			t.Fatalf("%s: %v", o.name, p)
		}
	}
}

func fmtInts(p []int) string {
	var b strings.Builder
	for _, i := range p {
		b.WriteString(string(rune('0'+i)) + " ")
	}
	return b.String()
}
