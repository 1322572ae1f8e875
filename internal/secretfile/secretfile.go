// Package secretfile reads secrets (tokens, passwords, private keys) from
// files the way ssh reads private keys: a file that group or others may
// access is refused, since its secret is then no longer a secret.
package secretfile

import (
	"fmt"
	"io"
	"os"
	"runtime"
)

// Read reads the file at path, at most max bytes. It refuses a file that is
// not a regular file, one that group or others may access, an empty one and
// one larger than max. key names the config key that gave path and what
// the secret ("the admin token"), for the messages; no message holds any
// of the file's contents.
func Read(path, key, what string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %s is not a regular file", key, path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("%s: %s is accessible by group or others (mode %04o), so other users can read %s: chmod 600 %s", key, path, perm, what, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if len(b) > max {
		return nil, fmt.Errorf("%s: %s is larger than %d bytes: want %s only", key, path, max, what)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%s: %s is empty", key, path)
	}
	return b, nil
}
