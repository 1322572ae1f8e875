package abi

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// ABI.md §1 lists exactly the WASI functions the code allows.
func TestABIDocListsWASI(t *testing.T) {
	b, err := os.ReadFile("ABI.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "**WASI.**")
	end := strings.Index(doc[start:], "**No filesystem")
	if start < 0 || end < 0 {
		t.Fatal("ABI.md §1 has no WASI paragraph")
	}
	var listed []string
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(doc[start:start+end], -1) {
		if m[1] != WASIModule {
			listed = append(listed, m[1])
		}
	}
	slices.Sort(listed)
	if want := WASIFunctions(); !slices.Equal(listed, want) {
		t.Fatalf("ABI.md lists %v\ncode allows %v", listed, want)
	}
}
