package conformance

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
)

// TestCheckFieldDiff: an expected JSON object or array that differs from
// the output is reported field by field (a changed field, one missing,
// one not expected, an array's length and items, a name that is no
// identifier), not as the two whole documents; a scalar or text is shown
// whole, as before.
func TestCheckFieldDiff(t *testing.T) {
	t.Parallel()
	e := &Expect{Outcome: OutcomeOK, HasOutputs: true, Outputs: []ExpectOutput{
		{Value: jsonBytes{b: []byte(`{"NAME":"CYD","ID":4,"TAGS":["A","B"],"a b":1,"GONE":true,"N":{"X":1.0}}`), json: true}},
		{Value: jsonBytes{b: []byte(`"hi"`), json: true}},
	}}
	d := Decision{Outcome: OutcomeOK, Outputs: []abi.Output{
		{Value: []byte(`{"NAME":"CYD","ID":3,"TAGS":["A"],"a b":2,"EXTRA":null,"N":{"X":1}}`)},
		{Value: []byte(`"HI"`)},
	}}
	want := []string{
		`output 0 value.EXTRA: got null, not expected`,
		`output 0 value.GONE: missing, want true`,
		`output 0 value.ID: got 3, want 4`,
		`output 0 value.TAGS: got 1 item(s), want 2`,
		`output 0 value.TAGS[1]: missing, want "B"`,
		`output 0 value["a b"]: got 2, want 1`,
		`output 1 value: got "\"HI\"", want "\"hi\""`,
	}
	if got := e.Check(d); !slices.Equal(got, want) {
		t.Errorf("diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestFieldDiffBounded: a document with many differing fields lists the
// first maxFieldDiffs and counts the rest.
func TestFieldDiffBounded(t *testing.T) {
	t.Parallel()
	var g, w []string
	for i := range 50 {
		g, w = append(g, fmt.Sprint(i)), append(w, fmt.Sprint(i+1))
	}
	got := fieldDiff("value", []byte("["+strings.Join(g, ",")+"]"), []byte("["+strings.Join(w, ",")+"]"))
	if len(got) != maxFieldDiffs+1 || got[0] != "value[0]: got 0, want 1" || got[maxFieldDiffs] != "value: and 30 more field(s) differ" {
		t.Errorf("%d lines: %q … %q", len(got), got[0], got[len(got)-1])
	}
}
