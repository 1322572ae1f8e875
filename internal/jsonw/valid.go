package jsonw

// maxDepth is how deeply arrays and objects may nest in a value Valid
// accepts: encoding/json's bound, so the two agree on every input.
const maxDepth = 10000

// Valid reports whether v is one JSON value, with optional white space
// around it: what encoding/json.Valid reports (the same grammar, the same
// nesting bound, and like it no check that strings are valid UTF-8), in
// one pass over v instead of one scanner call per byte. That difference is
// what a Go guest pays for: every function call costs it several times
// what it costs natively, and a record's value and an HTTP response body
// are checked once each (AppendValue). FuzzValid holds the two together.
func Valid(v []byte) bool {
	var objects [maxDepth/64 + 1]uint64 // bit d: the container open at depth d is an object
	depth := 0
	i := space(v, 0)
	for {
		// A value begins at i.
		if i >= len(v) {
			return false
		}
		switch c := v[i]; c {
		case '{', '[':
			if depth == maxDepth {
				return false
			}
			close := byte(']')
			if c == '{' {
				objects[depth/64] |= 1 << (depth % 64)
				close = '}'
			} else {
				objects[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			if i = space(v, i+1); i < len(v) && v[i] == close {
				i++
				depth--
				break
			}
			if c == '{' {
				if i = member(v, i); i < 0 {
					return false
				}
			}
			continue
		case '"':
			i = str(v, i)
		case 't':
			i = literal(v, i, "true")
		case 'f':
			i = literal(v, i, "false")
		case 'n':
			i = literal(v, i, "null")
		default:
			i = number(v, i)
		}
		if i < 0 {
			return false
		}
		// A value ended before i: close containers until one goes on.
		for {
			i = space(v, i)
			if depth == 0 {
				return i == len(v)
			}
			if i >= len(v) {
				return false
			}
			d := depth - 1
			object := objects[d/64]>>(d%64)&1 == 1
			if v[i] == ',' {
				i = space(v, i+1)
				if object {
					if i = member(v, i); i < 0 {
						return false
					}
				}
				break
			}
			if (object && v[i] == '}') || (!object && v[i] == ']') {
				i++
				depth--
				continue
			}
			return false
		}
	}
}

// space is the index of the first byte at or after i that is not JSON
// white space.
func space(v []byte, i int) int {
	for i < len(v) && (v[i] == ' ' || v[i] == '\n' || v[i] == '\r' || v[i] == '\t') {
		i++
	}
	return i
}

// member reads an object member's name and colon at i; it returns where
// the member's value begins (after white space), or -1.
func member(v []byte, i int) int {
	if i >= len(v) || v[i] != '"' {
		return -1
	}
	if i = str(v, i); i < 0 {
		return -1
	}
	if i = space(v, i); i >= len(v) || v[i] != ':' {
		return -1
	}
	return space(v, i+1)
}

// str reads the string that begins at v[i] ('"'); it returns the index
// after its closing quote, or -1.
func str(v []byte, i int) int {
	for i++; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(v) {
				return -1
			}
			switch v[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(v) || !hex(v[i+1]) || !hex(v[i+2]) || !hex(v[i+3]) || !hex(v[i+4]) {
					return -1
				}
				i += 4
			default:
				return -1
			}
		}
	}
	return -1
}

func hex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// literal reads word (true, false, null) at i; it returns the index after
// it, or -1.
func literal(v []byte, i int, word string) int {
	if len(v)-i < len(word) || string(v[i:i+len(word)]) != word {
		return -1
	}
	return i + len(word)
}

// number reads the number that begins at i: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?;
// it returns the index after it, or -1.
func number(v []byte, i int) int {
	if i < len(v) && v[i] == '-' {
		i++
	}
	switch {
	case i >= len(v):
		return -1
	case v[i] == '0':
		i++
	case '1' <= v[i] && v[i] <= '9':
		i = digits(v, i+1)
	default:
		return -1
	}
	if i < len(v) && v[i] == '.' {
		j := digits(v, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		j := digits(v, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digits(v []byte, i int) int {
	for i < len(v) && '0' <= v[i] && v[i] <= '9' {
		i++
	}
	return i
}
