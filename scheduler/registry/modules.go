package registry

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The modules topic holds each module in chunks of ChunkBytes under keys
// "<sha256>/<index>/<count>". Whoever may write the topic may also write
// chunks that do not belong there: a chunk count no writer of the module
// used, a chunk of the wrong length, another copy of a chunk. Reading
// bounds what it holds by the module's declared size, never by what the
// keys claim, and finds the module's good copy among such records:
//
//   - The deployment declares the module's size (Deployment.Size, checked
//     against admin.max_module_bytes before anything is read), so the
//     chunk count is known and records under another count are not kept;
//     every chunk but the last is ChunkBytes long, the last is the rest.
//     A deployment written by an older host declares no size: a first
//     read of the keys alone (no value kept) finds the counts under which
//     a whole module is stored, at most admin.max_module_bytes /
//     ChunkBytes chunks, newest first, and each is tried in turn.
//   - A chunk stored twice (a module published again, or a forged copy
//     under the same key) is taken from its latest copy, as compaction
//     will leave it; if the module so assembled does not match its digest,
//     a second read takes each chunk's first copy.
//
// What one read holds is at most the declared size (one count, one copy
// of each chunk), checked against the digest before it is used.

// ModuleReadTimeout bounds reading a module from the modules topic.
const ModuleReadTimeout = 2 * time.Minute

// PutModule writes wasm's chunks to the modules topic.
func (r *Registry) PutModule(ctx context.Context, wasm []byte) error {
	digest := digestOf(wasm)
	n := chunksOf(len(wasm))
	recs := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		chunk := wasm[i*ChunkBytes : min(len(wasm), (i+1)*ChunkBytes)]
		recs = append(recs, &kgo.Record{Topic: r.Modules, Key: chunkKey(digest, i, n), Value: chunk})
	}
	if err := r.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("writing module %s to %s: %w", digest[:12], r.Modules, err)
	}
	return nil
}

// chunksOf is the number of chunks of a module of size bytes.
func chunksOf(size int) int { return max(1, (size+ChunkBytes-1)/ChunkBytes) }

func chunkKey(digest string, i, n int) []byte { return fmt.Appendf(nil, "%s/%d/%d", digest, i, n) }

// parseChunkKey splits a modules topic key into digest, index and count.
func parseChunkKey(key []byte) (digest string, i, n int, ok bool) {
	parts := strings.Split(string(key), "/")
	if len(parts) != 3 || !isDigest(parts[0]) {
		return "", 0, 0, false
	}
	i, err1 := strconv.Atoi(parts[1])
	n, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || n <= 0 || i < 0 || i >= n {
		return "", 0, 0, false
	}
	return parts[0], i, n, true
}

// Module reads the module of digest, of size bytes as its deployment
// declares (0: not declared), from the modules topic (up to its end as of
// now), within ModuleReadTimeout, and checks it against the digest.
func (r *Registry) Module(ctx context.Context, digest string, size int) ([]byte, error) {
	if !isDigest(digest) {
		return nil, fmt.Errorf("module %q: not a sha256 digest", digest)
	}
	if size < 0 || size > r.maxModule {
		return nil, fmt.Errorf("module %s: its deployment declares %d bytes, over admin.max_module_bytes (%d)", digest[:12], size, r.maxModule)
	}
	ctx, cancel := context.WithTimeout(ctx, ModuleReadTimeout)
	defer cancel()
	counts := []int{chunksOf(size)}
	if size == 0 {
		var err error
		if counts, err = r.chunkCounts(ctx, digest); err != nil {
			return nil, err
		}
		if len(counts) == 0 {
			return nil, fmt.Errorf("module %s not in %s", digest[:12], r.Modules)
		}
	}
	var lastErr error
	for _, n := range counts {
		for _, first := range []bool{false, true} {
			wasm, err := r.readChunks(ctx, digest, n, size, first)
			if err == nil {
				return wasm, nil
			}
			if ctx.Err() != nil {
				return nil, err
			}
			lastErr = err
			if !errorsIsMismatch(err) {
				break // a chunk missing: the first copies miss it too
			}
		}
	}
	return nil, lastErr
}

