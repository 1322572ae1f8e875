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
// Two-part keys (ABI.md §4.2: a key and a sub) are stored under Key2's
// encoding, which begins with Key2Marker: a namespace of their own that no
// one-part key enters (the state refuses a one-part key that begins with
// the marker), kept in a bucket of their own (bucketData2) so that a scan
// of one-part keys never walks them, and sorted so that one key's subs
// are adjacent and in sub order. The changelog record of a two-part write
// has the encoded key as its key; a one-part key's record is unchanged.
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
	// bucketData2 holds the two-part keys (Key2), by their encoding.
	bucketData2 = []byte("data2")
	bucketMeta  = []byte("meta")
	keyNext     = []byte("changelog_next")
	keyBytes    = []byte("bytes") // the keys' and values' bytes, the empty key's included
	// keyEmpty holds the value of the empty state key (absent: it has
	// none), which bbolt cannot hold in the data bucket.
	keyEmpty = []byte("empty_key")
	// keyStreamTime holds the stream time (StreamTimeKey).
	keyStreamTime = []byte("stream_time")
)

// MaxKeyBytes is the longest key a store holds: the longest state key a
// guest can use (abi.MaxStateKeyBytes; bbolt's own bound is 32 KiB). A
// longer key could never be read (state_get refuses it), and a scan that
// listed it would hand the guest a cursor it cannot pass back.
const MaxKeyBytes = abi.MaxStateKeyBytes

// Key2Marker begins every two-part key's encoding (Key2). Eight bytes no
// text key begins with (a NUL, 0xFF and "ws2"), and a one-part key that
// begins with them is refused, so the namespaces never meet.
const Key2Marker = "\x00\xffws2\x00\xff\x00"

// key2Head is the marker and the key's length (u16 big-endian).
const key2Head = len(Key2Marker) + 2

// MaxKey2Bytes is the longest two-part key's encoding: a key and a sub of
// at most MaxKeyBytes each.
const MaxKey2Bytes = key2Head + 2*MaxKeyBytes

// Key2 appends the encoding of the two-part key (key, sub) to dst:
// Key2Marker | len(key) u16 BE | key | sub. The key's length makes the
// encoding one to one and keeps one key's subs apart from a longer key's;
// the sub last keeps them in sub order, so Key2(key, prefix) is the scan
// prefix of key's subs that start with prefix. key is at most MaxKeyBytes.
func Key2(dst, key, sub []byte) []byte {
	dst = append(dst, Key2Marker...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(key)))
	dst = append(dst, key...)
	return append(dst, sub...)
}

// Key2Size is the length of the two-part key (key, sub)'s encoding.
func Key2Size(key, sub []byte) int { return key2Head + len(key) + len(sub) }

// IsKey2 reports whether k is a two-part key's encoding (or a prefix of
// such keys).
func IsKey2(k []byte) bool {
	return len(k) >= len(Key2Marker) && string(k[:len(Key2Marker)]) == Key2Marker
}

// SplitKey2 returns the key and sub of a two-part key's encoding; ok is
// false when k is not one.
func SplitKey2(k []byte) (key, sub []byte, ok bool) {
	if !IsKey2(k) || len(k) < key2Head {
		return nil, nil, false
	}
	n := int(binary.BigEndian.Uint16(k[len(Key2Marker):]))
	if n > MaxKeyBytes || len(k) < key2Head+n || len(k)-key2Head-n > MaxKeyBytes {
		return nil, nil, false
	}
	return k[key2Head : key2Head+n], k[key2Head+n:], true
}

// Key2Group is the group of a two-part key's encoding or scan prefix k:
// Key2Marker, its key's length and its key (the prefix of all that key's
// subs), or TimerPrefix for a timer's key. ok is false for any other key
// (a one-part key, the stream time's). A scan of one key's subs
// (state_scan2) or of the timers lists keys of one group only.
func Key2Group(k []byte) (group []byte, ok bool) {
	if len(k) >= len(TimerPrefix) && string(k[:len(TimerPrefix)]) == TimerPrefix {
		return k[:len(TimerPrefix)], true
	}
	key, _, ok := SplitKey2(k)
	if !ok {
		return nil, false
	}
	return k[:key2Head+len(key)], true
}

// StreamTimeKey is the key under which the partition's stream time (ABI.md
// §4.2: the largest timestamp of its decided records) is written, in the
// changelog as a state write is, its value 8 bytes (int64 big-endian
// milliseconds). It begins with Key2Marker, so no guest key is it, and is
// no two-part key's encoding (its length field, 0xFFFF, is over
// MaxKeyBytes). The store keeps it in its meta data (keyStreamTime), out
// of the keys' bytes and of every scan.
const StreamTimeKey = Key2Marker + "\xff\xffstream_time"

// StreamTimeHeader is the header in which a changelog record carries the
// partition's stream time as of its record's writes, its value 8 bytes
// as StreamTimeKey's. The host puts it on every put's record (a record
// with no put writes StreamTimeKey instead); a restore takes the largest
// stream time it reads, from either.
const StreamTimeHeader = "wasmstream.stream.time"

