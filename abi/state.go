package abi

import (
	"encoding/binary"
	"errors"
)

// The entries state_scan writes into the guest's buffer (ABI.md §4.1): one
// after another, each
//
//	key_len u32 (little-endian) | key | value_len u32 | value
//
// in key order, as many whole entries as fit.

// StateEntrySize is the bytes AppendStateEntry adds for key and value.
func StateEntrySize(key, value []byte) int { return 8 + len(key) + len(value) }

// AppendStateEntry appends one scan entry to b.
func AppendStateEntry(b, key, value []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(key)))
	b = append(b, key...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// StateBatchCut tells where a scan batch may end (ABI.md §4.1): after at
// least one entry, and never right after the empty key alone. The empty
// key sorts first, so a batch holding only it would hand the guest the
// cursor "after the empty key", which is the empty cursor — "from the
// first key" — and the next batch would be the same: the empty key's
// entry always comes with the next one, when there is one. The zero value
// is an empty batch; Add each entry's key as it is added.
type StateBatchCut struct {
	entries   int
	onlyEmpty bool
}

// Add notes an entry of key added to the batch.
func (c *StateBatchCut) Add(key []byte) {
	c.entries++
	c.onlyEmpty = c.entries == 1 && len(key) == 0
}

// MayEnd reports whether the batch may end here, before the next entry.
func (c *StateBatchCut) MayEnd() bool { return c.entries > 0 && !c.onlyEmpty }

// ErrBadStateEntries: the bytes are not a sequence of whole scan entries.
var ErrBadStateEntries = errors.New("abi: malformed state scan entries")

// DecodeStateEntries calls fn for each entry in b, in order, until fn
// returns false. Key and value alias b.
func DecodeStateEntries(b []byte, fn func(key, value []byte) bool) error {
	for len(b) > 0 {
		var k, v []byte
		var ok bool
		if k, b, ok = cut(b); !ok {
			return ErrBadStateEntries
		}
		if v, b, ok = cut(b); !ok {
			return ErrBadStateEntries
		}
		if !fn(k, v) {
			return nil
		}
	}
	return nil
}

func cut(b []byte) (field, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, false
	}
	return b[4 : 4+n], b[4+n:], true
}
