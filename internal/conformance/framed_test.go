package conformance

import (
	"strings"
	"testing"
)

// A vector's schema fields: read into the record's and the expected
// outputs' frames, the JSON kept as given (a string with its quotes); a
// combination that cannot mean anything is refused, naming the field.
func TestParseFrames(t *testing.T) {
	cases, err := ParseCases(strings.NewReader(`{"key": "k", "key_subject": "ks", "value_schema": "s/o.proto", "value_message": "shop.Order", "value": {"id": 1}, "expect": {"outcome": "ok", "outputs": [{"value_schema": "t.avsc", "value": "text"}]}}
{"value_base64": "AAAA"}
`), "v.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	c := cases[0]
	if string(c.KeyFrame.JSON) != `"k"` || c.KeyFrame.Subject != "ks" || !c.KeyFrame.Named() {
		t.Errorf("key frame %+v", c.KeyFrame)
	}
	if string(c.ValueFrame.JSON) != `{"id":1}` || c.ValueFrame.Schema != "s/o.proto" || c.ValueFrame.Message != "shop.Order" {
		t.Errorf("value frame %+v", c.ValueFrame)
	}
	if o := c.Expect.Outputs[0].ValueFrame; string(o.JSON) != `"text"` || o.Schema != "t.avsc" {
		t.Errorf("expected output's frame %+v", o)
	}
	if f := cases[1].ValueFrame; !f.Raw || f.JSON != nil || f.Named() {
		t.Errorf("a base64 value's frame %+v", f)
	}
	for _, tc := range []struct{ line, want string }{
		{`{"value_schema": "a.avsc", "value_subject": "s", "value": 1}`, "v.jsonl:1: value_schema and value_subject: give one"},
		{`{"key_schema": "a.avsc", "key_base64": "AA=="}`, "v.jsonl:1: key_base64 with a schema"},
		{`{"value_schema": "a.avsc", "value_message": "M", "value": 1}`, `v.jsonl:1: value_message: "M": a message names a Protobuf message, and value_schema "a.avsc" is not a .proto file`},
		{`{"value_schema": "a.xsd", "value": 1}`, `v.jsonl:1: value_schema: "a.xsd": want a schema file ending in .avsc`},
		{`{"expect": {"outcome": "ok", "outputs": [{"key_schema": "k.txt", "key": 1}]}}`, `v.jsonl:1: expect.outputs[0].key_schema: "k.txt"`},
	} {
		if _, err := ParseCases(strings.NewReader(tc.line+"\n"), "v.jsonl"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.line, err, tc.want)
		}
	}
}
