// Package codecache keeps compiled module code on disk across restarts,
// without trusting what it reads back.
//
// Compiled code is native machine code: whatever the cache holds, the host
// runs. So the cache trusts an entry only if it wrote it itself:
//
//   - The directory must belong to the host's user and be writable by no
//     one else (Open refuses it otherwise): nobody else can place an entry.
//   - Each module has its own directory, named by the digest of the code
//     compiled (the module as metered and bounded). wazero writes its entries
//     there (keyed by that code, its own version and the CPU's features);
//     after a compile the host records each entry's SHA-256 in the module's
//     manifest. Before the next compile every entry is checked against the
//     manifest: one missing from it, of another digest, or left half written
//     is deleted, never read — it is compiled again.
//   - If wazero still fails on an entry, the caller drops the module's
//     entries (Drop) and compiles without the cache.
//
// Every directory is created 0700 and every file written to a temporary
// name, synced and renamed, so a crash leaves either the old entry or the
// new one. Several hosts on one machine may share a directory: at worst one
// deletes an entry another has not sealed yet, and it is compiled again.
//
// The cache is bounded: Open removes the modules least recently used past
// MaxBytes and any unused for MaxAge.
//
// What it does not stop: a process of the host's own user that writes an
// entry after Module checked the directory and before wazero reads it
// (wazero opens entries by path), which Seal then vouches for. Such a
// process is inside the host's trust anyway (RATIONALE.md, "Rebalances and
// shutdown", on the compile cache).
package codecache

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// MaxBytes bounds the cache on disk; Open removes the modules least
	// recently used past it.
	MaxBytes = 1 << 30
	// MaxAge: a module's entries unused this long are removed by Open.
	MaxAge = 30 * 24 * time.Hour

	manifestName = "manifest.json"
	// A temporary file older than this is a write a crash left.
	tmpAge = time.Minute
)

// Cache is a directory of compiled modules. Safe for concurrent use.
type Cache struct {
	dir string
	mu  sync.Mutex // serialises this process's checks and seals of one module's directory
}

// Dir is the cache's directory.
func (c *Cache) Dir() string { return c.dir }

// Open opens (creating it 0700 if missing) the cache in dir, refusing a
// directory another user owns or may write to, and trims it to MaxBytes and
// MaxAge.
func Open(dir string) (*Cache, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := private(dir); err != nil {
		return nil, err
	}
	c := &Cache{dir: dir}
	c.trim(time.Now(), MaxBytes)
	return c, nil
}

// private reports an error if dir is not a directory owned by this process's
// user and closed to everyone else's writes.
func private(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%s may be written by other users (mode %v): compiled code found there cannot be trusted; chmod go-w it or choose another directory", dir, st.Mode().Perm())
	}
	if s, ok := st.Sys().(*syscall.Stat_t); ok && int(s.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to this process's user (uid %d): compiled code found there cannot be trusted", dir, s.Uid, os.Geteuid())
	}
	return nil
}

// Module is one module's directory in the cache, opened for one compile.
type Module struct {
	c   *Cache
	dir string
	// Rejected names the entries found and deleted because they did not
	// match the manifest; Verified counts those that did.
	Rejected []string
	Verified int
}

// Module checks the directory of the module whose compiled code has the
// given hex digest: it deletes every entry that does not match the manifest,
// and returns the directory for wazero to use.
func (c *Cache) Module(digest string) (*Module, error) {
	if len(digest) < 16 || strings.ContainsAny(digest, `/\.`) {
		return nil, fmt.Errorf("bad digest %q", digest)
	}
	m := &Module{c: c, dir: filepath.Join(c.dir, digest)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return nil, err
	}
	if err := private(m.dir); err != nil {
		return nil, err
	}
	want := m.manifest()
	now := time.Now()
	err := m.walk(func(rel, path string) error {
		if strings.HasSuffix(rel, ".tmp") {
			// Another host's write in progress, or one a crash left.
			if st, err := os.Stat(path); err == nil && now.Sub(st.ModTime()) < tmpAge {
				return nil
			}
			return os.Remove(path)
		}
		sum, err := fileSum(path)
		if err == nil && sum == want[rel] {
			m.Verified++
			return nil
		}
		m.Rejected = append(m.Rejected, rel)
		return os.Remove(path)
	})
	if err != nil {
		return nil, err
	}
	// The manifest is touched on each use: trim removes the least recent.
	_ = os.Chtimes(filepath.Join(m.dir, manifestName), now, now)
	return m, nil
}