// scanModules reads the modules topic from its start to its end as of now,
// handing each record to fn (its value is the client's: fn copies what it
// keeps).
func (r *Registry) scanModules(ctx context.Context, fn func(*kgo.Record)) error {
	cl, err := kgo.NewClient(append(readOpts(r.base),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.Modules: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxBytes(ChunkBytes+64<<10), kgo.FetchMaxPartitionBytes(ChunkBytes+64<<10))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	want, err := ends(ctx, cl, r.Modules)
	if err != nil {
		return fmt.Errorf("reading %s: %w", r.Modules, err)
	}
	if err := readTo(ctx, cl, want, fn); err != nil {
		return fmt.Errorf("reading %s: %w", r.Modules, err)
	}
	return nil
}

// chunkCounts finds, from the keys alone, the chunk counts under which a
// whole module of digest is stored (every index present and not deleted),
// the most recently completed first.
func (r *Registry) chunkCounts(ctx context.Context, digest string) ([]int, error) {
	maxChunks := chunksOf(r.maxModule)
	seen := map[int][]bool{} // count -> which indexes are present
	last := map[int]int64{}  // count -> offset of its latest record
	err := r.scanModules(ctx, func(rec *kgo.Record) {
		d, i, n, ok := parseChunkKey(rec.Key)
		if !ok || d != digest || n > maxChunks {
			return
		}
		if seen[n] == nil {
			seen[n] = make([]bool, n)
		}
		seen[n][i] = rec.Value != nil // nil: a tombstone deletes the chunk
		last[n] = rec.Offset
	})
	if err != nil {
		return nil, err
	}
	var out []int
	for n, idx := range seen {
		whole := true
		for _, ok := range idx {
			whole = whole && ok
		}
		if whole {
			out = append(out, n)
		}
	}
	// Newest first: the latest publication of the module.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && last[out[j]] > last[out[j-1]]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// errMismatch: the chunks read assemble into a module that does not match
// its digest.
type errMismatch struct{ msg string }

func (e *errMismatch) Error() string { return e.msg }

func errorsIsMismatch(err error) bool { _, ok := err.(*errMismatch); return ok }

// readChunks reads the n chunks of digest (size bytes if not 0), each from
// its latest copy, or with first from its first copy, and checks the
// module against its digest.
func (r *Registry) readChunks(ctx context.Context, digest string, n, size int, first bool) ([]byte, error) {
	chunks := make([][]byte, n)
	err := r.scanModules(ctx, func(rec *kgo.Record) {
		d, i, cn, ok := parseChunkKey(rec.Key)
		if !ok || d != digest || cn != n {
			return
		}
		if rec.Value == nil {
			chunks[i] = nil // deleted: a later copy may come
			return
		}
		if !chunkFits(len(rec.Value), i, n, size) || (first && chunks[i] != nil) {
			return
		}
		chunks[i] = bytes.Clone(rec.Value)
	})
	if err != nil {
		return nil, err
	}
	for i, c := range chunks {
		if c == nil {
			return nil, fmt.Errorf("module %s: chunk %d of %d missing from %s", digest[:12], i, n, r.Modules)
		}
	}
	wasm := bytes.Join(chunks, nil)
	if digestOf(wasm) != digest {
		return nil, &errMismatch{fmt.Sprintf("module %s read from %s does not match its digest", digest[:12], r.Modules)}
	}
	return wasm, nil
}

// chunkFits reports whether a chunk of length l can be chunk i of n of a
// module (of size bytes if not 0): every chunk but the last is ChunkBytes,
// the last the rest.
func chunkFits(l, i, n, size int) bool {
	if i < n-1 {
		return l == ChunkBytes
	}
	if size > 0 {
		return l == size-(n-1)*ChunkBytes
	}
	return l >= 1 && l <= ChunkBytes
}
