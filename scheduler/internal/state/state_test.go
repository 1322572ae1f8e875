package state

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

func newTestPartition(t *testing.T) *Partition {
	t.Helper()
	st, err := statestore.Open(filepath.Join(t.TempDir(), "s.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return NewPartition(st, 0, 1, Limits{MaxValueBytes: 100, Changelog: "p.changelog"})
}

func scanKeys(t *testing.T, rs *Record, prefix, after string) string {
	t.Helper()
	var out []string
	if e := rs.Scan([]byte(prefix), []byte(after), func(k, v []byte) bool {
		out = append(out, string(k)+"="+string(v))
		return true
	}); e != 0 {
		t.Fatal(e)
	}
	return strings.Join(out, ",")
}

// A scan merges, in key order, the store, the overlay (newer) and the
// record's own writes (newest); deletes hide keys below them.
func TestStateScanMerges(t *testing.T) {
	ts := newTestPartition(t)
	ts.ps.store.Apply([]statestore.Write{{Key: []byte("a/1"), Value: []byte("s")}, {Key: []byte("a/3"), Value: []byte("s")}, {Key: []byte("a/5"), Value: []byte("s")}, {Key: []byte("b"), Value: []byte("s")}}, 10)
	r1 := ts.Begin()
	r1.Put([]byte("a/2"), []byte("o"))
	r1.Put([]byte("a/3"), []byte("o"))
	r1.Delete([]byte("a/5"))
	ts.Commit(1, r1, nil)
	r2 := ts.Begin()
	r2.Put([]byte("a/4"), []byte("r"))
	r2.Delete([]byte("a/1"))
	r2.Put([]byte("a/3"), []byte("r"))
	if got := scanKeys(t, r2, "a/", ""); got != "a/2=o,a/3=r,a/4=r" {
		t.Fatalf("scan: %s", got)
	}
	if got := scanKeys(t, r2, "a/", "a/2"); got != "a/3=r,a/4=r" {
		t.Fatalf("scan after a/2: %s", got)
	}
	if v, e := r2.Get([]byte("a/5")); e != abi.ErrnoNotFound {
		t.Fatalf("a deleted key in the overlay: %q %v", v, e)
	}
	if e := r2.Put([]byte("big"), make([]byte, 101)); e != abi.ErrnoTooLarge {
		t.Fatalf("a value over the bound: %v", e)
	}
}

// Flush applies the batches below the committed offset and records the
// lowest changelog offset still only in the overlay, even when the
// changelog acknowledged records out of input order (key ordering).
func TestStateFlushOffsets(t *testing.T) {
	ts := newTestPartition(t)
	write := func(off int64, key, val string) *Batch {
		rs := ts.Begin()
		rs.Put([]byte(key), []byte(val))
		b, _ := ts.Commit(off, rs, nil)
		return b
	}
	b5 := write(5, "x", "1") // input 5 released first: changelog offset 100
	b3 := write(3, "y", "1") // input 3 later: changelog offset 101
	b5.Acked(100, nil)
	b3.Acked(101, nil)
	if err := ts.Flush(4); err != nil { // the watermark: 3 done, 4 not
		t.Fatal(err)
	}
	if n, _ := ts.ps.store.Next(); n != 100 {
		t.Fatalf("the store reflects the changelog up to %d, want 100 (x's write is still only in the overlay)", n)
	}
	if _, ok, _ := ts.ps.store.Get(nil, []byte("x")); ok {
		t.Fatal("x applied before its offset committed")
	}
	if v, ok, _ := ts.ps.store.Get(nil, []byte("y")); !ok || string(v) != "1" {
		t.Fatalf("y = %q %v", v, ok)
	}
	if err := ts.Flush(6); err != nil {
		t.Fatal(err)
	}
	if n, _ := ts.ps.store.Next(); n != 102 {
		t.Fatalf("next %d, want 102", n)
	}
	if len(ts.overlay) != 0 || len(ts.batches) != 0 {
		t.Fatalf("overlay %d, batches %d after everything was flushed", len(ts.overlay), len(ts.batches))
	}
	// A batch whose changelog produce failed is never applied.
	b7 := write(7, "z", "1")
	b7.Acked(0, errTest)
	ts.Flush(8)
	if _, ok, _ := ts.ps.store.Get(nil, []byte("z")); ok || len(ts.overlay) != 0 {
		t.Fatal("a void batch was applied or kept")
	}
}

type testErr struct{}

func (testErr) Error() string { return "test" }

var errTest error = testErr{}

// The read path of asynchronous state operations (Record.Reader): the
// record's writes as they were when the view was taken, over the overlay
// and the store as they are when it reads; a key of another partition is
// refused; reads from other goroutines while records commit and the
// committer flushes (go test -race).
func TestStateReader(t *testing.T) {
	st, err := statestore.Open(filepath.Join(t.TempDir(), "s.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ts := NewPartition(st, KeyPartition([]byte("a"), 4), 4, Limits{MaxValueBytes: 100, Changelog: "p.changelog"})
	var mine, foreign []string // keys of a's partition, and of another
	for i := 0; len(mine) < 6 || len(foreign) == 0; i++ {
		k := fmt.Sprintf("k%d", i)
		if KeyPartition([]byte(k), 4) == ts.partition {
			mine = append(mine, k)
		} else {
			foreign = append(foreign, k)
		}
	}
	store, overlay, own, later := mine[0], mine[1], mine[2], mine[3]
	st.Apply([]statestore.Write{{Key: []byte(store), Value: []byte("s")}, {Key: []byte(overlay), Value: []byte("s")}}, 1)
	r1 := ts.Begin()
	r1.Put([]byte(overlay), []byte("o"))
	ts.Commit(1, r1, nil)
	r2 := ts.Begin()
	r2.Put([]byte(own), []byte("r"))
	r2.Delete([]byte(store))
	rd := r2.Reader()
	r2.Put([]byte(own), []byte("r2")) // after the view: not in it
	r2.Put([]byte(later), []byte("x"))
	get := func(k string) string {
		t.Helper()
		v, ok, e := rd.Get([]byte(k))
		if e != 0 {
			t.Fatalf("get %s: %v", k, e)
		}
		if !ok {
			return "-"
		}
		return string(v)
	}
	for k, want := range map[string]string{store: "-", overlay: "o", own: "r", later: "-", mine[4]: "-"} {
		if got := get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if e := rd.Check([]byte(foreign[0])); e != abi.ErrnoWrongKey {
		t.Errorf("a key of another partition: %v", e)
	}
	if e := rd.Check(make([]byte, abi.MaxStateKeyBytes+1)); e != abi.ErrnoTooLarge {
		t.Errorf("a key over the bound: %v", e)
	}
	var keys []string
	rd.Scan(nil, nil, func(k, v []byte) bool { keys = append(keys, string(k)+"="+string(v)); return true })
	slices.Sort(keys)
	if want := []string{own + "=r", overlay + "=o"}; !slices.Equal(keys, slices.Sorted(slices.Values(want))) {
		t.Errorf("scan: %v, want %v", keys, want)
	}
	// A record that commits after the view was taken: its write is read
	// (the shared state is read when the operation runs).
	r3 := ts.Begin()
	r3.Put([]byte(mine[4]), []byte("c"))
	ts.Commit(2, r3, nil)
	if got := get(mine[4]); got != "c" {
		t.Errorf("a write committed after the view: %q", got)
	}

	// Concurrent readers while records commit and flush.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rd := ts.Begin().Reader()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, e := rd.Get([]byte(mine[5])); e != 0 {
					t.Error(e)
					return
				}
				rd.Scan(nil, nil, func(k, v []byte) bool { return true })
			}
		}()
	}
	for i := int64(3); i < 300; i++ {
		r := ts.Begin()
		r.Put([]byte(mine[5]), []byte(fmt.Sprint(i)))
		ts.Commit(i, r, nil)
		if i%10 == 0 {
			if err := ts.Flush(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
	if v, ok, _ := ts.Begin().Reader().Get([]byte(mine[5])); !ok || string(v) != "299" {
		t.Fatalf("%s = %q after the commits", mine[5], v)
	}
}

// state.max_bytes: a put that would grow the partition's state (the
// store's keys and values, the overlay's, the record's own writes) past the
// bound returns errno 5 and is counted; puts no larger than what they
// replace and deletes pass; once the overlay is flushed the store's count
// is what remains.
func TestStateMaxBytes(t *testing.T) {
	ts := newTestPartition(t) // values of at most 100 bytes
	ts.maxBytes = 1000
	v := func(n int) []byte { return make([]byte, n) }
	var store []statestore.Write
	for i := 0; i < 4; i++ {
		store = append(store, statestore.Write{Key: []byte(fmt.Sprintf("s%d", i)), Value: v(98)})
	}
	ts.ps.store.Apply(store, 1) // 400 bytes
	r := ts.Begin()
	for i := 0; i < 6; i++ { // 600 more: at the bound
		if e := r.Put([]byte(fmt.Sprintf("n%d", i)), v(98)); e != 0 {
			t.Fatalf("put %d within the bound: %v", i, e)
		}
	}
	if e := r.Put([]byte("n6"), v(98)); e != abi.ErrnoLimit {
		t.Fatalf("a put past the bound: %v, want %v", e, abi.ErrnoLimit)
	}
	if !strings.Contains(r.OverBound(), "state.max_bytes") || ts.refused.Load() != 1 {
		t.Fatalf("the refusal: %q, %d counted", r.OverBound(), ts.refused.Load())
	}
	for _, c := range []struct {
		what string
		key  string
		n    int
		want abi.Errno
	}{
		{"the record's own key again, as large", "n0", 98, 0},
		{"the record's own key again, smaller", "n0", 50, 0},
		{"a stored key, as large", "s0", 98, 0},
		{"a stored key, larger", "s1", 99, abi.ErrnoLimit},
	} {
		if e := r.Put([]byte(c.key), v(c.n)); e != c.want {
			t.Errorf("%s: %v, want %v", c.what, e, c.want)
		}
	}
	if e := r.Delete([]byte("s2")); e != 0 {
		t.Fatalf("a delete at the bound: %v", e)
	}
	b, _ := ts.Commit(5, r, nil)
	b.Acked(10, nil)
	if e := ts.Begin().Put([]byte("n7"), v(10)); e != abi.ErrnoLimit {
		t.Fatalf("a put with the overlay at the bound: %v", e)
	}
	if err := ts.Flush(6); err != nil {
		t.Fatal(err)
	}
	// The store: s0, s1, s3, n0 (50 bytes), n1-n5: 852 bytes.
	if got := ts.ps.store.Bytes(); got != 852 || ts.overlayBytes != 0 {
		t.Fatalf("after the flush: %d bytes stored, %d in the overlay; want 852, 0", got, ts.overlayBytes)
	}
	if e := ts.Begin().Put([]byte("n7"), v(98)); e != 0 {
		t.Fatalf("a put that fits after the delete was applied: %v", e)
	}
}

// A record's own writes are found by key in constant time, not by a search
// of its writes: with 4,000 keys of 1 KiB differing only in their last
// bytes written, 1,000 reads of them took 0.5 ms (a search, comparing
// ~2 GB of keys for them: 513 ms; 15 s under -race).
func TestStateWriteLookupIndexed(t *testing.T) {
	ts := newTestPartition(t)
	key := func(i int) []byte { return fmt.Appendf(bytes.Repeat([]byte{'k'}, abi.MaxStateKeyBytes-8), "%08d", i) }
	r := ts.Begin()
	for i := 0; i < 4000; i++ {
		if e := r.Put(key(i), []byte("v")); e != 0 {
			t.Fatal(e)
		}
	}
	keys := make([][]byte, 1000)
	for i := range keys {
		keys[i] = key(4 * i)
	}
	start := time.Now()
	for _, k := range keys {
		if _, e := r.Get(k); e != 0 {
			t.Fatal(e)
		}
		if _, ok := r.Written(k); !ok {
			t.Fatalf("%.10q… not written", k)
		}
	}
	took := time.Since(start)
	t.Logf("1,000 reads of a record's own writes among 4,000: %s", took)
	if took > 50*time.Millisecond {
		t.Fatalf("1,000 reads of a record's own writes took %s", took)
	}
}

// The empty key is a state key like any other: a record's write of it
// becomes a changelog record with an empty, not null, key (a compacted
// topic on Kafka refuses a null key), the flush applies it with the
// partition's other writes, and a scan lists it first. Before, the store
// refused it at the flush and the overlay dropped the flush's other
// writes with it: "a" read nothing afterwards.
func TestStateEmptyKeyFlushed(t *testing.T) {
	ts := newTestPartition(t)
	rs := ts.Begin()
	for _, k := range []string{"a", ""} {
		if e := rs.Put([]byte(k), []byte("v"+k)); e != 0 {
			t.Fatalf("put %q: %v", k, e)
		}
	}
	b, outs := ts.Commit(1, rs, nil)
	for _, o := range outs {
		if o.Key == nil {
			t.Fatalf("a changelog output with a null key: %+v", o)
		}
	}
	b.Acked(10, nil)
	b.Acked(11, nil)
	if err := ts.Flush(2); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if n, _ := ts.ps.store.Next(); n != 12 {
		t.Fatalf("the store reflects the changelog up to %d, want 12", n)
	}
	r2 := ts.Begin()
	for _, k := range []string{"a", ""} {
		if v, e := r2.Get([]byte(k)); e != 0 || string(v) != "v"+k {
			t.Fatalf("get %q after the flush: %q %v", k, v, e)
		}
	}
	if got := scanKeys(t, r2, "", ""); got != "=v,a=va" {
		t.Fatalf("scan: %s", got)
	}
}

// A flush the store refuses drops nothing: the writes stay readable in the
// overlay, the store's changelog offset stays where it was (a restart
// reads them from the changelog), the refusal is reported, and the next
// flush applies them. Before, the overlay dropped them at the first
// flush whatever the store answered.
func TestStateFlushRefusedKeepsWrites(t *testing.T) {
	ts := newTestPartition(t)
	path := ts.ps.store.Path()
	write := func(off, clOff int64, key, val string) {
		rs := ts.Begin()
		rs.Put([]byte(key), []byte(val))
		b, _ := ts.Commit(off, rs, nil)
		b.Acked(clOff, nil)
	}
	write(1, 100, "a", "1")
	write(2, 101, "b", "1")
	ts.ps.store.Close() // every write of the store now fails
	if err := ts.Flush(3); err == nil {
		t.Fatal("a flush into a closed store reported no error")
	}
	write(3, 102, "a", "2") // a record that succeeds meanwhile
	rs := ts.Begin()
	for k, want := range map[string]string{"a": "2", "b": "1"} {
		if v, e := rs.Get([]byte(k)); e != 0 || string(v) != want {
			t.Fatalf("%s after the refused flush: %q %v, want %q", k, v, e, want)
		}
	}
	st, err := statestore.Open(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if n, _ := st.Next(); n != 0 {
		t.Fatalf("the refused flush recorded changelog offset %d", n)
	}
	ts.ps.store = st // the store works again
	if err := ts.Flush(4); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"a": "2", "b": "1"} {
		if v, ok, _ := st.Get(nil, []byte(k)); !ok || string(v) != want {
			t.Fatalf("%s in the store: %q %v, want %q", k, v, ok, want)
		}
	}
	if n, _ := st.Next(); n != 103 || len(ts.overlay) != 0 || len(ts.batches) != 0 {
		t.Fatalf("next %d (want 103), overlay %d, batches %d", n, len(ts.overlay), len(ts.batches))
	}
}

// A commit reaches a partition's state through the stores (Stores.Flush,
// the pipeline's subscription to its commits), and only when the view its
// marks came from is the partition's newest: after an abort the new task's
// view replaces the old one, whose writes (of records that run again) are
// never applied, and a commit of the old view's marks applies nothing;
// once the partition is detached a commit reaches nothing.
func TestStateFlushReachesTheCurrentView(t *testing.T) {
	st, err := statestore.Open(filepath.Join(t.TempDir(), "s.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := NewStores(Config{Pipeline: "p", Limits: Limits{Changelog: "p.changelog", MaxValueBytes: 100}}, nil, nil, nil, slog.New(slog.DiscardHandler))
	s.stores[0], s.parts = &partStore{store: st}, 1
	write := func(v *Partition, off int64, key, val string, changelogOff int64) {
		rs := v.Begin()
		rs.Put([]byte(key), []byte(val))
		b, _ := v.Commit(off, rs, nil)
		b.Acked(changelogOff, nil)
	}
	old := s.View(0)
	write(old, 1, "k", "aborted", 10) // its transaction aborts
	cur := s.View(0)                  // the task that replaces it
	write(cur, 1, "k", "committed", 11)
	s.Flush(old, 2) // marks of the replaced view: nothing applied
	if v, ok, _ := st.Get(nil, []byte("k")); ok {
		t.Fatalf("k = %q in the store after a commit of the replaced view", v)
	}
	s.Flush(cur, 2)
	if v, ok, _ := st.Get(nil, []byte("k")); !ok || string(v) != "committed" {
		t.Fatalf("k = %q %v in the store after the commit, want the current view's write", v, ok)
	}
	if len(old.batches) != 1 {
		t.Fatalf("the replaced view's batches were flushed (%d left)", len(old.batches))
	}
	closeLater := s.Detach([]int32{0}) // revoked: a later commit reaches nothing
	write(cur, 2, "k", "late", 12)
	s.Flush(cur, 3)
	if v, _, _ := st.Get(nil, []byte("k")); string(v) != "committed" || len(cur.batches) != 1 {
		t.Fatalf("a flush after the detach applied %q (%d batches left)", v, len(cur.batches))
	}
	closeLater()
	if _, _, err := st.Get(nil, []byte("k")); err == nil {
		t.Fatal("the detached store is still open after closeLater")
	}
}

// Local (`wasmstream test`): a succeeded record's writes come back as its
// changelog records and are read by the next record; the bounds are the
// pipeline's; Close removes the store's directory.
func TestLocalCarriesState(t *testing.T) {
	l, err := OpenLocal(Limits{MaxValueBytes: 10, Changelog: "p.changelog"})
	if err != nil {
		t.Fatal(err)
	}
	st := l.Begin()
	if e := st.Put([]byte("k"), []byte("1")); e != 0 {
		t.Fatal(e)
	}
	if e := st.Put([]byte("big"), make([]byte, 11)); e != abi.ErrnoTooLarge {
		t.Fatalf("a value over state.max_value_bytes: %v", e)
	}
	outs := l.Commit(st, 0)
	if len(outs) != 1 || outs[0].Topic != "p.changelog" || string(outs[0].Key) != "k" || string(outs[0].Value) != "1" {
		t.Fatalf("changelog records %+v", outs)
	}
	if v, e := l.Begin().Get([]byte("k")); e != 0 || string(v) != "1" {
		t.Fatalf("the next record reads %q %v", v, e)
	}
	dir := l.dir
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s still there after Close: %v", dir, err)
	}
}

// A record of a run (BeginRun) reads the writes of the records before it
// exactly as it would after they were committed: gets, deletes, scans, the
// asynchronous read path and state.max_bytes alike; a record before it
// that accepts refuses (it failed) is not read, and after EndRun the
// record reads the partition's view alone.
func TestStateAfterReadsAsCommitted(t *testing.T) {
	transcript := func(inRun bool) string {
		st, err := statestore.Open(filepath.Join(t.TempDir(), "s.db"), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ts := NewPartition(st, 0, 1, Limits{MaxValueBytes: 100, MaxBytes: 40, Changelog: "p.changelog"})
		st.Apply([]statestore.Write{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("d"), Value: []byte("dd")}}, 10)
		r0 := ts.Begin()
		r0.Put([]byte("b"), []byte("22"))
		ts.Commit(1, r0, nil)
		begin := ts.Begin
		if inRun {
			// Record 1 of the run fails: its writes are never the
			// partition's.
			begin = ts.BeginRun(func(k int) bool { return k != 1 }).Begin
		}
		r1 := begin()
		r1.Put([]byte("a"), []byte("333"))
		r1.Put([]byte("c"), []byte("4"))
		r1.Delete([]byte("b"))
		failed := begin() // fails: its writes are never the partition's
		failed.Put([]byte("e"), []byte("lost"))
		if !inRun {
			ts.Commit(2, r1, nil)
		}
		r2 := begin()
		var b strings.Builder
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			v, e := r2.Get([]byte(k))
			fmt.Fprintf(&b, "%s=%s/%d ", k, v, int(e))
		}
		rd := r2.Reader()
		for _, k := range []string{"a", "b", "c"} {
			v, ok, e := rd.Get([]byte(k))
			fmt.Fprintf(&b, "reader %s=%s/%v/%d ", k, v, ok, int(e))
		}
		fmt.Fprintf(&b, "scan %s ", scanKeys(t, r2, "", ""))
		// The bound: the store (a=1, d=dd: 4 bytes), the overlay as it is
		// with r1 committed (b deleted: 1, a=333: 4, c=4: 2), and r2's own.
		for i, v := range []string{"xxxxxxxxxx", "yyyyyyyyyy", "zzzzzzzzzz", "w"} {
			fmt.Fprintf(&b, "put%d %d ", i, int(r2.Put([]byte(fmt.Sprintf("n%d", i)), []byte(v))))
		}
		fmt.Fprintf(&b, "grow a %d ", int(r2.Put([]byte("a"), []byte("55555"))))
		fmt.Fprintf(&b, "shrink a %d ", int(r2.Put([]byte("a"), []byte("66"))))
		if inRun {
			ts.Commit(2, r1, nil)
			r2.EndRun()
		}
		fmt.Fprintf(&b, "scan %s", scanKeys(t, r2, "", ""))
		return b.String()
	}
	alone, run := transcript(false), transcript(true)
	if alone != run {
		t.Fatalf("in a run the record read\n%s\nrun alone after the record before it\n%s", run, alone)
	}
	nf := int(abi.ErrnoNotFound)
	if !strings.Contains(alone, fmt.Sprintf("a=333/0 b=/%d c=4/0 d=dd/0 e=/%d", nf, nf)) ||
		!strings.Contains(alone, fmt.Sprintf("put2 %d put3 0 grow a %d shrink a 0", int(abi.ErrnoLimit), int(abi.ErrnoLimit))) {
		t.Fatalf("transcript: %s", alone)
	}
	t.Log(alone)
}

// The asynchronous read path of a record of a run reads the writes of the
// records before it while they are not committed, and the overlay once
// they are: a record decided after them that wrote the same key (a record
// that was waiting) is then what the read sees, as run alone.
func TestStateRunReaderFollowsCommits(t *testing.T) {
	ts := newTestPartition(t)
	run := ts.BeginRun(func(int) bool { return true })
	r1 := run.Begin()
	r1.Put([]byte("a"), []byte("run"))
	r1.Put([]byte("b"), []byte("run"))
	r2 := run.Begin()
	r2.Put([]byte("c"), []byte("own"))
	rd := r2.Reader()
	get := func(k string) string {
		v, ok, e := rd.Get([]byte(k))
		return fmt.Sprintf("%s=%s/%v/%d", k, v, ok, int(e))
	}
	scan := func() string {
		var b strings.Builder
		rd.Scan(nil, nil, func(k, v []byte) bool { fmt.Fprintf(&b, "%s=%s ", k, v); return true })
		return b.String()
	}
	if got, want := get("a")+" "+scan(), "a=run/true/0 a=run b=run c=own "; got != want {
		t.Fatalf("before the run's records are committed: %s, want %s", got, want)
	}
	r1.EndRun() // the call returned
	r2.EndRun()
	ts.Commit(1, r1, nil)
	waited := ts.Begin() // a record that waited, decided after the run
	waited.Put([]byte("a"), []byte("later"))
	ts.Commit(0, waited, nil)
	if got, want := get("a")+" "+get("b")+" "+scan(), "a=later/true/0 b=run/true/0 a=later b=run c=own "; got != want {
		t.Fatalf("after: %s, want %s", got, want)
	}
}

// A commit's flush writes each key once, with the last value the
// committed records gave it (a delete included), and a void batch's
// writes not at all; the store's byte count is what it holds. The store
// alone cannot tell a flush that wrote each key once from one that wrote
// every write in turn (the last wins either way), so the writes the flush
// hands the store (lastWrites, over the batches it takes) are read too.
func TestStateFlushLastWriteOfEachKey(t *testing.T) {
	ts := newTestPartition(t)
	commit := func(off int64, void bool, kv ...string) { commitWrites(ts, off, void, kv...) }
	commit(0, false, "a", "1", "b", "1", "c", "1")
	commit(1, false, "a", "2", "b", "-")
	commit(2, true, "c", "lost", "d", "lost")
	commit(3, false, "a", "333", "e", "5")
	var writes []string
	for _, w := range ts.lastWrites(slices.Clone(ts.batches)) { // every batch is below 4: Flush(4)'s
		if w.Value == nil {
			writes = append(writes, string(w.Key)+" deleted")
		} else {
			writes = append(writes, string(w.Key)+"="+string(w.Value))
		}
	}
	if s, want := strings.Join(writes, ","), "a=333,b deleted,c=1,e=5"; s != want {
		t.Fatalf("the flush's writes: %s, want each key once with its last write: %s", s, want)
	}
	if err := ts.Flush(4); err != nil {
		t.Fatal(err)
	}
	var got []string
	ts.ps.store.Scan(nil, nil, func(k, v []byte) bool { got = append(got, string(k)+"="+string(v)); return true })
	if s := strings.Join(got, ","); s != "a=333,c=1,e=5" {
		t.Fatalf("the store after the flush: %s, want a=333,c=1,e=5", s)
	}
	if n := ts.ps.store.Bytes(); n != 4+2+2 {
		t.Fatalf("the store counts %d bytes, want 8", n)
	}
}

// A run is reused by the partition's next once each of its records ended
// its part (EndRun), and the next run reads nothing of it: a write folded
// in it whose record was then never committed (its task aborted) is not
// read. A run a Reader holds is never reused: the reader keeps reading
// the writes before its record while they are not committed.
func TestStateRunReuse(t *testing.T) {
	ts := newTestPartition(t)
	all := func(int) bool { return true }
	a := ts.BeginRun(all)
	r1 := a.Begin()
	r1.Put([]byte("k"), []byte("run a"))
	r2 := a.Begin()
	if v, e := r2.Get([]byte("k")); e != 0 || string(v) != "run a" {
		t.Fatalf("in its run: %q/%d, want the write before it", v, e)
	}
	r1.EndRun()
	r2.EndRun() // neither is committed
	b := ts.BeginRun(all)
	if b != a {
		t.Fatal("a run whose records all ended was not reused")
	}
	r3 := b.Begin()
	if v, e := r3.Get([]byte("k")); e != abi.ErrnoNotFound {
		t.Fatalf("the next run read %q/%d of a write never committed", v, e)
	}
	r3.Put([]byte("k"), []byte("run b"))
	r4 := b.Begin()
	rd := r4.Reader()
	r3.EndRun()
	r4.EndRun()
	if c := ts.BeginRun(all); c == b {
		t.Fatal("a run a reader holds was reused")
	}
	if v, ok, e := rd.Get([]byte("k")); e != 0 || !ok || string(v) != "run b" {
		t.Fatalf("the reader: %q/%v/%d, want the write before its record", v, ok, e)
	}
}

// A key whose writes a flush applied is read from the view's clean cache
// (cleanCache), not the store: what the store holds, a delete removing
// the key, a void batch's write never kept, and the cache within
// cleanMaxBytes however many keys the flushes write. The store is closed
// before the reads: a read that went to it would answer ErrnoNoState.
func TestStateCleanCache(t *testing.T) {
	ts := newTestPartition(t)
	commit := func(off int64, void bool, kv ...string) { commitWrites(ts, off, void, kv...) }
	commit(0, false, "a", "1", "b", "1")
	commit(1, false, "a", "2", "b", "-", "c", "3")
	commit(2, true, "d", "lost")
	if err := ts.Flush(3); err != nil {
		t.Fatal(err)
	}
	if len(ts.overlay) != 0 {
		t.Fatalf("the overlay holds %d keys after the flush, want none", len(ts.overlay))
	}
	if got := fmt.Sprintf("%d %s %s", len(ts.stored.clean.m), ts.stored.clean.m["a"], ts.stored.clean.m["c"]); got != "2 2 3" {
		t.Fatalf("the clean cache: %s, want a=2 and c=3 alone (b deleted, d void)", got)
	}
	ts.ps.store.Close()
	rs := ts.Begin()
	for k, want := range map[string]string{"a": "2", "c": "3"} {
		if v, e := rs.Get([]byte(k)); e != 0 || string(v) != want {
			t.Fatalf("get %s: %q %v, want %q from the clean cache", k, v, e, want)
		}
	}
	if _, e := rs.Get([]byte("b")); e != abi.ErrnoNoState {
		t.Fatalf("get of a deleted key: %v, want the store's answer (closed: ErrnoNoState)", e)
	}

	// Bounded: keys of 1 KB values, four times the cache's bytes.
	ts = newTestPartition(t)
	ts.maxValue = 2 << 10
	val := strings.Repeat("v", 1000)
	var off int64
	for i := range 4 * cleanMaxBytes / 1000 {
		commit(off, false, fmt.Sprintf("k%05d", i), val)
		off++
		if off%100 == 0 {
			if err := ts.Flush(off); err != nil {
				t.Fatal(err)
			}
		}
	}
	var n int64
	for k, v := range ts.stored.clean.m {
		n += int64(len(k) + len(v) + cleanEntryBytes)
		if string(v) != val {
			t.Fatalf("the clean cache holds %s=%q", k, v)
		}
	}
	if n != ts.stored.clean.bytes || n > cleanMaxBytes || n < cleanMaxBytes/2 {
		t.Fatalf("the clean cache holds %d bytes (counted %d), want at most %d and more than half of it", n, ts.stored.clean.bytes, cleanMaxBytes)
	}
}

// A commit's flush through the stores applies at most every flushEvery
// (or once the overlay holds flushOverlayBytes): a commit soon after the
// last leaves its writes in the overlay, still read; when no commit comes,
// the deferred flush's timer applies them, each key once. A view that stops being current applies its
// deferred committed writes first, never its uncommitted ones: the view
// that replaces it after an abort (Stores.View) and a detach (Stores.
// Detach, before the store closes) find them in the store.
func TestStateFlushDeferred(t *testing.T) {
	st, err := statestore.Open(filepath.Join(t.TempDir(), "s.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := NewStores(Config{Pipeline: "p", Limits: Limits{Changelog: "p.changelog", MaxValueBytes: 100}}, nil, nil, nil, slog.New(slog.DiscardHandler))
	s.stores[0], s.parts = &partStore{store: st}, 1
	write := func(v *Partition, off int64, key, val string) {
		rs := v.Begin()
		rs.Put([]byte(key), []byte(val))
		b, _ := v.Commit(off, rs, nil)
		b.Acked(off, nil)
	}
	stored := func(key string) string {
		v, ok, err := st.Get(nil, []byte(key))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return "-"
		}
		return string(v)
	}
	v := s.View(0)
	write(v, 0, "a", "1")
	s.Flush(v, 1) // the view's first: applied at once
	write(v, 1, "a", "2")
	write(v, 2, "b", "1")
	s.Flush(v, 3) // within flushEvery of the last: deferred
	if got := stored("a") + stored("b"); got != "1-" {
		t.Fatalf("the store after a deferred flush: a, b = %s, want 1 and none", got)
	}
	if r, e := v.Begin().Get([]byte("a")); e != 0 || string(r) != "2" {
		t.Fatalf("a reads %q %v after a deferred flush, want the overlay's 2", r, e)
	}
	// No commit comes (the partition is idle): the deferred flush's timer
	// applies it once flushEvery has passed.
	for deadline := time.Now().Add(10 * flushEvery); stored("a")+stored("b") != "21"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the store %s after a deferred flush, want a, b = 2, 1 within %s", stored("a")+stored("b"), 10*flushEvery)
		}
	}
	v.mu.Lock()
	left := len(v.batches)
	v.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d batches left after the timer's flush", left)
	}

	write(v, 3, "a", "3") // committed (below 4), its flush deferred
	s.Flush(v, 4)
	write(v, 4, "a", "aborted") // its transaction aborts
	next := s.View(0)           // the task that replaces it
	if got := stored("a"); got != "3" {
		t.Fatalf("a = %s in the store once the view was replaced, want its committed 3", got)
	}
	if r, e := next.Begin().Get([]byte("a")); e != 0 || string(r) != "3" {
		t.Fatalf("the new view reads a = %q %v, want 3", r, e)
	}

	write(next, 4, "b", "2")
	s.Flush(next, 5) // the new view's first: at once
	write(next, 5, "b", "3")
	s.Flush(next, 6) // deferred
	closeLater := s.Detach([]int32{0})
	if got := stored("b"); got != "3" {
		t.Fatalf("b = %s in the store once detached, want its committed 3", got)
	}
	closeLater()
}

// commitWrites commits, as record off, the writes kv gives in pairs (key,
// value; a value "-" deletes the key), its batch then acknowledged, or
// void: its outputs failed.
func commitWrites(ts *Partition, off int64, void bool, kv ...string) {
	rs := ts.Begin()
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "-" {
			rs.Delete([]byte(kv[i]))
		} else {
			rs.Put([]byte(kv[i]), []byte(kv[i+1]))
		}
	}
	b, _ := ts.Commit(off, rs, nil)
	if void {
		b.Acked(off, testErr{})
	} else {
		b.Acked(off, nil)
	}
}
