package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

// changelogRecords decodes fuzz bytes into the records of a changelog
// partition, any a changelog can hold. Per record, a flags byte:
//
//	1 null key       2 the key made long (byte n picks MaxKeyBytes, +1, 2 KiB, 40 KiB)
//	4 null value     8 the value made large (64 KiB)
//	16 a control record (a transaction marker)
//	32 the offset goes back (byte n) instead of forward by 1 + byte n
//	64 headers, forged wasmstream.* ones included
//	128 a stream time header (statestore.StreamTimeHeader; byte n picks a
//	    value of 8 bytes, 8 bytes of the input, a null one or 3 bytes)
//
// then, unless null, the key (a length byte and bytes) and the value.
func changelogRecords(b []byte) []*kgo.Record {
	take := func() []byte {
		if len(b) == 0 {
			return []byte{}
		}
		n := min(int(b[0]), len(b)-1)
		out := b[1 : 1+n]
		b = b[1+n:]
		return out
	}
	next := func() byte {
		if len(b) == 0 {
			return 0
		}
		c := b[0]
		b = b[1:]
		return c
	}
	var recs []*kgo.Record
	off := int64(0)
	for len(b) > 0 {
		flags := next()
		r := &kgo.Record{Topic: "g.p.changelog"}
		if flags&32 != 0 {
			off = max(0, off-int64(next()))
		} else {
			off += 1 + int64(next())
		}
		r.Offset = off
		if flags&1 == 0 {
			r.Key = bytes.Clone(take())
			if flags&2 != 0 {
				n := []int{statestore.MaxKeyBytes, statestore.MaxKeyBytes + 1, 2 << 10, 40 << 10}[next()%4]
				r.Key = append(r.Key, bytes.Repeat([]byte{'k'}, max(0, n-len(r.Key)))...)
			}
		}
		if flags&4 == 0 {
			r.Value = bytes.Clone(take())
			if flags&8 != 0 {
				r.Value = append(r.Value, make([]byte, 64<<10)...)
			}
		}
		if flags&16 != 0 {
			r.Attrs = kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: true})
		}
		if flags&64 != 0 {
			r.Headers = []kgo.RecordHeader{{Key: "wasmstream.origin", Value: take()}, {Key: string(take()), Value: nil}}
		}
		if flags&128 != 0 {
			var v []byte
			switch next() % 4 {
			case 0:
				v = binary.BigEndian.AppendUint64(nil, uint64(off))
			case 1:
				v = append([]byte{}, take()...)
				v = append(v, make([]byte, max(0, 8-len(v)))...)[:8]
			case 3:
				v = []byte{1, 2, 3}
			}
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: statestore.StreamTimeHeader, Value: v})
		}
		recs = append(recs, r)
	}
	return recs
}