// Dir is the directory wazero's compilation cache uses for the module.
func (m *Module) Dir() string { return m.dir }

// Seal records every entry in the module's directory in its manifest: run
// after a successful compile, it vouches for what wazero just wrote (what
// was there before was checked by Module). added counts the entries the
// manifest did not hold: 0 after a compile that only read the cache.
func (m *Module) Seal() (added int, err error) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	had := m.manifest()
	sums := map[string]string{}
	err = m.walk(func(rel, path string) error {
		if strings.HasSuffix(rel, ".tmp") {
			return nil // another host's write in progress
		}
		sum, err := fileSum(path)
		if err != nil {
			return err
		}
		sums[rel] = sum
		if had[rel] != sum {
			added++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if added == 0 && len(sums) == len(had) {
		return 0, nil
	}
	b, err := json.Marshal(sums)
	if err != nil {
		return 0, err
	}
	return added, writeFile(filepath.Join(m.dir, manifestName), b)
}

// Drop deletes the module's entries and manifest.
func (m *Module) Drop() error {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	return os.RemoveAll(m.dir)
}

// manifest reads the module's manifest: entry path → hex SHA-256. A missing
// or unreadable one vouches for nothing.
func (m *Module) manifest() map[string]string {
	b, err := os.ReadFile(filepath.Join(m.dir, manifestName))
	if err != nil {
		return nil
	}
	var sums map[string]string
	if json.Unmarshal(b, &sums) != nil {
		return nil
	}
	return sums
}

// walk calls f for every file under the module's directory but the
// manifest, with its path relative to the directory. Anything but a regular
// file or a directory (a symbolic link, say) is deleted.
func (m *Module) walk(f func(rel, path string) error) error {
	return filepath.WalkDir(m.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(m.dir, path)
		switch {
		case d.IsDir():
			return nil
		case rel == manifestName:
			return nil
		case !d.Type().IsRegular():
			return os.Remove(path)
		}
		return f(filepath.ToSlash(rel), path)
	})
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeFile writes b to path through a synced temporary file and a rename.
func writeFile(path string, b []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(b); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// trim removes the modules unused for MaxAge, then the least recently used
// until the cache is within maxBytes. Errors are ignored: a module left is
// checked again before use.
func (c *Cache) trim(now time.Time, maxBytes int64) {
	ents, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	type mod struct {
		dir  string
		used time.Time
		size int64
	}
	var mods []mod
	var total int64
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		md := mod{dir: filepath.Join(c.dir, e.Name())}
		if st, err := os.Stat(filepath.Join(md.dir, manifestName)); err == nil {
			md.used = st.ModTime()
		} else if info, err := e.Info(); err == nil {
			md.used = info.ModTime() // not sealed (yet)
		}
		_ = filepath.WalkDir(md.dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				if info, err := d.Info(); err == nil {
					md.size += info.Size()
				}
			}
			return nil
		})
		if now.Sub(md.used) > MaxAge {
			_ = os.RemoveAll(md.dir)
			continue
		}
		mods = append(mods, md)
		total += md.size
	}
	slices.SortFunc(mods, func(a, b mod) int { return a.used.Compare(b.used) })
	for _, md := range mods {
		if total <= maxBytes {
			break
		}
		if os.RemoveAll(md.dir) == nil {
			total -= md.size
		}
	}
}
