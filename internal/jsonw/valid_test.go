package jsonw

import (
	"encoding/json"
	"strings"
	"testing"
)

var validSeeds = []string{
	"", " ", "null", "true", "false", "nul", "truex", "0", "-0", "01", "-", "1.", "1.5", "1e", "1e+", "1E-7", "-12.5e10",
	`""`, `"a`, `"\u00e9"`, `"\u00g9"`, `"\x"`, `"\/"`, "\"\x01\"", "\"\xff\"", `[]`, `[ ]`, `[1,]`, `[,1]`, `[1 2]`,
	`{}`, `{ }`, `{"a":1}`, `{"a" : [1, {"b": null}] }`, `{"a"}`, `{"a":}`, `{1:2}`, `{"a":1,}`, `{"a":1 "b":2}`,
	"\t{\"a\":\r\n1}\n", `[1]]`, `{"a":1}}`, `[{]`, `[}`, `{]`, `{"k":[{"x":"y"},[]],"n":-1.0e-3}`, "1 2", "\x00",
}

// FuzzValid: Valid agrees with encoding/json.Valid on every input.
func FuzzValid(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json %v", b, got, want)
		}
	})
}

// TestValidNestingBound: as deep as encoding/json allows is valid, one
// level deeper is not, with either kind of container.
func TestValidNestingBound(t *testing.T) {
	for _, open := range []string{"[", `{"a":`} {
		close := "]"
		if open != "[" {
			close = "}"
		}
		for _, depth := range []int{maxDepth, maxDepth + 1} {
			v := []byte(strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth))
			if got, want := Valid(v), json.Valid(v); got != want {
				t.Errorf("%q nested %d deep: Valid %v, encoding/json %v", open, depth, got, want)
			}
		}
	}
}

func TestValidDoesNotAllocate(t *testing.T) {
	v := []byte(`{"id":"u-42","name":"Ada","tags":["a","b"],"score":12.5,"ok":true}`)
	if n := testing.AllocsPerRun(100, func() { Valid(v) }); n != 0 {
		t.Fatalf("Valid allocates %.0f times", n)
	}
}

// BenchmarkValid: Valid beside encoding/json.Valid on a lookup service's
// answer (the reference, in the same run).
func BenchmarkValid(b *testing.B) {
	v := []byte(`{"id":"u-42","name":"Ada Lovelace","email":"ada@example.com","tags":["admin","ops"],"score":12.5,"active":true,"manager":null}`)
	b.Run("jsonw", func(b *testing.B) {
		b.SetBytes(int64(len(v)))
		for b.Loop() {
			Valid(v)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(v)))
		for b.Loop() {
			json.Valid(v)
		}
	})
}