// FuzzChangelogToStore feeds the restore's path from the changelog to the
// store (changelogApplier) every record a changelog can hold — null, empty
// and long keys, null (tombstones), empty and large values, control
// records, offsets out of order, forged headers — in small transactions,
// and checks the store against what the records mean: control records and
// writes the store cannot hold (counted) write nothing, a null key is the
// empty key, a null value deletes, the last write of a key wins, a scan
// lists every key once in key order (the empty key first), and the store
// reflects the changelog up to one past the highest offset read. The
// applier never fails on a record.
func FuzzChangelogToStore(f *testing.F) {
	f.Add([]byte{0, 0, 1, 'a', 1, '1', 1, 0, 1, '2', 0, 0, 0, 1, 'e'})                 // a, the null key, the empty key
	f.Add([]byte{2, 0, 1, 'a', 3, 1, '1', 2, 0, 0, 2, 1, 'x'})                         // keys of 40 KiB and MaxKeyBytes
	f.Add([]byte{4, 0, 1, 'a', 0, 0, 1, 'a', 1, 'v', 16, 0, 0, 0, 5, 0, 0})            // tombstones, a control record
	f.Add([]byte{32, 3, 1, 'b', 1, 'v', 8, 0, 0, 1, 'x', 64, 0, 1, 'c', 0, 2, 'h', 1}) // back in offsets, a large value, headers
	// A two-part key, a stream time, a malformed two-part key (the marker
	// alone).
	k2, tk := statestore.Key2(nil, []byte("a"), []byte("b")), []byte(statestore.StreamTimeKey)
	seed := append([]byte{0, 0, byte(len(k2))}, k2...)
	seed = append(append(seed, 1, 'v', 0, 0, byte(len(tk))), tk...)
	seed = append(append(seed, 8, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 8), statestore.Key2Marker...)
	f.Add(append(seed, 1, 'x'))
	// Stream time headers: one of the record's offset, one of input
	// bytes, a null one and a short one, on puts and on a tombstone.
	f.Add([]byte{128, 0, 1, 'a', 1, 'v', 0, 128, 5, 1, 'b', 1, 'v', 1, 8, 1, 2, 3, 4, 5, 6, 7, 8, 132, 0, 1, 'a', 2, 128, 0, 1, 'c', 1, 'v', 3})
	dir := f.TempDir()
	var st *statestore.Store
	f.Fuzz(func(t *testing.T, in []byte) {
		if st == nil {
			var err error
			if st, err = statestore.Open(filepath.Join(dir, fmt.Sprintf("fuzz-%d.db", time.Now().UnixNano())), time.Second); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Reset(); err != nil {
			t.Fatal(err)
		}
		recs := changelogRecords(in)
		a := &changelogApplier{store: st, batch: 3, last: -1}
		model := map[string][]byte{}
		last, skipped, writes := int64(-1), 0, 0
		// The stream time: the largest written since its last delete (a
		// record of its key with a null value), -1 when none.
		streamTime := int64(-1)
		stTime := func(v []byte) {
			if t := int64(binary.BigEndian.Uint64(v)); streamTime == -1 || t > streamTime {
				streamTime = t
			}
		}
		for _, r := range recs {
			if err := a.add(r); err != nil {
				t.Fatalf("record at %d (key %d bytes, null %v): %v", r.Offset, len(r.Key), r.Key == nil, err)
			}
			last = max(last, r.Offset)
			switch {
			case r.Attrs.IsControl():
			case statestore.Check(statestore.Write{Key: r.Key, Value: r.Value}) != nil:
				skipped++ // a key over MaxKeyBytes, a malformed two-part key or stream time
			case string(r.Key) == statestore.StreamTimeKey:
				writes++ // kept apart, never backwards (TestStateStreamTime)
				if r.Value == nil {
					streamTime = -1
				} else {
					stTime(r.Value)
				}
			case r.Value == nil:
				writes++
				delete(model, string(r.Key))
			default:
				writes++
				model[string(r.Key)] = r.Value
			}
			for _, h := range r.Headers {
				switch {
				case r.Attrs.IsControl() || h.Key != statestore.StreamTimeHeader:
				case len(h.Value) != 8:
					skipped++
				default:
					stTime(h.Value)
				}
			}
		}
		if err := a.flush(); err != nil {
			t.Fatal(err)
		}
		if a.skipped != skipped || a.applied != writes {
			t.Fatalf("applied %d, skipped %d; want %d, %d", a.applied, a.skipped, writes, skipped)
		}
		if got, err := st.StreamTime(); err != nil || got != streamTime {
			t.Fatalf("the store's stream time is %d (%v), want %d", got, err, streamTime)
		}
		if next, _ := st.Next(); next != last+1 {
			t.Fatalf("the store reflects the changelog up to %d, want %d", next, last+1)
		}
		// A one-part scan lists the keys without the two-part marker;
		// the two-part keys are listed by a scan of the marker.
		one := 0
		for k := range model {
			if !statestore.IsKey2([]byte(k)) {
				one++
			}
		}
		var keys []string
		if err := st.Scan(nil, nil, func(k, v []byte) bool {
			keys = append(keys, string(k))
			if want, ok := model[string(k)]; !ok || !bytes.Equal(v, want) {
				t.Fatalf("scan: key %q = %d bytes, want %d (present %v)", k, len(v), len(want), ok)
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.IsSorted(keys) || len(slices.Compact(slices.Clone(keys))) != len(keys) || len(keys) != one || st.Keys() != len(model) {
			t.Fatalf("scan listed %d keys (sorted %v), Keys %d, want %d of %d", len(keys), slices.IsSorted(keys), st.Keys(), one, len(model))
		}
		for k, want := range model {
			if v, ok, err := st.Get(nil, []byte(k)); err != nil || !ok || !bytes.Equal(v, want) {
				t.Fatalf("get %q: %d bytes %v %v", k, len(v), ok, err)
			}
		}
	})
}
