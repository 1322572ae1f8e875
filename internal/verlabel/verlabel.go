// Package verlabel checks the label a deploy gives a module version
// (`wasmstream deploy --label v2.3.1`). A label is shown by `processors`,
// the admin API and the dashboard and is a metrics label
// (wasmstream.version.records{label=...}), so its syntax and length are
// bounded: at most MaxLen characters of [A-Za-z0-9._-], starting with a
// letter or a digit (a Kubernetes label value, without the empty one).
package verlabel

import "fmt"

// MaxLen is the longest label.
const MaxLen = 63

// Check reports why s is not a label ("" is: no label).
func Check(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > MaxLen {
		return fmt.Errorf("label of %d characters: at most %d", len(s), MaxLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if i == 0 && !alnum {
			return fmt.Errorf("label %q: must start with a letter or a digit", s)
		}
		if !alnum && c != '.' && c != '_' && c != '-' {
			return fmt.Errorf("label %q: only letters, digits, '.', '_' and '-' (at most %d)", s, MaxLen)
		}
	}
	return nil
}

// Clean is s if it is a label, else "": for labels read from where others
// write (the fleet registry's topics), which must not reach a metric or a
// terminal unchecked.
func Clean(s string) string {
	if Check(s) != nil {
		return ""
	}
	return s
}
