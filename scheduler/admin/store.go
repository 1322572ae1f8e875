// Package admin is wasmstream's operations surface: the module store
// (content-addressed, with a manifest of what each pipeline runs), the
// authenticated admin API that uploads, deploys and rolls back processors,
// and the metrics and health endpoints.
package admin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/wasmstream/wasmstream/internal/verlabel"
)

// Store keeps modules on disk by digest (modules/<sha256>.wasm) and a
// manifest of which version each pipeline runs and ran before, so that a
// restart comes back on the deployed versions. Safe for concurrent use.
type Store struct {
	dir string
	mu  sync.Mutex
	man Manifest
}

// Manifest is the store's index (manifest.json).
type Manifest struct {
	Pipelines map[string]*PipelineState `json:"pipelines"`
	Modules   map[string]*ModuleMeta    `json:"modules"`
}

// PipelineState is what a pipeline runs.
type PipelineState struct {
	Active   string    `json:"active"`            // digest
	History  []string  `json:"history,omitempty"` // earlier active digests, oldest first
	Deployed time.Time `json:"deployed"`
}

// ModuleMeta describes a stored module.
type ModuleMeta struct {
	Digest   string    `json:"digest"`
	Size     int       `json:"size"`
	Pipeline string    `json:"pipeline"` // validated against this pipeline's config
	Source   string    `json:"source"`   // "config", "upload" or "registry"
	Added    time.Time `json:"added"`
	// Label names the version (deploy --label; verlabel), "" for none.
	Label string `json:"label,omitempty"`
}

// ErrNotFound is returned for an unknown digest.
var ErrNotFound = errors.New("no such module")

// OpenStore opens (creating) the store in dir. It removes the temporary
// files a write cut short (a crash, a full disk) left behind, and logs each
// one on log.
func OpenStore(dir string, log *slog.Logger) (*Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, "modules"), 0o755); err != nil {
		return nil, fmt.Errorf("admin.store_dir: %w", err)
	}
	if err := removeTemps(dir, log); err != nil {
		return nil, fmt.Errorf("admin.store_dir: %w", err)
	}
	s := &Store{dir: dir, man: Manifest{Pipelines: map[string]*PipelineState{}, Modules: map[string]*ModuleMeta{}}}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("admin.store_dir: %w", err)
	default:
		if err := json.Unmarshal(b, &s.man); err != nil {
			return nil, fmt.Errorf("admin.store_dir: %s/manifest.json: %w", dir, err)
		}
		if s.man.Pipelines == nil {
			s.man.Pipelines = map[string]*PipelineState{}
		}
		if s.man.Modules == nil {
			s.man.Modules = map[string]*ModuleMeta{}
		}
	}
	return s, nil
}

// Digest is the store's name for wasm.
func Digest(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return hex.EncodeToString(sum[:])
}

// Put stores wasm (already validated for pipeline) and returns its digest.
func (s *Store) Put(pipeline, source string, wasm []byte) (string, error) {
	d := Digest(wasm)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.man.Modules[d]; ok {
		return d, nil
	}
	if err := writeAtomic(s.path(d), wasm); err != nil {
		return "", err
	}
	s.man.Modules[d] = &ModuleMeta{Digest: d, Size: len(wasm), Pipeline: pipeline, Source: source, Added: time.Now().UTC()}
	if err := s.saveLocked(); err != nil {
		delete(s.man.Modules, d) // the manifest in memory stays what is on disk
		return "", err
	}
	return d, nil
}

// Get returns a stored module, checking it against its digest.
func (s *Store) Get(digest string) ([]byte, error) {
	s.mu.Lock()
	_, ok := s.man.Modules[digest]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("%w %s", ErrNotFound, digest)
	}
	b, err := os.ReadFile(s.path(digest))
	if err != nil {
		return nil, err
	}
	if Digest(b) != digest {
		return nil, fmt.Errorf("module %s on disk does not match its digest (corrupted store)", digest)
	}
	return b, nil
}

