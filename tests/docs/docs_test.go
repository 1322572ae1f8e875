package docs

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the top of the checkout: the tests run in tests/docs.
const root = "../.."

type comment struct{ at, text string }

// goComments returns, for every Go file under dirs (relative to root), each
// comment group's text with its lines joined by single spaces and where it
// starts ("file:line"), in file order.
func goComments(t *testing.T, dirs ...string) []comment {
	t.Helper()
	var out []comment
	fset := token.NewFileSet()
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				switch d.Name() {
				case ".git", "node_modules", "target", "vendor":
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			for _, cg := range f.Comments {
				pos := fset.Position(cg.Pos())
				out = append(out, comment{rel + ":" + strconv.Itoa(pos.Line), strings.Join(strings.Fields(cg.Text()), " ")})
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no Go comments found under %s", root)
	}
	return out
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// headings returns the names a citation may use for each heading of a
// Markdown file: the heading itself and, for "Share groups (`consume:
// share`)", the name before its trailing parenthesis. Backticks are dropped.
func headings(doc string) map[string]bool {
	names := map[string]bool{}
	for line := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ReplaceAll(strings.TrimSpace(strings.TrimLeft(line, "#")), "`", "")
		names[h] = true
		if strings.HasSuffix(h, ")") {
			if i := strings.LastIndex(h, " ("); i > 0 {
				names[h[:i]] = true
			}
		}
	}
	return names
}

var citation = regexp.MustCompile(`\b(RATIONALE|DESIGN)\.md,\s*"([^"]+)"`)

// Every citation of RATIONALE.md or DESIGN.md in Go code (the file name, a
// comma, the heading in double quotes) names a heading of that file, so a
// reader sent there finds the section. A paragraph's bold lead is not a
// heading: cite the heading above it.
func TestCitationsNameHeadings(t *testing.T) {
	heads := map[string]map[string]bool{
		"RATIONALE": headings(readDoc(t, "RATIONALE.md")),
		"DESIGN":    headings(readDoc(t, "DESIGN.md")),
	}
	n := 0
	for _, c := range goComments(t, ".") {
		at, text := c.at, c.text
		for _, m := range citation.FindAllStringSubmatch(text, -1) {
			n++
			if h := strings.ReplaceAll(m[2], "`", ""); !heads[m[1]][h] {
				t.Errorf("comment at %s: %s.md has no heading %q", at, m[1], m[2])
			}
		}
	}
	if n < 20 {
		t.Fatalf("found only %d citations: the pattern no longer matches how the code cites", n)
	}
}

// lockName is how DESIGN.md and comments name a lock: `Pipeline.mu`,
// `Pipeline.commitMu`, `Transactions.gate`, `slots.Pool.mu`.
var lockName = regexp.MustCompile(`\b(?:[A-Za-z]\w*\.)+(?:\w*Mu|mu|gate)\b`)

// designLockOrder reads DESIGN.md's "Lock order": the rank of each lock its
// numbered list names (the first lock of items 1 to 5, every lock of the
// last item, the leaves, which never nest).
func designLockOrder(t *testing.T) (rank map[string]int, leaf int) {
	t.Helper()
	doc := readDoc(t, "DESIGN.md")
	start := strings.Index(doc, "\n## Lock order\n")
	if start < 0 {
		t.Fatal(`DESIGN.md has no "## Lock order"`)
	}
	sec := doc[start+1:]
	if end := strings.Index(sec[3:], "\n## "); end >= 0 {
		sec = sec[:end+3]
	}
	item := regexp.MustCompile(`(?m)^(\d+)\. `)
	idx := item.FindAllStringSubmatchIndex(sec, -1)
	if len(idx) < 3 {
		t.Fatalf("DESIGN.md's lock order has %d numbered items", len(idx))
	}
	rank = map[string]int{}
	for i, m := range idx {
		n, _ := strconv.Atoi(sec[m[2]:m[3]])
		end := len(sec)
		if i+1 < len(idx) {
			end = idx[i+1][0]
		} else if p := strings.Index(sec[m[0]:], "\n\n"); p >= 0 {
			end = m[0] + p
		}
		var names []string
		for _, q := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(sec[m[0]:end], -1) {
			if lockName.MatchString(q[1]) && lockName.FindString(q[1]) == q[1] {
				names = append(names, q[1])
			}
		}
		if len(names) == 0 {
			t.Fatalf("DESIGN.md's lock order item %d names no lock", n)
		}
		if i+1 < len(idx) {
			names = names[:1]
		}
		for _, name := range names {
			if _, ok := rank[name]; !ok { // a leaf's item also mentions task.mu
				rank[name] = n
			}
		}
		leaf = n
	}
	return rank, leaf
}

// lockOrder finds a comment's stated order: "lock order: A, B, C" or "Lock
// order, outermost first: A, then B", up to the end of its sentence or an
// aside in parentheses.
var lockOrder = regexp.MustCompile(`(?i)lock order(?:, outermost first)?:\s*([^(;]*?)(?:\.\s|\.$|[(;]|$)`)

// Every lock order a comment in the scheduler or the host states is one
// DESIGN.md's lock order holds: each lock is known there and comes after the
// locks before it in the comment; nothing is taken under a leaf.
func TestLockOrderCommentsAgreeWithDesign(t *testing.T) {
	rank, leaf := designLockOrder(t)
	n := 0
	for _, c := range goComments(t, "scheduler", "host") {
		at, text := c.at, c.text
		for _, m := range lockOrder.FindAllStringSubmatch(text, -1) {
			locks := lockName.FindAllString(m[1], -1)
			if len(locks) < 2 {
				continue
			}
			n++
			prev, prevName := 0, ""
			for _, l := range locks {
				r, ok := rank[l]
				switch {
				case !ok:
					t.Errorf("comment at %s: lock order %q names %s, which DESIGN.md's lock order does not", at, m[1], l)
				case prev == leaf:
					t.Errorf("comment at %s: lock order %q takes %s under %s, a leaf in DESIGN.md's lock order", at, m[1], l, prevName)
				case r <= prev:
					t.Errorf("comment at %s: lock order %q puts %s before %s; DESIGN.md's lock order has them the other way round", at, m[1], prevName, l)
				}
				if ok {
					prev, prevName = r, l
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no lock order stated in a comment: the pattern no longer matches how the code states one")
	}
}
