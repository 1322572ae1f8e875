package tracing

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
)

// Rotation of the JSON-lines file (tracing.max_file_bytes,
// tracing.max_files): once the file has reached its size, the exporter
// renames it <file>.1 (an older <file>.1 becomes
// <file>.2, and so on; the one past MaxFiles is removed) and starts the
// file anew. Rotation happens after a whole line, so every part holds whole
// lines; a part is at most the size and one line more. A host that
// traces for weeks keeps a bounded disk footprint, the newest spans in
// <file>; `wasmstream trace` reads the parts oldest first.

// MaxRotatedFiles bounds tracing.max_files.
const MaxRotatedFiles = 100

// rotatingFile is the jsonl exporter's file. It is used under the
// exporter's lock only.
type rotatingFile struct {
	path string
	max  int64 // rotate at this size; <= 0: never
	keep int   // rotated parts kept
	f    *os.File
	size int64
}

func openRotating(path string, limit int64, keep int) (*rotatingFile, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &rotatingFile{path: path, max: limit, keep: max(keep, 1), f: f, size: st.Size()}, nil
}

func (r *rotatingFile) Write(p []byte) (int, error) {
	n, err := r.f.Write(p)
	r.size += int64(n)
	return n, err
}

// dueWith reports whether the file has reached its size with pending
// bytes more.
func (r *rotatingFile) dueWith(pending int64) bool { return r.max > 0 && r.size+pending >= r.max }

// rotate shifts the parts and starts the file anew. If the new file cannot
// be opened, writing goes on to the old one (now <file>.1) and the error
// is returned: spans are not lost for a full disk's sake.
func (r *rotatingFile) rotate() error {
	if err := os.Remove(Part(r.path, r.keep)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("tracing.file: rotating: %w", err)
	}
	for i := r.keep - 1; i >= 1; i-- {
		if err := os.Rename(Part(r.path, i), Part(r.path, i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("tracing.file: rotating: %w", err)
		}
	}
	if err := os.Rename(r.path, Part(r.path, 1)); err != nil {
		return fmt.Errorf("tracing.file: rotating: %w", err)
	}
	f, err := os.OpenFile(r.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("tracing.file: rotating: %w", err)
	}
	old := r.f
	r.f, r.size = f, 0
	return old.Close()
}

func (r *rotatingFile) Close() error { return r.f.Close() }

// Part is the name of path's rotated part n (n >= 1): path.n.
func Part(path string, n int) string { return path + "." + strconv.Itoa(n) }

// OpenJSONL opens a JSON-lines trace file with its rotated parts, as one
// reader, oldest first: <path>.N … <path>.1, then <path>. The parts are
// those found from <path>.1 on (at most MaxRotatedFiles); path itself must
// exist. Close closes every part.
func OpenJSONL(path string) (io.ReadCloser, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	for n := 1; n <= MaxRotatedFiles; n++ {
		f, err := os.Open(Part(path, n))
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			closeAll()
			return nil, err
		}
		files = append(files, f)
	}
	cur, err := os.Open(path)
	if err != nil {
		closeAll()
		return nil, err
	}
	rs := []io.Reader{}
	for i := len(files) - 1; i >= 0; i-- {
		rs = append(rs, files[i])
	}
	files = append(files, cur)
	return &parts{Reader: io.MultiReader(append(rs, cur)...), files: files}, nil
}

type parts struct {
	io.Reader
	files []*os.File
}

func (p *parts) Close() error {
	var errs []error
	for _, f := range p.files {
		errs = append(errs, f.Close())
	}
	return errors.Join(errs...)
}
