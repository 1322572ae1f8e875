package protocodec

import "testing"

// protojson may put a space after ':' or ',' (chosen per build of the
// binary): the JSON handed on is compacted, strings left as they are.
func TestCompactJSON(t *testing.T) {
	for in, want := range map[string]string{
		`{"s": "hello", "n":5}`:                       `{"s":"hello","n":5}`,
		`{"a b": "x, y: z", "q": "\" ,"}`:             `{"a b":"x, y: z","q":"\" ,"}`,
		"{\n \"l\": [1, 2,\t3],\r\n \"e\": \"\\\\\"}": `{"l":[1,2,3],"e":"\\"}`,
	} {
		pre := []byte("keep ")
		got := compactJSON(append(pre, in...), len(pre))
		if string(got) != "keep "+want {
			t.Errorf("compactJSON(%q) = %q, want %q", in, got, "keep "+want)
		}
	}
}
