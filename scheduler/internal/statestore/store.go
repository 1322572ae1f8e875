// Package statestore is one partition's local state store: a bbolt file
// holding the keys and values, and the changelog offset up to which the
// file reflects the changelog (restore reads from there). Writes are not
// synced: the changelog is what makes state durable; a file lost or
// damaged costs a full restore (RATIONALE.md, "State stores").
//
// The store also keeps the bytes of its keys and values (Bytes), which
// state.max_bytes bounds: counted by every write, in the file's meta data,
// so a restart knows it without reading the keys.
//
// Keys are any bytes up to MaxKeyBytes, the empty key included: bbolt
// refuses an empty key, so the empty key's value is kept in the meta
// bucket (keyEmpty) and scans list it first, where it sorts. A store
// written before the empty key was allowed never has one there, so it
// needs no migration (RATIONALE.md, "The empty state key").
//
// A Store is safe for concurrent use: any number of readers, one writer
// at a time (bbolt's rule).
package statestore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/wasmstream/wasmstream/abi"
)

var (
	bucketData = []byte("data")
	bucketMeta = []byte("meta")
	keyNext    = []byte("changelog_next")
	keyBytes   = []byte("bytes") // the keys' and values' bytes, the empty key's included
	// keyEmpty holds the value of the empty state key (absent: it has
	// none), which bbolt cannot hold in the data bucket.
	keyEmpty = []byte("empty_key")
)

// MaxKeyBytes is the longest key a store holds: the longest state key a
// guest can use (abi.MaxStateKeyBytes; bbolt's own bound is 32 KiB). A
// longer key could never be read (state_get refuses it), and a scan that
// listed it would hand the guest a cursor it cannot pass back.
const MaxKeyBytes = abi.MaxStateKeyBytes

// MaxValueBytes is the largest value a store holds (bbolt's bound).
const MaxValueBytes = bolt.MaxValueSize

// ErrCannotHold is wrapped by the error of a write the store cannot hold
// (Check).
var ErrCannotHold = errors.New("the state store cannot hold this write")

// Check reports whether the store can hold w: nil, or an error wrapping
// ErrCannotHold that says why.
func Check(w Write) error {
	switch {
	case len(w.Key) > MaxKeyBytes:
		return fmt.Errorf("%w: a key of %d bytes (at most %d)", ErrCannotHold, len(w.Key), MaxKeyBytes)
	case len(w.Value) > MaxValueBytes:
		return fmt.Errorf("%w: a value of %d bytes (at most %d)", ErrCannotHold, len(w.Value), MaxValueBytes)
	}
	return nil
}

// Store is one partition's store.
type Store struct {
	db   *bolt.DB
	path string
	// wmu serialises the writers (Apply, Reset), so that bytes follows
	// their transactions in order.
	wmu   sync.Mutex
	bytes atomic.Int64 // as of the last write transaction (keyBytes)
}

// Open opens (creating it if needed) the store at path. A file bbolt
// cannot read is removed and created anew: its content comes back from the
// changelog. lockWait bounds the wait for another handle on the file (the
// previous assignment's, still closing).
func Open(path string, lockWait time.Duration) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	opts := &bolt.Options{Timeout: lockWait, NoSync: true, NoFreelistSync: true, FreelistType: bolt.FreelistMapType}
	db, err := bolt.Open(path, 0o644, opts)
	if err != nil && !errors.Is(err, bolt.ErrTimeout) {
		// Damaged (a machine crash with unsynced pages): start over.
		if rerr := os.Remove(path); rerr != nil {
			return nil, fmt.Errorf("state store %s: %w (and removing it: %v)", path, err, rerr)
		}
		db, err = bolt.Open(path, 0o644, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("state store %s: %w", path, err)
	}
	db.NoSync = true
	s := &Store{db: db, path: path}
	if err := db.Update(func(tx *bolt.Tx) error {
		data, err := tx.CreateBucketIfNotExists(bucketData)
		if err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if v := meta.Get(keyBytes); len(v) == 8 {
			s.bytes.Store(int64(binary.BigEndian.Uint64(v)))
			return nil
		}
		// A store written before the count was kept: count once.
		var n int64
		if err := data.ForEach(func(k, v []byte) error { n += int64(len(k) + len(v)); return nil }); err != nil {
			return err
		}
		n += int64(len(meta.Get(keyEmpty)))
		s.bytes.Store(n)
		return meta.Put(keyBytes, binary.BigEndian.AppendUint64(nil, uint64(n)))
	}); err != nil {
		db.Close()
		return nil, fmt.Errorf("state store %s: %w", path, err)
	}
	return s, nil
}