// ModuleSource is where Fetch reads a module the store lacks: the fleet's
// registry (*registry.Registry).
type ModuleSource interface {
	Module(ctx context.Context, digest string, size int) ([]byte, error)
}

// Fetch is the one lookup of a module by digest: from the store, else read
// from src (of size bytes as its deployment declares, 0: not declared),
// checked against digest and stored for pipeline (source "registry").
// Every path that runs a deployed version reads its module through it.
func (s *Store) Fetch(ctx context.Context, src ModuleSource, pipeline, digest string, size int) ([]byte, error) {
	wasm, err := s.Get(digest)
	if !errors.Is(err, ErrNotFound) {
		return wasm, err
	}
	if wasm, err = src.Module(ctx, digest, size); err != nil {
		return nil, err
	}
	if Digest(wasm) != digest {
		return nil, fmt.Errorf("module %s read from the registry does not match its digest", short(digest))
	}
	if _, err := s.Put(pipeline, "registry", wasm); err != nil {
		return nil, err
	}
	return wasm, nil
}

// Size is the size of the stored module digest (0 if not stored).
func (s *Store) Size(digest string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.man.Modules[digest]; m != nil {
		return m.Size
	}
	return 0
}

// SetLabel gives the stored module digest the label (verlabel.Check); ""
// leaves its label as it is. A label is the version's, wherever it runs: a
// deploy with another label renames it.
func (s *Store) SetLabel(digest, label string) error {
	if err := verlabel.Check(label); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.man.Modules[digest]
	if m == nil {
		return fmt.Errorf("%w %s", ErrNotFound, digest)
	}
	if label == "" || m.Label == label {
		return nil
	}
	old := m.Label
	m.Label = label
	if err := s.saveLocked(); err != nil {
		m.Label = old
		return err
	}
	return nil
}

// Label is the label of the stored module digest ("" for none).
func (s *Store) Label(digest string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.man.Modules[digest]; m != nil {
		return m.Label
	}
	return ""
}

// Activate records that pipeline now runs digest.
func (s *Store) Activate(pipeline, digest string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateLocked(pipeline, func(ps *PipelineState) (bool, error) {
		if ps.Active == digest {
			return false, nil
		}
		if ps.Active != "" {
			ps.History = append(ps.History, ps.Active)
			if len(ps.History) > 50 {
				ps.History = ps.History[len(ps.History)-50:]
			}
		}
		ps.Active, ps.Deployed = digest, time.Now().UTC()
		return true, nil
	})
}

// updateLocked applies f to a copy of pipeline's state and, if f changed
// it, saves the manifest with the copy; the state in memory changes only if
// the save succeeds, so it always equals the manifest on disk.
func (s *Store) updateLocked(pipeline string, f func(ps *PipelineState) (changed bool, err error)) error {
	old := s.man.Pipelines[pipeline]
	next := &PipelineState{}
	if old != nil {
		*next = *old
		next.History = slices.Clone(old.History)
	}
	changed, err := f(next)
	if err != nil || !changed {
		return err
	}
	s.man.Pipelines[pipeline] = next
	if err := s.saveLocked(); err != nil {
		if old == nil {
			delete(s.man.Pipelines, pipeline)
		} else {
			s.man.Pipelines[pipeline] = old
		}
		return err
	}
	return nil
}

// Previous is the version pipeline ran before its active one.
func (s *Store) Previous(pipeline string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.man.Pipelines[pipeline]
	if ps == nil || len(ps.History) == 0 {
		return "", false
	}
	return ps.History[len(ps.History)-1], true
}

// Rolled records a rollback of pipeline to its previous version (which
// leaves the history, rather than growing it).
func (s *Store) Rolled(pipeline, digest string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateLocked(pipeline, func(ps *PipelineState) (bool, error) {
		if len(ps.History) == 0 || ps.History[len(ps.History)-1] != digest {
			return false, fmt.Errorf("%s is not the previous version of %s", digest, pipeline)
		}
		ps.History = ps.History[:len(ps.History)-1]
		ps.Active, ps.Deployed = digest, time.Now().UTC()
		return true, nil
	})
}

