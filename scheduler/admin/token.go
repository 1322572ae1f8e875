package admin

import (
	cryptorand "crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/wasmstream/wasmstream/internal/secretfile"
)

// MinTokenBytes is the entropy, in bytes, under which an admin token is
// refused: a weaker one could be guessed by a client that may try as often
// as it likes. 32 bytes is what `openssl rand -hex 32` (64 hex digits) and
// `openssl rand -base64 32` (44 characters) give.
const MinTokenBytes = 32

// minTokenDistinct is the fewest distinct characters a token may have: 64
// random hex digits show 15 or 16 of them almost always, and fewer than
// 10 with a chance of about 1 in 10^12; fewer means a pattern.
const minTokenDistinct = 10

// placeholders are the tokens of examples and templates (compared
// lowercased with everything but letters and digits taken out, as parts
// of the token): a token holding one was copied, not made.
var placeholders = []string{
	"changeme", "replaceme", "placeholder", "example", "yourtoken", "yoursecret",
	"inserttoken", "secret", "password", "admintoken", "32randombytes",
}

// TokenSum is what a token is kept as and compared by: its SHA-256.
func TokenSum(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// TokenMatches reports whether given is the token whose TokenSum is sum.
// Both sides are hashed, so the constant-time comparison takes as long
// whatever the lengths: it leaks neither the token's length nor how much
// of it a guess got right.
func TokenMatches(given string, sum [32]byte) bool {
	g := TokenSum(given)
	return subtle.ConstantTimeCompare(g[:], sum[:]) == 1
}

// maxTokenFileBytes bounds what ReadTokenFile reads.
const maxTokenFileBytes = 4096

// CheckToken refuses a token that is a known placeholder or holds less than
// MinTokenBytes of entropy; source names where it came from (an
// environment variable or a config key) for the message, which never holds
// the token.
//
// The entropy is estimated from the token's alphabet, as if its characters
// were drawn at random from it: 4 bits a character for hex digits only
// (64 digits pass), 6 bits for the base64 or base64url alphabet or
// anything else (43 characters pass; a base64 '=' counts for nothing). A
// token that is one string repeated (abcabc...) or uses fewer than
// minTokenDistinct distinct characters is refused whatever its length. A
// person's phrase can pass this measure without its entropy: make tokens
// with a random generator.
func CheckToken(token, source string) error {
	const how = "make one with `openssl rand -hex 32`"
	norm := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return -1
	}, token)
	for _, p := range placeholders {
		if strings.Contains(norm, p) {
			return fmt.Errorf("%s: the admin token is a placeholder (it holds %q), not a secret: %s", source, p, how)
		}
	}
	bits, alphabet := tokenBits(token)
	if bits < 8*MinTokenBytes {
		return fmt.Errorf("%s: the admin token has about %d bytes of entropy (%d %s characters), want at least %d: %s", source, bits/8, len(strings.TrimRight(token, "=")), alphabet, MinTokenBytes, how)
	}
	if n := distinct(token); n < minTokenDistinct {
		return fmt.Errorf("%s: the admin token uses %d distinct characters, want at least %d: it is a pattern, not random: %s", source, n, minTokenDistinct, how)
	}
	if p := period(token); p < len(token) {
		return fmt.Errorf("%s: the admin token repeats its first %d characters: it is a pattern, not random: %s", source, p, how)
	}
	return nil
}

// tokenBits is the entropy of token, in bits, as CheckToken estimates it,
// and the alphabet it was estimated by.
func tokenBits(token string) (int, string) {
	body := strings.TrimRight(token, "=")
	hex := true
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			hex = false
			break
		}
	}
	if hex && len(body) == len(token) {
		return 4 * len(body), "hex"
	}
	return 6 * len(body), "base64 or other"
}

// distinct counts the distinct bytes of s.
func distinct(s string) int {
	var seen [256]bool
	n := 0
	for i := 0; i < len(s); i++ {
		if !seen[s[i]] {
			seen[s[i]] = true
			n++
		}
	}
	return n
}

// period is the length of the shortest string s is repeats of (len(s) when
// it is no repetition).
func period(s string) int {
	for p := 1; p <= len(s)/2; p++ {
		if len(s)%p == 0 && strings.Repeat(s[:p], len(s)/p) == s {
			return p
		}
	}
	return len(s)
}

// ReadTokenFile reads a token from path, refusing what secretfile.Read
// refuses (a file that is not a regular file, one that others may read)
// and what CheckToken refuses. key names the config key or flag that gave
// path.
func ReadTokenFile(path, key string) (string, error) {
	b, err := secretfile.Read(path, key, "the admin token", maxTokenFileBytes)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", fmt.Errorf("%s: %s is empty", key, path)
	}
	return t, CheckToken(t, key)
}

// TokenEnv is the environment variable that holds the admin token.
const TokenEnv = "WASMSTREAM_ADMIN_TOKEN"

// ResolveToken is the host's admin token: env (the value of TokenEnv) when
// set, else the file at path (admin.token_file), else an error saying how to
// give one. Either source is checked as CheckToken and ReadTokenFile do.
func ResolveToken(env, path string) (string, error) {
	if t := strings.TrimSpace(env); t != "" {
		return t, CheckToken(t, TokenEnv)
	}
	if path != "" {
		return ReadTokenFile(path, "admin.token_file")
	}
	return "", errors.New("admin: no token: set " + TokenEnv + " or admin.token_file, or turn the admin API off with admin.enabled: false")
}

// CreateTokenFile writes a new random token (32 random bytes, hex) to path,
// readable by its owner only (mode 0600). It fails with an error wrapping
// os.ErrExist if path exists: a token file is never overwritten.
func CreateTokenFile(path string) error {
	b := make([]byte, MinTokenBytes)
	if _, err := cryptorand.Read(b); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("admin.token_file: %w", err)
	}
	// The mode given to OpenFile is filtered by the umask, which can only
	// remove bits; Chmod makes it exactly 0600 whatever the umask.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("admin.token_file: %w", err)
	}
	_, err = f.Write([]byte(hex.EncodeToString(b) + "\n"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("admin.token_file: %w", err)
	}
	return nil
}
