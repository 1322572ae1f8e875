package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
)

// maxFieldDiffs bounds the differing fields listed for one key or value;
// the rest are counted.
const maxFieldDiffs = 20

// fieldDiff lists where got differs from want, both JSON documents with
// an object or an array at the top, one line per differing field:
// "<name>.ID: got 3, want 4". It returns nil when either is not such a
// document: the two are then shown whole.
func fieldDiff(name string, got, want []byte) []string {
	a, okA := composite(got)
	b, okB := composite(want)
	if !okA || !okB {
		return nil
	}
	d := &jsonDiffer{}
	d.walk(name, a, b)
	if d.more > 0 {
		d.out = append(d.out, fmt.Sprintf("%s: and %d more field(s) differ", name, d.more))
	}
	return d.out
}

// composite decodes b, JSON with an object or an array at the top, with
// its numbers as written (so 1.0 and 1 are told apart as the bytes are).
func composite(b []byte) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return nil, false
	}
	switch v.(type) {
	case map[string]any, []any:
		return v, true
	}
	return nil, false
}

type jsonDiffer struct {
	out  []string
	more int
}

func (d *jsonDiffer) add(path, format string, a ...any) {
	if len(d.out) == maxFieldDiffs {
		d.more++
		return
	}
	d.out = append(d.out, path+": "+fmt.Sprintf(format, a...))
}

// walk compares got and want at path.
func (d *jsonDiffer) walk(path string, got, want any) {
	switch w := want.(type) {
	case map[string]any:
		if g, ok := got.(map[string]any); ok {
			d.object(path, g, w)
			return
		}
	case []any:
		if g, ok := got.([]any); ok {
			d.array(path, g, w)
			return
		}
	default:
		if sameScalar(got, want) {
			return
		}
	}
	d.add(path, "got %s, want %s", showJSON(got), showJSON(want))
}

func (d *jsonDiffer) object(path string, g, w map[string]any) {
	keys := make([]string, 0, len(g)+len(w))
	for k := range w {
		keys = append(keys, k)
	}
	for k := range g {
		if _, ok := w[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := path + fieldName(k)
		gv, inG := g[k]
		wv, inW := w[k]
		switch {
		case !inG:
			d.add(p, "missing, want %s", showJSON(wv))
		case !inW:
			d.add(p, "got %s, not expected", showJSON(gv))
		default:
			d.walk(p, gv, wv)
		}
	}
}

func (d *jsonDiffer) array(path string, g, w []any) {
	if len(g) != len(w) {
		d.add(path, "got %d item(s), want %d", len(g), len(w))
	}
	for i := range min(len(g), len(w)) {
		d.walk(fmt.Sprintf("%s[%d]", path, i), g[i], w[i])
	}
	for i := len(w); i < len(g); i++ {
		d.add(fmt.Sprintf("%s[%d]", path, i), "got %s, not expected", showJSON(g[i]))
	}
	for i := len(g); i < len(w); i++ {
		d.add(fmt.Sprintf("%s[%d]", path, i), "missing, want %s", showJSON(w[i]))
	}
}

// sameScalar compares two JSON scalars; numbers by value (1 and 1.0 are
// the same, as the comparison of whole documents has it).
func sameScalar(a, b any) bool {
	na, okA := a.(json.Number)
	nb, okB := b.(json.Number)
	if okA && okB {
		fa, errA := na.Float64()
		fb, errB := nb.Float64()
		if errA == nil && errB == nil {
			return fa == fb
		}
		return na == nb
	}
	return a == b
}

var plainField = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// fieldName is ".name", or ["name"] for a name that is not an identifier.
func fieldName(k string) string {
	if plainField.MatchString(k) {
		return "." + k
	}
	return "[" + strconv.Quote(k) + "]"
}

// showJSON is a field's value as JSON, cut past 200 bytes.
func showJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 200 {
		return fmt.Sprintf("%s…(%d bytes)", b[:200], len(b))
	}
	return string(b)
}
