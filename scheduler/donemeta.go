package scheduler

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Commit metadata records which offsets above the committed watermark are
// already done, so that after a restart or a rebalance the partition's next
// owner skips them instead of processing them again (RATIONALE.md, "Done
// offsets in commit metadata").
//
// Format: "ws1." + base64url(raw), raw = kind byte, uvarint base (the commit
// offset it belongs to), uvarint span (offsets [base, base+span) are
// described), then
//
//	kind 1 (bitset): ceil(span/8) bytes, bit i (LSB first) set = base+i done;
//	kind 2 (runs):   uvarint run lengths alternating not-done, done, ...,
//	                 starting with a not-done run, summing to span.
//
// The encoder picks the smaller kind and never exceeds its byte budget: when
// even the smaller one does not fit, it describes a shorter span (offsets
// beyond it are processed again after a restart — safe, at-least-once).
const doneMetaPrefix = "ws1."

const (
	kindBitset = 1
	kindRuns   = 2
)

// encodeDone encodes done (sorted ascending, all > base) within maxLen bytes.
// It returns "" when there is nothing to record or no room, and how many of
// the done offsets the encoding covers.
func encodeDone(base int64, done []int64, maxLen int) (string, int) {
	// Describe no more than a decoder accepts.
	n := sort.Search(len(done), func(i int) bool { return done[i]-base >= maxDecodedSpan })
	if n == 0 {
		return "", 0
	}
	if s := encodeDoneN(base, done[:n]); len(s) <= maxLen {
		return s, n
	}
	// Largest prefix that fits: binary search on the count of done offsets.
	lo, hi := 0, n // encodes with lo fits (lo=0 trivially), with hi does not
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if len(encodeDoneN(base, done[:mid])) <= maxLen {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		return "", 0
	}
	return encodeDoneN(base, done[:lo]), lo
}

func encodeDoneN(base int64, done []int64) string {
	span := uint64(done[len(done)-1]-base) + 1
	head := []byte{0}
	head = binary.AppendUvarint(head, uint64(base))
	head = binary.AppendUvarint(head, span)

	// Runs.
	runs := append([]byte(nil), head...)
	runs[0] = kindRuns
	next := base // first offset not yet described
	for i := 0; i < len(done); {
		j := i
		for j+1 < len(done) && done[j+1] == done[j]+1 {
			j++
		}
		runs = binary.AppendUvarint(runs, uint64(done[i]-next)) // not done
		runs = binary.AppendUvarint(runs, uint64(j-i+1))        // done
		next = done[j] + 1
		i = j + 1
	}
	raw := runs
	// A bitset only when it is smaller (dense, fragmented done sets).
	if bl := len(head) + int((span+7)/8); bl < len(runs) {
		bits := make([]byte, bl)
		copy(bits, head)
		bits[0] = kindBitset
		for _, o := range done {
			i := uint64(o - base)
			bits[len(head)+int(i/8)] |= 1 << (i % 8)
		}
		raw = bits
	}
	return doneMetaPrefix + base64.RawURLEncoding.EncodeToString(raw)
}

// errNotOurs marks metadata wasmstream did not write (another tool's commit).
var errNotOurs = errors.New("not wasmstream commit metadata")

// doneSet is a decoded set of done offsets in [base, base+span).
type doneSet struct {
	base int64
	span int64
	bits []byte // bit i = base+i done
}

func (d *doneSet) has(o int64) bool {
	if d == nil || o < d.base || o >= d.base+d.span {
		return false
	}
	i := o - d.base
	return d.bits[i/8]&(1<<(i%8)) != 0
}

// count is the number of done offsets in the set.
func (d *doneSet) count() int {
	if d == nil {
		return 0
	}
	n := 0
	for _, b := range d.bits {
		for ; b != 0; b &= b - 1 {
			n++
		}
	}
	return n
}

// maxDecodedSpan bounds what a decoder will allocate: metadata is at most a
// few KiB, but a run-length encoding could claim a huge span.
const maxDecodedSpan = 1 << 24

// decodeDone decodes metadata written by encodeDone for commit offset base.
func decodeDone(meta string, base int64) (*doneSet, error) {
	if meta == "" {
		return nil, nil
	}
	if !strings.HasPrefix(meta, doneMetaPrefix) {
		return nil, errNotOurs
	}
	raw, err := base64.RawURLEncoding.DecodeString(meta[len(doneMetaPrefix):])
	if err != nil || len(raw) < 1 {
		return nil, fmt.Errorf("commit metadata: bad base64: %v", err)
	}
	kind := raw[0]
	p := raw[1:]
	b, n := binary.Uvarint(p)
	if n <= 0 {
		return nil, errors.New("commit metadata: bad base")
	}
	p = p[n:]
	span, n := binary.Uvarint(p)
	if n <= 0 || span == 0 || span > maxDecodedSpan {
		return nil, fmt.Errorf("commit metadata: bad span %d", span)
	}
	p = p[n:]
	if int64(b) != base {
		return nil, fmt.Errorf("commit metadata describes offset %d, committed offset is %d", b, base)
	}
	d := &doneSet{base: base, span: int64(span), bits: make([]byte, (span+7)/8)}
	switch kind {
	case kindBitset:
		if uint64(len(p)) != (span+7)/8 {
			return nil, errors.New("commit metadata: bitset length")
		}
		copy(d.bits, p)
		if d.has(base) {
			return nil, errors.New("commit metadata: the committed offset itself is marked done")
		}
		if r := span % 8; r != 0 && d.bits[len(d.bits)-1]>>r != 0 {
			return nil, errors.New("commit metadata: bits past the span")
		}
	case kindRuns:
		var at uint64
		for doneRun := false; len(p) > 0; doneRun = !doneRun {
			l, n := binary.Uvarint(p)
			if n <= 0 || l > span-at {
				return nil, errors.New("commit metadata: bad run")
			}
			p = p[n:]
			if doneRun {
				for i := at; i < at+l; i++ {
					d.bits[i/8] |= 1 << (i % 8)
				}
			} else if at == 0 && l == 0 {
				return nil, errors.New("commit metadata: the committed offset itself is marked done")
			}
			at += l
		}
		if at != span {
			return nil, errors.New("commit metadata: runs do not cover the span")
		}
	default:
		return nil, fmt.Errorf("commit metadata: unknown kind %d", kind)
	}
	return d, nil
}

// EncodeDoneOffsets encodes done offsets (ascending, above base) as commit
// metadata for commit offset base within maxLen bytes, and returns how many it
// covers. For tools and tests; the scheduler uses it on every commit.
func EncodeDoneOffsets(base int64, done []int64, maxLen int) (string, int) {
	return encodeDone(base, done, maxLen)
}

// DecodeDoneOffsets decodes commit metadata for commit offset base and
// returns how many done offsets it records.
func DecodeDoneOffsets(meta string, base int64) (int, error) {
	d, err := decodeDone(meta, base)
	return d.count(), err
}
