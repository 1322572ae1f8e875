// Package jsonw writes JSON by appending to a byte slice, without
// reflection: the one JSON string encoder of the trace exporter, the Go guest
// SDK (guest.AppendJSONString) and the conformance kit's expectations.
package jsonw

import (
	"unicode/utf8"
)

// AppendString appends s as a JSON string, escaped as encoding/json
// escapes it (HTML characters included; invalid UTF-8 becomes U+FFFD).
func AppendString[S ~string | ~[]byte](b []byte, s S) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0 // s[start:i] needs no escaping and is appended in one go
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := decodeRune(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += n
			start = i
			continue
		}
		i += n
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func decodeRune[S ~string | ~[]byte](s S) (rune, int) {
	switch v := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(v)
	case []byte:
		return utf8.DecodeRune(v)
	}
	return utf8.DecodeRuneInString(string(s))
}

// AppendValue appends v as it is when it is JSON, as a JSON string when it
// is not, and nil as null: a record's key or value embedded in a JSON
// document.
func AppendValue(b, v []byte) []byte {
	switch {
	case v == nil:
		return append(b, "null"...)
	case Valid(v):
		return append(b, v...)
	}
	return AppendString(b, v)
}
