package protocodec

import (
	"strings"
	"testing"
)

// The check for missing required fields is skipped only for messages that
// cannot lack one: a proto2 message with a required field, directly or in
// a message it holds, is still checked both ways.
func TestRequiredFieldsStillChecked(t *testing.T) {
	const schema = `syntax = "proto2";
package p;
message Inner { required string s = 1; }
message Outer { optional Inner in = 1; optional int32 n = 2; }
message Free { optional int32 n = 1; }
`
	c, err := Compile(schema, nil, Options{}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if c.partial["p.Inner"] || c.partial["p.Outer"] || !c.partial["p.Free"] {
		t.Fatalf("partial %v: want only p.Free", c.partial)
	}
	for _, tc := range []struct {
		index []int
		js    string
	}{{[]int{0}, `{}`}, {[]int{1}, `{"in":{}}`}} {
		if _, err := c.AppendBinary(nil, []byte(tc.js), tc.index); err == nil || !strings.Contains(err.Error(), "required field") {
			t.Errorf("encode %s: %v, want a missing required field", tc.js, err)
		}
	}
	// Outer.in present and empty: the field's tag and a zero length.
	if _, err := c.AppendJSON(nil, []byte{0x0a, 0x00}, []int{1}, 1<<16); err == nil || !strings.Contains(err.Error(), "required field") {
		t.Errorf("decode: %v, want a missing required field", err)
	}
	if _, err := c.AppendBinary(nil, []byte(`{"n":1}`), []int{2}); err != nil {
		t.Error(err)
	}
}
