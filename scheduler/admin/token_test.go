package admin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestShortTokensRefused(t *testing.T) {
	if _, err := NewAPI("s3cret", nil, nil, 1, nil); err == nil || !strings.Contains(err.Error(), "6 bytes long, want at least 16") {
		t.Fatalf("NewAPI with a 6-byte token: %v", err)
	}
	if _, err := ResolveToken("  0123456789abcde \n", ""); err == nil || !strings.Contains(err.Error(), "WASMSTREAM_ADMIN_TOKEN: the admin token is 15 bytes long, want at least 16") {
		t.Fatalf("15-byte token in the environment: %v", err)
	}
	if tok, err := ResolveToken(" 0123456789abcdef\n", "/nonexistent"); err != nil || tok != "0123456789abcdef" {
		t.Fatalf("16-byte token in the environment: %q %v", tok, err)
	}
	if _, err := ResolveToken("", ""); err == nil || !strings.Contains(err.Error(), "set WASMSTREAM_ADMIN_TOKEN or admin.token_file") {
		t.Fatalf("no token: %v", err)
	}
}

func TestTokenFileChecks(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // whatever the umask
			t.Fatal(err)
		}
		return p
	}
	good := strings.Repeat("ab", 12) + "\n"
	for _, tc := range []struct {
		name, content string
		mode          os.FileMode
		want          string // "" = accepted
	}{
		{"owner only", good, 0o600, ""},
		{"read-only owner", good, 0o400, ""},
		{"group-readable", good, 0o640, "(mode 0640), so other users can read the admin token: chmod 600 "},
		{"world-readable", good, 0o644, "(mode 0644), so other users can read the admin token: chmod 600 "},
		{"group-writable", good, 0o620, "accessible by group or others (mode 0620)"},
		{"short", "s3cret\n", 0o600, "admin.token_file: the admin token is 6 bytes long, want at least 16"},
		{"empty", "\n\n", 0o600, "is empty"},
		{"huge", strings.Repeat("x", 5000), 0o600, "larger than 4096 bytes"},
	} {
		p := file(strings.ReplaceAll(tc.name, " ", "-"), tc.content, tc.mode)
		tok, err := ResolveToken("", p)
		switch {
		case tc.want == "" && (err != nil || tok != strings.TrimSpace(good)):
			t.Errorf("%s: %q %v", tc.name, tok, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "admin.token_file: ")):
			t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.want)
		case strings.Contains(tc.want, "chmod") && !strings.HasSuffix(err.Error(), "chmod 600 "+p):
			t.Errorf("%s: the fix does not name the file: %v", tc.name, err)
		}
	}
	if _, err := ReadTokenFile(dir, "--token-file"); err == nil || !strings.Contains(err.Error(), "--token-file: "+dir+" is not a regular file") {
		t.Errorf("a directory as token file: %v", err)
	}
}

// A token file the host creates is its owner's only, whatever the umask,
// and an existing one is never overwritten.
func TestCreateTokenFile(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	p := filepath.Join(t.TempDir(), "admin.token")
	if err := CreateTokenFile(p); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("created token file: %v %v, want mode 0600", st.Mode(), err)
	}
	tok, err := ReadTokenFile(p, "admin.token_file")
	if err != nil || len(tok) != 48 {
		t.Fatalf("created token %q: %v", tok, err)
	}
	if err := CreateTokenFile(p); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second create: %v, want ErrExist", err)
	}
	if again, _ := ReadTokenFile(p, "admin.token_file"); again != tok {
		t.Fatal("an existing token file was overwritten")
	}
}

// TestTokenMatches: only the token itself matches; a prefix, an extension
// or an empty guess do not (both sides are hashed before the
// constant-time comparison, so its time says nothing of the length).
func TestTokenMatches(t *testing.T) {
	const tok = "tok-0123456789abcdef"
	sum := TokenSum(tok)
	for guess, want := range map[string]bool{tok: true, "": false, tok[:10]: false, tok + "x": false, "Tok-0123456789abcdef": false} {
		if got := TokenMatches(guess, sum); got != want {
			t.Errorf("TokenMatches(%q) = %v", guess, got)
		}
	}
}