// TimerPrefix begins every timer's key (TimerKey): the two-part marker
// and a length, 0xFFFE, that no two-part key has (over MaxKeyBytes) and
// the stream time's does not (0xFFFF). Timers are kept with the two-part
// keys (bucketData2), apart from every scan but their own.
const TimerPrefix = Key2Marker + "\xff\xfe"

// timerHead is TimerPrefix and the timer's at.
const timerHead = len(TimerPrefix) + 8

// TimerKey appends the key under which the timer (key, at) (ABI.md §4.2)
// is kept, in the store and the changelog, to dst: TimerPrefix | at u64
// big-endian with its sign bit flipped | key. The at first, ordered as
// signed numbers are, puts the timers in (at, key) order, so the due ones
// are a scan of the prefix from its start; its value is empty.
func TimerKey(dst, key []byte, at int64) []byte {
	dst = append(dst, TimerPrefix...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(at)^(1<<63))
	return append(dst, key...)
}

// SplitTimerKey returns the key and at of a timer's key (TimerKey); ok is
// false when k is not one.
func SplitTimerKey(k []byte) (key []byte, at int64, ok bool) {
	if len(k) < timerHead || string(k[:len(TimerPrefix)]) != TimerPrefix || len(k)-timerHead > MaxKeyBytes {
		return nil, 0, false
	}
	return k[timerHead:], int64(binary.BigEndian.Uint64(k[len(TimerPrefix):]) ^ (1 << 63)), true
}

// TimerAt returns the at of a timer's key (TimerKey) given as a string;
// ok is false when k is not one.
func TimerAt(k string) (at int64, ok bool) {
	if len(k) < timerHead || k[:len(TimerPrefix)] != TimerPrefix || len(k)-timerHead > MaxKeyBytes {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64([]byte(k[len(TimerPrefix):timerHead])) ^ (1 << 63)), true
}

// MaxValueBytes is the largest value a store holds (bbolt's bound).
const MaxValueBytes = bolt.MaxValueSize

// ErrCannotHold is wrapped by the error of a write the store cannot hold
// (Check).
var ErrCannotHold = errors.New("the state store cannot hold this write")

