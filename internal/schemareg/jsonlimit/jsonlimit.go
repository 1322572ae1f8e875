// Package jsonlimit bounds JSON before a parser sees it: its nesting depth,
// counted in one pass over the bytes without allocating. encoding/json and
// the schema compilers recurse once per level, so a guest output or a
// schema text of a million '[' would otherwise cost a million stack frames
// before any other check runs.
package jsonlimit

import "fmt"

// DepthError is JSON nested deeper than the limit.
type DepthError struct {
	Max    int
	Offset int
}

func (e *DepthError) Error() string {
	return fmt.Sprintf("JSON nested deeper than %d levels (at byte %d)", e.Max, e.Offset)
}

// CheckDepth returns a *DepthError if b opens more than max arrays and
// objects inside one another. It reads brackets outside strings only and
// does not validate b otherwise: the parser that runs next does.
func CheckDepth(b []byte, max int) error {
	depth := 0
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped byte cannot end the string
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > max {
				return &DepthError{Max: max, Offset: i}
			}
		case ']', '}':
			depth--
		}
	}
	return nil
}