// Bytes is the bytes of the store's keys and values (what the file holds
// besides bbolt's pages and free space); cheap to call.
func (s *Store) Bytes() int64 { return s.bytes.Load() }

// Close closes the file; it waits for reads in progress.
func (s *Store) Close() error { return s.db.Close() }

// Path is the store's file.
func (s *Store) Path() string { return s.path }

// Next is the changelog offset the store reflects everything before: a
// restore reads the changelog from there (0: everything).
func (s *Store) Next() (int64, error) {
	var n int64
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyNext); len(v) == 8 {
			n = int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return n, err
}

// Reset empties the store (its changelog offset back to 0): for a store
// ahead of its changelog, which then is not the one it was built from.
func (s *Store) Reset() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketData, bucketMeta} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		s.bytes.Store(0)
	}
	return err
}

// Get appends key's value to dst and reports whether it has one. The
// transaction is begun and rolled back here rather than through View,
// whose function, holding dst, would be an allocation every read.
func (s *Store) Get(dst, key []byte) ([]byte, bool, error) {
	tx, err := s.db.Begin(false)
	if err != nil {
		return dst, false, err
	}
	v := get(tx, key)
	if v != nil {
		dst = append(dst, v...) // before the rollback: v is the file's memory
	}
	err = tx.Rollback()
	return dst, v != nil, err
}

// get is key's value in tx (nil: none). bbolt returns a non-nil empty
// slice for an empty value.
func get(tx *bolt.Tx, key []byte) []byte {
	if len(key) == 0 {
		return tx.Bucket(bucketMeta).Get(keyEmpty)
	}
	return tx.Bucket(bucketData).Get(key)
}

// Scan calls fn for the keys with prefix after after (all with prefix when
// after is empty, the empty key first), in key order, until fn returns
// false. Key and value are valid only during fn; fn must not call the
// store's writers.
func (s *Store) Scan(prefix, after []byte, fn func(k, v []byte) bool) error {
	return s.db.View(func(tx *bolt.Tx) error {
		if len(prefix) == 0 && len(after) == 0 {
			// The empty key sorts before every other and has every
			// key's prefix only when the prefix is empty.
			if v := tx.Bucket(bucketMeta).Get(keyEmpty); v != nil && !fn([]byte{}, v) {
				return nil
			}
		}
		c := tx.Bucket(bucketData).Cursor()
		var k, v []byte
		if len(after) > 0 && bytes.Compare(after, prefix) >= 0 {
			k, v = c.Seek(after)
			if bytes.Equal(k, after) {
				k, v = c.Next()
			}
		} else {
			k, v = c.Seek(prefix)
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if !fn(k, v) {
				return nil
			}
		}
		return nil
	})
}

// Write is one change: Value nil deletes Key.
type Write struct {
	Key, Value []byte
}

// Apply writes ws in order and records next as the changelog offset the
// store now reflects everything before (unchanged when next < 0), in one
// transaction. A write the store cannot hold (Check) fails the whole
// transaction before anything is written.
func (s *Store) Apply(ws []Write, next int64) error {
	for _, w := range ws {
		if err := Check(w); err != nil {
			return err
		}
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	n := s.bytes.Load()
	err := s.db.Update(func(tx *bolt.Tx) error {
		data, meta := tx.Bucket(bucketData), tx.Bucket(bucketMeta)
		for _, w := range ws {
			b, k := data, w.Key
			if len(k) == 0 {
				b, k = meta, keyEmpty
			}
			var err error
			if old := b.Get(k); old != nil {
				n -= int64(len(w.Key) + len(old))
			}
			if w.Value == nil {
				err = b.Delete(k)
			} else {
				err = b.Put(k, w.Value)
				n += int64(len(w.Key) + len(w.Value))
			}
			if err != nil {
				return err
			}
		}
		if err := meta.Put(keyBytes, binary.BigEndian.AppendUint64(nil, uint64(n))); err != nil {
			return err
		}
		if next >= 0 {
			return meta.Put(keyNext, binary.BigEndian.AppendUint64(nil, uint64(next)))
		}
		return nil
	})
	if err == nil {
		s.bytes.Store(n)
	}
	return err
}

// Size is the bytes of the store's data in use (bbolt's file size as of
// the last transaction); cheap to call.
func (s *Store) Size() int64 {
	var n int64
	_ = s.db.View(func(tx *bolt.Tx) error {
		n = tx.Size()
		return nil
	})
	return n
}

// Keys counts the keys (a walk of the whole tree: tests and tools only).
func (s *Store) Keys() int {
	var n int
	_ = s.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(bucketData).Stats().KeyN
		if tx.Bucket(bucketMeta).Get(keyEmpty) != nil {
			n++
		}
		return nil
	})
	return n
}
