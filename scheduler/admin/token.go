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

// MinTokenBytes is the length under which an admin token is refused: a
// shorter one could be guessed by a client that may try as often as it likes
// (refused requests cost it nothing but a log line).
const MinTokenBytes = 16

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

// CheckToken refuses a token shorter than MinTokenBytes; source names where
// it came from (an environment variable or a config key) for the message.
func CheckToken(token, source string) error {
	if len(token) < MinTokenBytes {
		return fmt.Errorf("%s: the admin token is %d bytes long, want at least %d (e.g. the output of `openssl rand -hex 24`)", source, len(token), MinTokenBytes)
	}
	return nil
}

// ReadTokenFile reads a token from path, refusing (as ssh does with private
// keys) a file that group or others may access, a file that is not a
// regular file, and a token shorter than MinTokenBytes. key names the
// config key or flag that gave path.
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

// CreateTokenFile writes a new random token (24 random bytes, hex) to path,
// readable by its owner only (mode 0600). It fails with an error wrapping
// os.ErrExist if path exists: a token file is never overwritten.
func CreateTokenFile(path string) error {
	b := make([]byte, 24)
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
