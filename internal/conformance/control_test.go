package conformance

import (
	"strings"
	"testing"
)

// Control lines parse to their actions and take no record's index: a
// record after them keeps the default offset it had without them, so a
// vectors file without control lines means what it meant before.
func TestParseControlLines(t *testing.T) {
	cases, err := ParseCases(strings.NewReader(`{"key": "k", "value": "a", "timestamp": 1000}
{"advance_to": 2100, "expect": {"outcome": "ok", "outputs": [{"key": "k", "value": "x"}]}}
{"advance": "1m"}
{"idle": "45s"}
{"state": {"put": [{"key": "k", "sub": "s", "value": {"n": 1}}, {"key": "one", "value": "v"}], "delete": [{"key": "d"}], "timers": [{"key": "k", "at": 7}]}}
{"expect_state": {"get": [{"key": "k", "sub": "s", "value": {"n": 1}}, {"key": "d", "absent": true}, {"key": "one"}], "timers": []}}
{"key": "k", "value": "b"}
`), "v.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, c := range cases {
		if c.Control != nil {
			kinds = append(kinds, c.Control.Kind)
		}
	}
	if got := strings.Join(kinds, " "); got != "advance_to advance idle state expect_state" {
		t.Fatalf("kinds %q", got)
	}
	if last := cases[6]; last.Control != nil || last.Record.Offset != 1 {
		t.Fatalf("the record after the control lines: %+v", last)
	}
	st := cases[4].Control
	if len(st.Put) != 2 || !st.Put[0].Two || string(st.Put[0].ValueText()) != `{"n":1}` || st.Put[1].Two || len(st.Delete) != 1 || len(st.Timers) != 1 {
		t.Fatalf("state %+v", st)
	}
	es := cases[5].Control.ExpectState
	if !es.HasTimers || len(es.Timers) != 0 || !es.Get[1].Absent || !es.Get[2].Any {
		t.Fatalf("expect_state %+v", es)
	}
	if cases[1].Control.AdvanceTo != 2100 || cases[1].Expect == nil || cases[2].Control.Duration.String() != "1m0s" {
		t.Fatalf("advance %+v %+v", cases[1], cases[2])
	}
	if err := RecordsOnly("v.jsonl", cases); err == nil || !strings.HasPrefix(err.Error(), "v.jsonl:2: advance_to: a control line") {
		t.Fatalf("RecordsOnly: %v", err)
	}
}
