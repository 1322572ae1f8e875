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