// Check reports whether the store can hold w: nil, or an error wrapping
// ErrCannotHold that says why.
func Check(w Write) error {
	switch {
	case string(w.Key) == StreamTimeKey:
		if w.Value != nil && len(w.Value) != 8 {
			return fmt.Errorf("%w: a stream time of %d bytes (8)", ErrCannotHold, len(w.Value))
		}
		return nil
	case len(w.Key) >= len(TimerPrefix) && string(w.Key[:len(TimerPrefix)]) == TimerPrefix:
		if _, _, ok := SplitTimerKey(w.Key); !ok || len(w.Value) > 0 {
			return fmt.Errorf("%w: a malformed timer of %d bytes (value %d)", ErrCannotHold, len(w.Key), len(w.Value))
		}
		return nil
	case IsKey2(w.Key):
		if _, _, ok := SplitKey2(w.Key); !ok {
			return fmt.Errorf("%w: a malformed two-part key of %d bytes", ErrCannotHold, len(w.Key))
		}
	case len(w.Key) > MaxKeyBytes:
		return fmt.Errorf("%w: a key of %d bytes (at most %d)", ErrCannotHold, len(w.Key), MaxKeyBytes)
	}
	if len(w.Value) > MaxValueBytes {
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

// initialMap is the address space a store maps at its opening: its file
// grows within it without a new mapping, where each would copy every key
// and value the open write transaction touched out of the old one (a
// growing store's remaps were 8% of a windowed count's allocations). It
// is address space, not memory: only the pages read are resident, and the
// file is no larger for it.
const initialMap = 64 << 20

// allocStep is what a store's file grows by past what a commit needs.
const allocStep = 1 << 20

// Open opens (creating it if needed) the store at path. A file bbolt
// cannot read is removed and created anew: its content comes back from the
// changelog. lockWait bounds the wait for another handle on the file (the
// previous assignment's, still closing).
func Open(path string, lockWait time.Duration) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	opts := &bolt.Options{Timeout: lockWait, NoSync: true, NoFreelistSync: true, FreelistType: bolt.FreelistMapType,
		InitialMmapSize: initialMap}
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
	// The file grows by what a commit needs and a mebibyte (bbolt grows a
	// file mapped past its default 16 MiB step by that step).
	db.AllocSize = allocStep
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
		if _, err := tx.CreateBucketIfNotExists(bucketData2); err != nil {
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
		for _, b := range [][]byte{bucketData, bucketData2, bucketMeta} {
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
	b, k := bucketOf(tx, key)
	return b.Get(k)
}

// bucketOf is the bucket and bbolt key a state key is kept under: the
// empty key and the stream time in the meta bucket (bbolt refuses an empty
// key), a two-part key in bucketData2, any other in bucketData.
func bucketOf(tx *bolt.Tx, key []byte) (*bolt.Bucket, []byte) {
	switch {
	case len(key) == 0:
		return tx.Bucket(bucketMeta), keyEmpty
	case IsKey2(key):
		if string(key) == StreamTimeKey {
			return tx.Bucket(bucketMeta), keyStreamTime
		}
		return tx.Bucket(bucketData2), key
	}
	return tx.Bucket(bucketData), key
}

// StreamTime is the stream time the store holds (StreamTimeKey), -1 when
// it holds none.
func (s *Store) StreamTime() (int64, error) {
	t := int64(-1)
	err := s.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyStreamTime); len(v) == 8 {
			t = int64(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	return t, err
}

// Scan calls fn for the keys with prefix after after (all with prefix when
// after is empty, the empty key first), in key order, until fn returns
// false. A prefix that begins with Key2Marker scans the two-part keys'
// encodings; any other, the one-part keys only. Key and value are valid only during fn; fn must not call the
// store's writers.
func (s *Store) Scan(prefix, after []byte, fn func(k, v []byte) bool) error {
	return s.db.View(func(tx *bolt.Tx) error {
		data := tx.Bucket(bucketData)
		if IsKey2(prefix) {
			data = tx.Bucket(bucketData2)
		} else if len(prefix) == 0 && len(after) == 0 {
			// The empty key sorts before every other and has every
			// key's prefix only when the prefix is empty.
			if v := tx.Bucket(bucketMeta).Get(keyEmpty); v != nil && !fn([]byte{}, v) {
				return nil
			}
		}
		c := data.Cursor()
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
		bs := openBuckets(tx)
		for _, w := range ws {
			b, c, k := bs.of(w.Key)
			// The stream time is not a key's: not in the keys' bytes.
			counted := string(w.Key) != StreamTimeKey
			old := c.get(k)
			if old != nil && counted {
				n -= int64(len(w.Key) + len(old))
			}
			v := w.Value
			// Stream time only goes forward, whatever order writes of it
			// come in (records decided out of offset order).
			if !counted && len(old) == 8 && len(v) == 8 && int64(binary.BigEndian.Uint64(old)) > int64(binary.BigEndian.Uint64(v)) {
				continue
			}
			var err error
			if v == nil {
				err = b.Delete(k)
			} else {
				err = b.Put(k, v)
				if counted {
					n += int64(len(w.Key) + len(w.Value))
				}
			}
			if err != nil {
				return err
			}
		}
		if err := bs.meta.Put(keyBytes, binary.BigEndian.AppendUint64(nil, uint64(n))); err != nil {
			return err
		}
		if next >= 0 {
			return bs.meta.Put(keyNext, binary.BigEndian.AppendUint64(nil, uint64(next)))
		}
		return nil
	})
	if err == nil {
		s.bytes.Store(n)
	}
	return err
}

// txBuckets are the store's buckets in one write transaction, each with
// a cursor that reads a key's value before it is written (Apply): looked
// up once a transaction rather than once a write (tx.Bucket allocates the
// bucket and copies its header, a write's Get a cursor and its stack,
// three to four allocations a write), the cursor repositioned by each
// read.
type txBuckets struct {
	data, data2, meta    *bolt.Bucket
	cData, cData2, cMeta reuseCursor
}

func openBuckets(tx *bolt.Tx) *txBuckets {
	bs := &txBuckets{data: tx.Bucket(bucketData), data2: tx.Bucket(bucketData2), meta: tx.Bucket(bucketMeta)}
	bs.cData.b, bs.cData2.b, bs.cMeta.b = bs.data, bs.data2, bs.meta
	return bs
}

// of is bucketOf within the transaction: the bucket a state key is kept
// under, its cursor and the bbolt key.
func (bs *txBuckets) of(key []byte) (*bolt.Bucket, *reuseCursor, []byte) {
	switch {
	case len(key) == 0:
		return bs.meta, &bs.cMeta, keyEmpty
	case IsKey2(key):
		if string(key) == StreamTimeKey {
			return bs.meta, &bs.cMeta, keyStreamTime
		}
		return bs.data2, &bs.cData2, key
	}
	return bs.data, &bs.cData, key
}

// reuseCursor is a bucket's cursor made at its first read and repositioned
// (Seek) by each: bbolt invalidates a cursor's position when the bucket
// changes, never the cursor, and Seek searches from the root again.
type reuseCursor struct {
	b *bolt.Bucket
	c *bolt.Cursor
}

// get is key's value (nil: none), as Bucket.Get answers it: a nested
// bucket's key has no value.
func (rc *reuseCursor) get(key []byte) []byte {
	if rc.c == nil {
		rc.c = rc.b.Cursor()
	}
	k, v := rc.c.Seek(key)
	if !bytes.Equal(k, key) {
		return nil
	}
	return v
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
		n = tx.Bucket(bucketData).Stats().KeyN + tx.Bucket(bucketData2).Stats().KeyN
		if tx.Bucket(bucketMeta).Get(keyEmpty) != nil {
			n++
		}
		return nil
	})
	return n
}
