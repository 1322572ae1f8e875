package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

func scanSubs(t *testing.T, rs *Record, key, prefix, after string) string {
	t.Helper()
	var out []string
	if e := rs.Scan2([]byte(key), []byte(prefix), []byte(after), func(s, v []byte) bool {
		out = append(out, "("+string(s)+")="+string(v))
		return true
	}); e != 0 {
		t.Fatal(e)
	}
	return strings.Join(out, ",")
}

// Two-part keys are a namespace of their own (ABI.md §4.2): (k, sub) is
// never the one-part key k, not even with the empty sub; a one-part scan
// lists none of them and a two-part scan lists one key's subs only, in sub
// order, from the record's writes, the overlay and the store alike. A
// one-part key that begins with the two-part marker is refused.
func TestStateKey2Namespace(t *testing.T) {
	ts := newTestPartition(t)
	r1 := ts.Begin()
	for _, e := range []abi.Errno{
		r1.Put([]byte("k"), []byte("one")),
		r1.Put2([]byte("k"), nil, []byte("empty")),
		r1.Put2([]byte("k"), []byte("b"), []byte("B")),
		r1.Put2([]byte("k"), []byte("a"), []byte("A")),
		r1.Put2([]byte("kk"), []byte("a"), []byte("other key")), // a longer key: not k's subs
		r1.Put2([]byte(""), []byte("k"), []byte("empty key")),
	} {
		if e != 0 {
			t.Fatal(e)
		}
	}
	check := func(rs *Record, where string) {
		t.Helper()
		if v, e := rs.Get([]byte("k")); e != 0 || string(v) != "one" {
			t.Fatalf("%s: one-part k = %q %v", where, v, e)
		}
		if v, e := rs.Get2([]byte("k"), nil); e != 0 || string(v) != "empty" {
			t.Fatalf("%s: (k, \"\") = %q %v", where, v, e)
		}
		if _, e := rs.Get2([]byte("k"), []byte("c")); e != abi.ErrnoNotFound {
			t.Fatalf("%s: (k, c) absent: %v", where, e)
		}
		if got := scanKeys(t, rs, "", ""); got != "k=one" {
			t.Fatalf("%s: one-part scan: %s", where, got)
		}
		if got := scanSubs(t, rs, "k", "", ""); got != "()=empty,(a)=A,(b)=B" {
			t.Fatalf("%s: subs of k: %s", where, got)
		}
		if got := scanSubs(t, rs, "k", "", "a"); got != "(b)=B" {
			t.Fatalf("%s: subs of k after a: %s", where, got)
		}
		if got := scanSubs(t, rs, "k", "b", ""); got != "(b)=B" {
			t.Fatalf("%s: subs of k with prefix b: %s", where, got)
		}
		if got := scanSubs(t, rs, "", "", ""); got != "(k)=empty key" {
			t.Fatalf("%s: subs of the empty key: %s", where, got)
		}
	}
	check(r1, "own writes")
	b, outs := ts.Commit(1, r1, nil)
	if len(outs) != 6 || string(outs[0].Key) != "k" || !bytes.Equal(outs[1].Key, statestore.Key2(nil, []byte("k"), nil)) {
		t.Fatalf("changelog records: %d, first keys %q %q", len(outs), outs[0].Key, outs[1].Key)
	}
	for i := range outs {
		b.Acked(int64(i), nil)
	}
	check(ts.Begin(), "overlay")
	if err := ts.Flush(2); err != nil {
		t.Fatal(err)
	}
	r2 := ts.Begin()
	check(r2, "store")
	if e := r2.Delete2([]byte("k"), []byte("a")); e != 0 {
		t.Fatal(e)
	}
	if got := scanSubs(t, r2, "k", "", ""); got != "()=empty,(b)=B" {
		t.Fatalf("subs of k after a delete: %s", got)
	}
	if v, e := r2.Get([]byte("k")); e != 0 || string(v) != "one" {
		t.Fatalf("one-part k after a two-part delete: %q %v", v, e)
	}
	marked := []byte(statestore.Key2Marker + "x")
	if e := r2.Put(marked, []byte("v")); e != abi.ErrnoTooLarge {
		t.Fatalf("a one-part key with the two-part marker: %v", e)
	}
	if e := r2.Put2([]byte("k"), make([]byte, abi.MaxStateKeyBytes+1), []byte("v")); e != abi.ErrnoTooLarge {
		t.Fatalf("a sub over the bound: %v", e)
	}
	if _, e := r2.Get2([]byte(statestore.StreamTimeKey), nil); e != 0 && e != abi.ErrnoNotFound {
		t.Fatalf("a key that looks like the stream time's: %v", e)
	}
}

