package termsafe

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// Hostile is a guest error message that retitles the terminal, clears it and
// starts a C1 (8-bit) CSI sequence.
const Hostile = "\x1b]0;pwned\x07\x1b[2J\x9b31m"

func TestLine(t *testing.T) {
	for in, want := range map[string]string{
		"plain text: ok":        "plain text: ok",
		"é, 日本, emoji 🙂":        "é, 日本, emoji 🙂",
		Hostile:                 `\x1b]0;pwned\x07\x1b[2J\x9b31m`,
		"a\nb\tc\r":             `a\x0ab\x09c\x0d`,
		"del\x7f c1\u0085":      `del\x7f c1\u0085`,
		"bidi \u202egnp.exe":    `bidi \u202egnp.exe`,
		"zero\u200bwidth\u2028": `zero\u200bwidth\u2028`,
		"\xff\xfe":              `\xff\xfe`,
	} {
		if got := Line(in); got != want {
			t.Errorf("Line(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestText(t *testing.T) {
	got := Text("first\r\nsecond\tcol\n\x1b[2Jthird", "    ")
	if want := "first\n    second\tcol\n    \\x1b[2Jthird"; got != want {
		t.Fatalf("Text = %q, want %q", got, want)
	}
}

// FuzzLine: the output of Line is valid UTF-8 without a control or format
// character, and Text's has no control but its newlines and tabs; JSON of
// a string's encoding decodes to the same string and holds none either.
func FuzzLine(f *testing.F) {
	f.Add(Hostile)
	f.Add("a\r\nb\u202e\xc3")
	f.Fuzz(func(t *testing.T, s string) {
		// JSON: the same value, nothing a terminal acts on.
		b, _ := json.Marshal(s)
		var want, got string
		json.Unmarshal(b, &want)
		if err := json.Unmarshal(JSON(b), &got); err != nil || got != want {
			t.Fatalf("JSON(%s) = %s: decodes to %q, %v; want %q", b, JSON(b), got, err, want)
		}
		for _, r := range string(JSON(b)) {
			if r == 0x7f || unsafeRune(r) {
				t.Fatalf("%U left in %s", r, JSON(b))
			}
		}
		for _, out := range []string{Line(s), strings.NewReplacer("\n", "", "\t", "").Replace(Text(s, "  "))} {
			if !utf8.ValidString(out) {
				t.Fatalf("invalid UTF-8 in %q", out)
			}
			for _, r := range out {
				if unsafeRune(r) {
					t.Fatalf("%U left in %q", r, out)
				}
			}
		}
	})
}

func TestJSON(t *testing.T) {
	in := "a\x1b\u009b\u202e\x7f\U000e0001 é"
	b, _ := json.Marshal(map[string]string{"k": in})
	out := string(JSON(b))
	if want := `{"k":"a\u001b\u009b\u202e\u007f\udb40\udc01 é"}`; out != want {
		t.Fatalf("JSON = %s, want %s", out, want)
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(out), &m); err != nil || m["k"] != in {
		t.Fatalf("decodes to %q, %v", m["k"], err)
	}
}
