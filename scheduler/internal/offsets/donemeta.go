// Package offsets keeps a partition's commit point: the watermark of the
// records whose outcome is durable (Tracker), and the done offsets above it
// recorded in the commit's metadata (EncodeDone, DecodeDone), which the
// partition's next owner skips.
package offsets

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

// EncodeDone encodes done (sorted ascending, all > base) within maxLen bytes.
// It returns "" when there is nothing to record or no room, and how many of
// the done offsets the encoding covers.
func EncodeDone(base int64, done []int64, maxLen int) (string, int) {
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

// ErrNotOurs marks metadata wasmstream did not write (another tool's commit).
var ErrNotOurs = errors.New("not wasmstream commit metadata")

// DoneSet is a decoded set of done offsets in [base, base+span).
type DoneSet struct {
	base int64
	span int64
	bits []byte // bit i = base+i done
}

// Has reports whether offset o is recorded done.
func (d *DoneSet) Has(o int64) bool {
	if d == nil || o < d.base || o >= d.base+d.span {
		return false
	}
	i := o - d.base
	return d.bits[i/8]&(1<<(i%8)) != 0
}

// End is one past the last offset the set describes: no offset from there
// on is in it.
func (d *DoneSet) End() int64 {
	if d == nil {
		return 0
	}
	return d.base + d.span
}

// Count is the number of done offsets in the set.
func (d *DoneSet) Count() int {
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

// DecodeDone decodes metadata written by EncodeDone for commit offset base.
func DecodeDone(meta string, base int64) (*DoneSet, error) {
	if meta == "" {
		return nil, nil
	}
	if !strings.HasPrefix(meta, doneMetaPrefix) {
		return nil, ErrNotOurs
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
	d := &DoneSet{base: base, span: int64(span), bits: make([]byte, (span+7)/8)}
	switch kind {
	case kindBitset:
		if uint64(len(p)) != (span+7)/8 {
			return nil, errors.New("commit metadata: bitset length")
		}
		copy(d.bits, p)
		if d.Has(base) {
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