// Only the key of a two-part key is checked against the partition: any
// sub goes with a key of the partition, and none with a key of another.
func TestStateKey2Partition(t *testing.T) {
	st, err := statestore.Open(filepath.Join(t.TempDir(), "s.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts := NewPartition(st, KeyPartition([]byte("a"), 4), 4, Limits{MaxValueBytes: 100, Changelog: "p.changelog"})
	var other []byte
	for _, k := range []string{"b", "c", "d", "e", "f", "g"} {
		if KeyPartition([]byte(k), 4) != ts.partition {
			other = []byte(k)
			break
		}
	}
	rs := ts.Begin()
	for _, sub := range []string{"a", "b", "c", "d", "e", "f", "g", ""} {
		if e := rs.Put2([]byte("a"), []byte(sub), []byte("v")); e != 0 {
			t.Fatalf("(a, %q): %v", sub, e)
		}
	}
	if e := rs.Put2(other, []byte("a"), []byte("v")); e != abi.ErrnoWrongKey {
		t.Fatalf("(%s, a) of another partition: %v", other, e)
	}
	if e := rs.Scan2(other, nil, nil, func(_, _ []byte) bool { return true }); e != abi.ErrnoWrongKey {
		t.Fatalf("scan2 of another partition's key: %v", e)
	}
}

// Stream time (ABI.md §4.2) is the largest timestamp of the partition's
// decided records, -1 before any, not the record in progress's; once a
// record read it, a decided record that moves it writes it to the
// changelog with its state, the flush writes it to the store, a new view
// reads it there, and a restore from the changelog brings it back. It
// never goes back, even when records are decided out of offset order.
func TestStateStreamTime(t *testing.T) {
	ts := newTestPartition(t)
	now := func(rs *Record) int64 {
		t.Helper()
		v, e := rs.StreamTime()
		if e != 0 {
			t.Fatal(e)
		}
		return v
	}
	r0 := ts.Begin()
	if v := now(r0); v != -1 {
		t.Fatalf("before any record: %d", v)
	}
	// Decided before any record read it: in memory only.
	r1 := ts.Begin()
	r1.Put([]byte("x"), []byte("1"))
	if _, outs := ts.CommitAt(0, 100, r1, nil); len(outs) != 1 {
		t.Fatalf("a record before any read stream time: %d changelog records", len(outs))
	}
	r2 := ts.Begin()
	if v := now(r2); v != 100 {
		t.Fatalf("after a record at 100: %d", v)
	}
	// r2 read it: its commit writes it (its own timestamp is lower).
	b2, outs := ts.CommitAt(1, 50, r2, nil)
	var all []abi.Output
	all = append(all, outs...)
	if len(outs) != 1 || string(outs[0].Key) != statestore.StreamTimeKey || int64(binary.BigEndian.Uint64(outs[0].Value)) != 100 {
		t.Fatalf("the reader's commit: %+v", outs)
	}
	b2.Acked(0, nil)
	r3 := ts.Begin()
	if v := now(r3); v != 100 {
		t.Fatalf("a record at 50 moved it: %d", v)
	}
	// From now on every record that moves it writes it.
	b3, outs := ts.CommitAt(2, 200, ts.Begin(), nil)
	all = append(all, outs...)
	if len(outs) != 1 || int64(binary.BigEndian.Uint64(outs[0].Value)) != 200 {
		t.Fatalf("a later record: %+v", outs)
	}
	b3.Acked(1, nil)
	if _, outs := ts.CommitAt(3, 150, ts.Begin(), nil); len(outs) != 0 {
		t.Fatalf("a record that does not move it wrote %d records", len(outs))
	}
	if err := ts.Flush(4); err != nil {
		t.Fatal(err)
	}
	if v, err := ts.ps.store.StreamTime(); err != nil || v != 200 {
		t.Fatalf("the store holds %d %v", v, err)
	}
	// Older writes of it applied after newer ones do not set it back.
	if err := ts.ps.store.Apply([]statestore.Write{{Key: []byte(statestore.StreamTimeKey), Value: binary.BigEndian.AppendUint64(nil, 100)}}, -1); err != nil {
		t.Fatal(err)
	}
	if v, _ := ts.ps.store.StreamTime(); v != 200 {
		t.Fatalf("an older write set it back to %d", v)
	}
	if n := ts.ps.store.Bytes(); n != int64(len("x")+len("1")) {
		t.Fatalf("the store counts %d bytes of keys and values; the stream time is none of them", n)
	}
	// A new view (a restart, a rebalance) reads it from the store.
	v := NewPartition(ts.ps.store, 0, 1, Limits{MaxValueBytes: 100})
	if got := now(v.Begin()); got != 200 {
		t.Fatalf("a new view: %d", got)
	}
	// A restore from the changelog alone brings it back.
	fresh, a := restored(t, asChangelog(all))
	if got := now(NewPartition(fresh, 0, 1, Limits{MaxValueBytes: 100}).Begin()); got != 200 || a.skipped != 0 {
		t.Fatalf("restored: %d (skipped %d)", got, a.skipped)
	}
	if n := fresh.Keys(); n != 0 {
		t.Fatalf("the stream time restored as %d keys", n)
	}
}

// A dead-lettered record moves stream time too (Decided); the next
// committed record carries it.
func TestStateStreamTimeDecided(t *testing.T) {
	ts := newTestPartition(t)
	r := ts.Begin()
	r.StreamTime()
	ts.Decided(300)
	if v, _ := ts.Begin().StreamTime(); v != 300 {
		t.Fatalf("after a dead-lettered record at 300: %d", v)
	}
	_, outs := ts.CommitAt(1, 10, r, nil)
	if len(outs) != 1 || int64(binary.BigEndian.Uint64(outs[0].Value)) != 300 {
		t.Fatalf("the next commit: %+v", outs)
	}
}

// A local state (`wasmstream test`) moves stream time with CommitAt and
// carries two-part keys from one record to the next.
func TestLocalStreamTime(t *testing.T) {
	l, err := OpenLocal(Limits{MaxValueBytes: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st := l.Begin().(*Record)
	st.Put2([]byte("k"), []byte("s"), []byte("v"))
	l.CommitAt(st, 0, 500)
	next := l.Begin().(*Record)
	if v, _ := next.StreamTime(); v != 500 {
		t.Fatalf("stream time %d, want 500", v)
	}
	if v, e := next.Get2([]byte("k"), []byte("s")); e != 0 || string(v) != "v" {
		t.Fatalf("(k, s) = %q %v", v, e)
	}
}

// The stream time rides in a header of every put's changelog record
// (statestore.StreamTimeHeader), not in a record of its own per record
// that moves it; a record with no put writes the stream time key, once
// per move. Through a windowed count's life — records that put their
// window's count and set its timer, firings that delete both, a round
// that deletes a window's every key — the changelog compacted (each key's
// newest record, tombstones removed as Kafka removes them after
// delete.retention.ms) still restores the stream time of the last
// record.
func TestStreamTimeSurvivesCompaction(t *testing.T) {
	ts := newTestPartition(t)
	var all []abi.Output
	commit := func(at int64, rs *Record) []abi.Output {
		t.Helper()
		_, outs := ts.CommitAt(int64(len(all)), at, rs, nil)
		all = append(all, outs...)
		return outs
	}
	own := 0 // records of the stream time key
	for _, step := range []struct {
		at      int64
		put     bool   // the record puts its window's count and sets a timer
		deletes string // the firing's: the keys it deletes
	}{
		{100, true, ""}, {150, true, ""}, {150, false, "a"}, {200, true, ""}, {260, false, "a,b"}, {260, false, "c"}, {300, false, "d"},
	} {
		rs := ts.Begin()
		if _, e := rs.StreamTime(); e != 0 {
			t.Fatal(e)
		}
		if step.put {
			key := fmt.Appendf(nil, "k%d", step.at)
			if e := rs.Put2(key, []byte("w"), []byte("1")); e != 0 {
				t.Fatal(e)
			}
			if e := rs.SetTimer(key, step.at+50); e != 0 {
				t.Fatal(e)
			}
		}
		for _, k := range strings.Split(step.deletes, ",") {
			if k != "" {
				rs.Delete2([]byte(k), []byte("w"))
			}
		}
		for _, o := range commit(step.at, rs) {
			if string(o.Key) == statestore.StreamTimeKey {
				own++
				if step.put {
					t.Fatalf("at %d: a record that puts wrote the stream time in a record of its own", step.at)
				}
			} else if o.Value != nil && (len(o.Headers) != 1 || o.Headers[0].Key != statestore.StreamTimeHeader || int64(binary.BigEndian.Uint64(o.Headers[0].Value)) != max(step.at, 100)) {
				t.Fatalf("at %d: a put's changelog record carries %v", step.at, o.Headers)
			}
		}
	}
	// Own records: the first delete-only record at 150 (the puts carried
	// 150), the one at 260 (not the second at 260: not newer), and 300.
	if own != 3 {
		t.Fatalf("%d records of the stream time key; want 3", own)
	}
	log := asChangelog(all)
	newest := map[string]*kgo.Record{}
	for _, r := range log {
		newest[string(r.Key)] = r
	}
	var compacted []*kgo.Record
	for _, r := range log {
		if newest[string(r.Key)] == r && r.Value != nil {
			compacted = append(compacted, r)
		}
	}
	fresh, _ := restored(t, compacted)
	if got, err := fresh.StreamTime(); err != nil || got != 300 {
		t.Fatalf("restored from %d of %d records: stream time %d (%v), want 300", len(compacted), len(log), got, err)
	}
}

// The overlay's two-part keys are indexed by key only once a scan of a
// key's subs asks (overlayGroups.subs): a scan then lists what the
// committed records wrote before it, and the index follows what they
// write after it, deletes and flushes included.
func TestScan2IndexesTheOverlayAtItsFirstScan(t *testing.T) {
	ts := newTestPartition(t)
	commit := func(off int64, f func(rs *Record)) {
		t.Helper()
		rs := ts.Begin()
		f(rs)
		ts.CommitAt(off, -1, rs, nil)
	}
	commit(0, func(rs *Record) {
		rs.Put2([]byte("a"), []byte("1"), []byte("x"))
		rs.Put2([]byte("a"), []byte("2"), []byte("y"))
		rs.Put2([]byte("b"), []byte("1"), []byte("z"))
	})
	ts.mu.Lock()
	groups := len(ts.groups.m)
	ts.mu.Unlock()
	if groups != 0 {
		t.Fatalf("%d groups indexed before any scan of subs", groups)
	}
	if got := scanSubs(t, ts.Begin(), "a", "", ""); got != "(1)=x,(2)=y" {
		t.Fatalf("the first scan: %s", got)
	}
	commit(1, func(rs *Record) {
		rs.Delete2([]byte("a"), []byte("1"))
		rs.Put2([]byte("a"), []byte("3"), []byte("w"))
	})
	if got := scanSubs(t, ts.Begin(), "a", "", ""); got != "(2)=y,(3)=w" {
		t.Fatalf("after a delete and a put: %s", got)
	}
	if err := ts.Flush(2); err != nil {
		t.Fatal(err)
	}
	commit(2, func(rs *Record) { rs.Put2([]byte("a"), []byte("0"), []byte("v")) })
	if got := scanSubs(t, ts.Begin(), "a", "", ""); got != "(0)=v,(2)=y,(3)=w" {
		t.Fatalf("after a flush and a put: %s", got)
	}
	if got := scanSubs(t, ts.Begin(), "b", "", ""); got != "(1)=z" {
		t.Fatalf("b: %s", got)
	}
}

// asChangelog is the changelog records outs make, in order from offset 0,
// their headers kept (the stream time's).
func asChangelog(outs []abi.Output) []*kgo.Record {
	recs := make([]*kgo.Record, len(outs))
	for i, o := range outs {
		recs[i] = &kgo.Record{Key: o.Key, Value: o.Value, Offset: int64(i)}
		for _, h := range o.Headers {
			recs[i].Headers = append(recs[i].Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
	}
	return recs
}

// restored is a new store restored from recs (a changelog partition's
// records) through the restore's applier, which it also returns.
func restored(t *testing.T, recs []*kgo.Record) (*statestore.Store, *changelogApplier) {
	t.Helper()
	st, err := statestore.Open(filepath.Join(t.TempDir(), "r.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := &changelogApplier{store: st, last: -1}
	for _, r := range recs {
		if err := a.add(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.flush(); err != nil {
		t.Fatal(err)
	}
	return st, a
}
