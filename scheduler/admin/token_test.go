package admin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// goodToken is a token the checks accept: 32 random bytes in hex.
const goodToken = "08d67f31c36aeb2e40de772f5937f9d3a8b8b6587a0c1e7d6daa0f84263e4a38"

func TestShortTokensRefused(t *testing.T) {
	if _, err := NewAPI("s3cret", nil, nil, 1, nil); err == nil || !strings.Contains(err.Error(), "about 4 bytes of entropy (6 base64 or other characters), want at least 32") {
		t.Fatalf("NewAPI with a 6-byte token: %v", err)
	}
	if _, err := ResolveToken("  "+goodToken[:63]+" \n", ""); err == nil || !strings.Contains(err.Error(), "WASMSTREAM_ADMIN_TOKEN: the admin token has about 31 bytes of entropy (63 hex characters), want at least 32: make one with `openssl rand -hex 32`") {
		t.Fatalf("63 hex digits in the environment: %v", err)
	}
	if tok, err := ResolveToken(" "+goodToken+"\n", "/nonexistent"); err != nil || tok != goodToken {
		t.Fatalf("64 hex digits in the environment: %q %v", tok, err)
	}
	if _, err := ResolveToken("", ""); err == nil || !strings.Contains(err.Error(), "set WASMSTREAM_ADMIN_TOKEN or admin.token_file") {
		t.Fatalf("no token: %v", err)
	}
}

// TestWeakTokensRefused: placeholders (the Kubernetes example Secret's
// among them) and tokens of under 32 bytes of entropy are refused, saying
// how to make one; what openssl rand makes is accepted. No message holds
// the token.
func TestWeakTokensRefused(t *testing.T) {
	for _, tc := range []struct{ name, token, want string }{
		{"openssl rand -hex 32", goodToken, ""},
		{"openssl rand -hex 32, upper case", strings.ToUpper(goodToken), ""},
		{"openssl rand -base64 32", "L47/Xe0ZIE8Hr55cqwUPriEveLoz4Lq+LuMBjojx9Ks=", ""},
		{"base64url, unpadded", "PFWaPKthtibZ3ReUEo_-ri-ij4eU2eFrobyUHY2NlpU", ""},
		{"the Kubernetes example's placeholder", "CHANGE-ME-to-32-random-bytes-in-hex", `a placeholder (it holds "changeme")`},
		{"a long placeholder", "replace_me_with_" + goodToken, `a placeholder (it holds "replaceme")`},
		{"your-token-here", "your-token-here-" + goodToken, `a placeholder (it holds "yourtoken")`},
		{"24 random bytes in hex (the old demo token)", "e5d53170e466384084c4453c2754a4c4f232eff3a5cad8d7", "about 24 bytes of entropy (48 hex characters), want at least 32"},
		{"42 base64 characters", "L47/Xe0ZIE8Hr55cqwUPriEveLoz4Lq+LuMBjojx9K", "about 31 bytes of entropy (42 base64 or other characters)"},
		{"a UUID", "550e8400-e29b-41d4-a716-446655440000", "about 27 bytes of entropy"},
		{"one character", strings.Repeat("a", 64), "uses 1 distinct characters, want at least 10"},
		{"few characters", strings.Repeat("0123", 20), "uses 4 distinct characters"},
		{"a repeated string", strings.Repeat("0123456789abcdef", 4), "repeats its first 16 characters"},
	} {
		err := CheckToken(tc.token, "WASMSTREAM_ADMIN_TOKEN")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "WASMSTREAM_ADMIN_TOKEN: ") || !strings.HasSuffix(err.Error(), "make one with `openssl rand -hex 32`")):
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		case err != nil && strings.Contains(err.Error(), tc.token):
			t.Errorf("%s: the message holds the token: %v", tc.name, err)
		}
	}
	// Through each way a token comes in.
	const placeholder = "CHANGE-ME-to-32-random-bytes-in-hex"
	if _, err := NewAPI(placeholder, nil, nil, 1, nil); err == nil || !strings.Contains(err.Error(), "placeholder") {
		t.Errorf("NewAPI: %v", err)
	}
	if _, err := ResolveToken(placeholder, ""); err == nil || !strings.Contains(err.Error(), "WASMSTREAM_ADMIN_TOKEN: the admin token is a placeholder") {
		t.Errorf("environment: %v", err)
	}
	p := filepath.Join(t.TempDir(), "admin.token")
	os.WriteFile(p, []byte(placeholder+"\n"), 0o600)
	if _, err := ResolveToken("", p); err == nil || !strings.Contains(err.Error(), "admin.token_file: the admin token is a placeholder") {
		t.Errorf("token file: %v", err)
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
	good := goodToken + "\n"
	for _, tc := range []struct {
		name, content string
		mode          os.FileMode
		want          string // "" = accepted
	}{
		{"owner only", good, 0o600, ""},
		{"read-only owner", good, 0o400, ""},
		{"group-readable, another group", good, 0o640, "(mode 0640), so other users can read the admin token"},
		{"world-readable", good, 0o644, "(mode 0644), so other users can read the admin token"},
		{"group-writable", good, 0o620, "accessible by group or others (mode 0620)"},
		{"short", "s3cret\n", 0o600, "admin.token_file: the admin token has about 4 bytes of entropy"},
		{"empty", "\n\n", 0o600, "is empty"},
		{"huge", strings.Repeat("x", 5000), 0o600, "larger than 4096 bytes"},
	} {
		p := file(strings.NewReplacer(" ", "-", ",", "").Replace(tc.name), tc.content, tc.mode)
		// A group this process is not in: the group may read a secret
		// file root owns when it is the process's (internal/secretfile).
		if err := os.Chown(p, os.Getuid(), 54321); err != nil && os.Geteuid() == 0 {
			t.Fatal(err)
		}
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
	// Root's, group read, the process's group: a Kubernetes Secret volume
	// with defaultMode 0400 under the pod's fsGroup.
	p := file("secret-volume", good, 0o440)
	if err := os.Chown(p, 0, os.Getegid()); err != nil {
		t.Logf("not root: %v", err)
	} else if tok, err := ResolveToken("", p); err != nil || tok != goodToken {
		t.Errorf("root:<the process's group> 0440: %q %v", tok, err)
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
	if err != nil || len(tok) != 64 {
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
	const tok = goodToken
	sum := TokenSum(tok)
	for guess, want := range map[string]bool{tok: true, "": false, tok[:10]: false, tok + "x": false, strings.ToUpper(tok): false} {
		if got := TokenMatches(guess, sum); got != want {
			t.Errorf("TokenMatches(%q) = %v", guess, got)
		}
	}
}
