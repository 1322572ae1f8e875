package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/wasmstream/wasmstream/"

// engineFloors are the packages under scheduler/internal and the floor each
// stands on (DESIGN.md, "The packages"): a package imports only packages of
// the floors below its own, never one of its own floor. The record engine's
// packages take their place here as they move out of package scheduler.
var engineFloors = map[string]int{
	// floor 0: containers that know nothing of records
	"fifo": 0,
	// floor 1: leaves of the record path
	"offsets":    1,
	"sizing":     1,
	"statestore": 1,
	"kafkaerr":   1,
	"budget":     1,
	"background": 1,
	"memtrim":    1,
	"schemaio":   1, // a pipeline's schema-registry decoding and encoding
	// floor 2: a partition's state, a module version, the counters and hooks
	"state":   2,
	"version": 2,
	"hooks":   2,
	// floor 3: the engine of one partition and the pipeline's set of them
	"partition": 3,
	// floor 4: when an outcome counts, how it leaves, how offsets are committed
	"ledger": 4,
	"sink":   4,
	"commit": 4,
	// floor 5: where records come from
	"source": 5,
}

// engineForbidden are packages nothing under scheduler/internal imports:
// the engine is given its clients and its wiring, it does not reach up for
// them.
var engineForbidden = []string{
	"scheduler",
	"scheduler/admin",
	"scheduler/registry",
	"internal/kafkaconn",
}

// goImports returns, for every Go file (tests too) under dir (relative to
// root), the module-relative imports of this module it makes ("scheduler/
// internal/state"), keyed by the file's path relative to root.
func goImports(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "node_modules" || n == "target" || strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		var imps []string
		for _, is := range f.Imports {
			p, err := strconv.Unquote(is.Path.Value)
			if err != nil {
				return err
			}
			if strings.HasPrefix(p, module) {
				imps = append(imps, strings.TrimPrefix(p, module))
			}
		}
		out[filepath.ToSlash(rel)] = imps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// enginePackage is the package under scheduler/internal a module-relative
// path (of a file's directory or of an import) belongs to: its first
// element there ("state" for scheduler/internal/state/x), or "".
func enginePackage(p string) string {
	rest, ok := strings.CutPrefix(p, "scheduler/internal/")
	if !ok {
		return ""
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

// TestEngineLayering: the packages under scheduler/internal stand on the
// floors of engineFloors (each imports only lower floors), none of them
// imports the scheduler package, its admin API, the registry or
// internal/kafkaconn, and only package scheduler itself imports the
// source. A package added under scheduler/internal must be given a floor
// here (and a row in DESIGN.md's package table).
func TestEngineLayering(t *testing.T) {
	engine := goImports(t, "scheduler/internal")
	if len(engine) == 0 {
		t.Fatal("no Go files under scheduler/internal")
	}
	files := make([]string, 0, len(engine))
	for f := range engine {
		files = append(files, f)
	}
	sort.Strings(files)
	for _, file := range files {
		pkg := enginePackage(filepath.ToSlash(filepath.Dir(file)))
		floor, ok := engineFloors[pkg]
		if !ok {
			t.Errorf("%s: package scheduler/internal/%s has no floor in engineFloors (tests/docs/layering_test.go)", file, pkg)
			continue
		}
		for _, imp := range engine[file] {
			for _, bad := range engineForbidden {
				if imp == bad || (bad != "scheduler" && strings.HasPrefix(imp, bad+"/")) {
					t.Errorf("%s imports %s: nothing under scheduler/internal may", file, imp)
				}
			}
			dep := enginePackage(imp)
			if dep == "" || dep == pkg {
				continue
			}
			depFloor, ok := engineFloors[dep]
			switch {
			case !ok:
				t.Errorf("%s imports scheduler/internal/%s, which has no floor in engineFloors", file, dep)
			case depFloor >= floor:
				t.Errorf("%s (floor %d) imports scheduler/internal/%s (floor %d): a package imports only lower floors", file, floor, dep, depFloor)
			}
		}
	}
	// Only package scheduler wires a source to the rest: no other package
	// of the scheduler's tree (the only ones Go lets import it) may.
	for file, imps := range goImports(t, "scheduler") {
		dir := filepath.ToSlash(filepath.Dir(file))
		if dir == "scheduler" || enginePackage(dir) == "source" {
			continue
		}
		for _, imp := range imps {
			if enginePackage(imp) == "source" {
				t.Errorf("%s imports %s: only package scheduler may", file, imp)
			}
		}
	}
}
