package jsonw

import (
	"encoding/json"
	"testing"
)

var seeds = []string{"", "plain", `q"uo\te`, "\n\r\t\b\f\x00\x1f<>&", "\xff\xfe", "é€😀", "\u2028\u2029", "a\xc3"}

// FuzzString: the string and the byte-slice forms encode as encoding/json.
func FuzzString(f *testing.F) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json %s", s, got, want)
		}
		if got := AppendString(nil, []byte(s)); string(got) != string(want) {
			t.Fatalf("AppendString([]byte(%q)) = %s, encoding/json %s", s, got, want)
		}
	})
}

func TestAppendValue(t *testing.T) {
	for _, c := range []struct {
		in   []byte
		want string
	}{{nil, "null"}, {[]byte(`{"a":1}`), `{"a":1}`}, {[]byte("plain"), `"plain"`}, {[]byte{}, `""`}, {[]byte("42"), "42"}} {
		if got := AppendValue(nil, c.in); string(got) != c.want {
			t.Errorf("AppendValue(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestStringDoesNotAllocateIntoRoom(t *testing.T) {
	b := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { AppendString(b[:0], "a \"quoted\" value\n") }); n != 0 {
		t.Fatalf("AppendString into a slice with room allocates %.0f times", n)
	}
}

func TestNonASCIIDoesNotAllocate(t *testing.T) {
	b := make([]byte, 0, 256)
	s := "é€😀 \xff\u2028"
	if n := testing.AllocsPerRun(100, func() { AppendString(b[:0], s); AppendString(b[:0], []byte(s)) }); n != 0 {
		t.Fatalf("AppendString of non-ASCII text allocates %.0f times", n)
	}
}