// Prune deletes the stored modules that no pipeline runs or ran (its
// active version and its history, at most 50) and that keep does not
// name, added before olderThan, and reports how many and their bytes.
// Without it the store grows by every version uploaded or read from the
// registry, forever; with it the store holds per pipeline at most 51
// versions, the fleet's (keep) and what was added since olderThan.
func (s *Store) Prune(keep map[string]bool, olderThan time.Time) (removed, bytes int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	used := map[string]bool{}
	for _, ps := range s.man.Pipelines {
		used[ps.Active] = true
		for _, h := range ps.History {
			used[h] = true
		}
	}
	var gone []*ModuleMeta
	for d, m := range s.man.Modules {
		if !used[d] && !keep[d] && m.Added.Before(olderThan) {
			gone = append(gone, m)
			delete(s.man.Modules, d)
		}
	}
	if len(gone) == 0 {
		return 0, 0, nil
	}
	// The manifest first: a module it names is always on disk; a file it
	// does not name is only space, which removeOrphansLocked takes back.
	if err := s.saveLocked(); err != nil {
		for _, m := range gone {
			s.man.Modules[m.Digest] = m
		}
		return 0, 0, err
	}
	for _, m := range gone {
		if err := os.Remove(s.path(m.Digest)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, bytes, err
		}
		removed++
		bytes += m.Size
	}
	return removed, bytes, s.removeOrphansLocked(olderThan)
}

// removeOrphansLocked removes module files the manifest does not name
// (a write or a prune cut short between the file and the manifest),
// modified before olderThan.
func (s *Store) removeOrphansLocked(olderThan time.Time) error {
	files, err := filepath.Glob(filepath.Join(s.dir, "modules", "*.wasm"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if _, ok := s.man.Modules[strings.TrimSuffix(filepath.Base(f), ".wasm")]; ok {
			continue
		}
		if st, err := os.Lstat(f); err == nil && st.Mode().IsRegular() && st.ModTime().Before(olderThan) {
			if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// Active is the version pipeline runs, per the manifest.
func (s *Store) Active(pipeline string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.man.Pipelines[pipeline]
	if ps == nil || ps.Active == "" {
		return "", false
	}
	return ps.Active, true
}

// Snapshot returns a copy of the manifest.
func (s *Store) Snapshot() Manifest {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(&s.man)
	var m Manifest
	json.Unmarshal(b, &m)
	return m
}

// Versions lists the modules stored for pipeline, newest first.
func (s *Store) Versions(pipeline string) []ModuleMeta {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []ModuleMeta
	for _, m := range s.man.Modules {
		if m.Pipeline == pipeline {
			out = append(out, *m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Added.After(out[j].Added) })
	return out
}

func (s *Store) path(digest string) string {
	return filepath.Join(s.dir, "modules", digest+".wasm")
}

func (s *Store) saveLocked() error {
	b, err := json.MarshalIndent(&s.man, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(filepath.Join(s.dir, "manifest.json"), b)
}

// tempPattern names writeAtomic's temporary files; removeTemps removes the
// ones left behind.
const tempPattern = ".tmp-*"

// removeTemps removes the temporary files of writeAtomic left in the store's
// directories, logging each.
func removeTemps(dir string, log *slog.Logger) error {
	for _, d := range []string{dir, filepath.Join(dir, "modules")} {
		names, err := filepath.Glob(filepath.Join(d, tempPattern))
		if err != nil {
			return err
		}
		for _, n := range names {
			st, err := os.Lstat(n)
			if err != nil || !st.Mode().IsRegular() {
				continue
			}
			if err := os.Remove(n); err != nil {
				return fmt.Errorf("removing a leftover temporary file: %w", err)
			}
			log.Info("admin: removed a leftover temporary file of the module store", "file", n, "size", st.Size(), "modified", st.ModTime().UTC().Format(time.RFC3339))
		}
	}
	return nil
}

// writeAtomic writes b to path through a synced temporary file and a rename.
func writeAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), tempPattern)
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
