// Package termsafe makes text that came from a guest or a record safe to
// print on a terminal. Error messages, keys, values, header names and span
// attributes are written by modules and producers; printed raw, an escape
// sequence in one can retitle the terminal, clear it, move the cursor to
// overwrite earlier lines, or (bidirectional overrides) show text in another
// order than it is stored.
//
// Every byte or rune that is not printable text is shown as a Go-style escape
// instead: C0 controls and DEL as \x1b, C1 controls (U+0080–U+009F) and
// invisible format characters (bidirectional marks and overrides, line and
// paragraph separators, zero-width characters) as \u009b, and bytes that are
// not valid UTF-8 as \x9b. Printable text, including non-ASCII letters, is
// kept. The wasmstream CLI prints every such field through Line or Text,
// and JSON it prints (`processors --json`, JSON logs) through JSON.
package termsafe

import (
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Line returns s for one line of output: newlines and tabs are escaped too.
func Line(s string) string { return escape(s, "", false) }

// Text returns s for a multi-line field: each newline stays a line break and
// is followed by indent (so that continuation lines stay under their
// field); tabs stay; a carriage return before a newline is dropped.
func Text(s, indent string) string { return escape(s, indent, true) }

func escape(s, indent string, multi bool) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			b.WriteString(`\x`)
			b.WriteString(hex2(s[i]))
		case multi && r == '\n':
			b.WriteByte('\n')
			b.WriteString(indent)
		case multi && r == '\t':
			b.WriteByte('\t')
		case multi && r == '\r' && i+1 < len(s) && s[i+1] == '\n':
			// dropped: the newline after it breaks the line
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x`)
			b.WriteString(hex2(byte(r)))
		case unsafeRune(r):
			b.WriteString(`\u`)
			h := strconv.FormatInt(int64(r), 16)
			b.WriteString(strings.Repeat("0", max(0, 4-len(h))))
			b.WriteString(h)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// JSON returns the JSON text b with every character a terminal would act
// on that encoding/json writes raw (DEL, C1 controls, bidirectional
// overrides and other format characters) written as a \u escape instead:
// the same JSON value, safe to print. Such characters can only be inside
// strings, where JSON allows any character escaped. b must be valid UTF-8
// (encoding/json's output is: it writes U+FFFD for invalid bytes).
func JSON(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] < 0x7f {
		i++
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if r == 0x7f || (r >= 0x80 && unsafeRune(r)) {
			for _, u := range utf16.AppendRune(nil, r) {
				out = append(out, `\u`...)
				out = append(out, hex2(byte(u>>8))...)
				out = append(out, hex2(byte(u))...)
			}
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

// JSONWriter writes what it is given through JSON: for writers of whole
// JSON documents or lines per Write (slog's JSON handler, json.Encoder).
func JSONWriter(w io.Writer) io.Writer { return jsonWriter{w} }

type jsonWriter struct{ w io.Writer }

func (j jsonWriter) Write(b []byte) (int, error) {
	if _, err := j.w.Write(JSON(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// safe reports whether s is printable ASCII only (the common case: no copy).
func safe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

// unsafeRune reports whether r is a control or an invisible format
// character (Unicode categories Cc, Cf, Zl, Zp) or otherwise not graphic.
func unsafeRune(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) || (!unicode.IsGraphic(r) && r != ' ')
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}
