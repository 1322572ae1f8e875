package verlabel

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, ok := range []string{"", "v2", "v2.3.1", "2026-12-03_rc1", "A", strings.Repeat("a", MaxLen)} {
		if err := Check(ok); err != nil || Clean(ok) != ok {
			t.Errorf("Check(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"-v2", ".v", "v 2", "v2\x1b[31m", "é", "a/b", `a"b`, "a{b}", strings.Repeat("a", MaxLen+1)} {
		if err := Check(bad); err == nil || Clean(bad) != "" {
			t.Errorf("Check(%q) accepted", bad)
		}
	}
}
