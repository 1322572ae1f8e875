package state

import (
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

// countLoad is the state path of the count example as a partition task
// drives it, without a guest or a broker: each record reads its key and
// writes it back (a get and a put: the key's partition checked, the
// record's writes, the run's, the overlay, the store), is committed with
// the output it emits (the overlay, its changelog output beside that
// output) and acknowledged, and every commitEvery
// records the store takes the committed writes (a commit's flush).
type countLoad struct {
	ts      *Partition
	keys    [][]byte
	recs    []*Record
	run     int // records a run (1: each record alone)
	accepts func(int) bool
	off     int64
	out     [1]abi.Output // the record's own output, as the count example emits one
}

const commitEvery = 256

func newCountLoad(t *testing.T, run, keys int) *countLoad {
	st, err := statestore.Open(filepath.Join(t.TempDir(), "s.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const parts = 4
	l := &countLoad{run: run, accepts: func(int) bool { return true },
		// state.max_bytes on (its default is 1 GiB): the bound is counted.
		ts: NewPartition(st, 0, parts, Limits{MaxValueBytes: 64 << 10, MaxBytes: 1 << 30, Changelog: "p.changelog"})}
	for i := 0; len(l.keys) < keys; i++ {
		if k := fmt.Appendf(nil, "user-%05d", i); KeyPartition(k, parts) == 0 {
			l.keys = append(l.keys, k)
		}
	}
	return l
}

// step runs one run of records (or one record alone), and flushes after
// every commitEvery.
func (l *countLoad) step(t *testing.T) {
	begin := l.ts.Begin
	if l.run > 1 {
		begin = l.ts.BeginRun(l.accepts).Begin
	}
	l.recs = l.recs[:0]
	for range l.run {
		rs := begin()
		key := l.keys[int(l.off+int64(len(l.recs)))%len(l.keys)]
		v, e := rs.Get(key)
		if e != 0 && e != abi.ErrnoNotFound {
			t.Fatal(e)
		}
		if e := rs.Put(key, append([]byte("12345")[:0:5], v[:min(len(v), 5)]...)); e != 0 {
			t.Fatal(e)
		}
		l.recs = append(l.recs, rs)
	}
	for _, rs := range l.recs {
		rs.EndRun()
	}
	for _, rs := range l.recs {
		// The record's output as the host hands it over: a slice with no
		// room after it (host.runOutputs.carve).
		b, outs := l.ts.Commit(l.off, rs, l.out[:1:1])
		if len(outs) != 2 {
			t.Fatalf("%d outputs, want the record's and one changelog output", len(outs))
		}
		b.Acked(l.off, nil)
		l.off++
		if l.off%commitEvery == 0 {
			if err := l.ts.Flush(l.off); err != nil {
				t.Fatal(err)
			}
		}
	}
	clear(l.recs)
}

// The state path of a record allocates a fixed few times, whatever the
// length of its run: this fails when it grows, as TestJobSize does for the
// job. A run of 64 records (batch_records' default) and of 1,024 (its
// bound) cost a record the same; before the run's writes were folded once
// (Run), a record of a run of 64 cost 48 allocations and ~8 KB more, and
// of 1,024 several hundred. What a record allocates now: its put's key
// and value (its Record, with its batch, first write and the room for its
// output and changelog output inside, is one a flush gave back:
// spareRecords; before, 384 bytes a record more); its get, when it misses the overlay
// and the clean cache, bbolt's read transaction (~7); and its share of a
// commit's flush (bbolt's writes, once per key per commit: Bucket.Put's
// copy of the key, its cursor and the cursor's stack). Before the clean
// cache, a key read again after a commit's flush read the store: the
// commit per transaction of exactly_once made that every record's case
// (run_64_keys_1000: 15.3 allocations and 1,200 bytes, then 7.3 and 720);
// before the flush looked its buckets up and reused a cursor once a
// transaction, each write allocated two to four times more (5.4 and 650
// since); the Record was 416 bytes before its read buffer went and its
// refusal's message was made when asked (384: 618 and 460 since). Its output and changelog
// output had a slice of their own (one allocation more, as many bytes).
// The race detector's build counts the same allocations and a few bytes
// more.
func TestStateRecordAllocs(t *testing.T) {
	for _, c := range []struct {
		name      string
		run, keys int
		allocs    float64 // per record, at most
		bytes     int64   // per record, at most
	}{
		// Bytes with the record's output beside its write (605 and 524
		// both with its slice of their own and with the Record's room).
		{"alone", 1, 64, 2.1, 120},       // was 11.1 and 782, then 5.7, 4.7, 605, 2.8 and 460
		{"run_64", 64, 64, 2.1, 120},     // was 65.8 and 9,719, then 5.7, 4.7, 605, 2.8 and 460
		{"run_1024", 1024, 64, 2.1, 120}, // was 107.2 and 37,442, then 4.4, 3.4, 525, 2.8 and 460
		// Every get misses the overlay (the clean cache holds the key), and
		// a flush writes every key.
		{"run_64_keys_1000", 64, 1000, 4.8, 290}, // was 74.1 and 10,284, then 16.3, 15.3, 1,200, 5.4 and 617
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newCountLoad(t, c.run, c.keys)
			steps := max(4096/c.run, 8)
			for range steps { // warm: the store holds the keys, the run is reused
				l.step(t)
			}
			// The least of three counts: another goroutine of the test
			// binary allocating meanwhile only adds to one.
			allocs, bytes := math.Inf(1), math.Inf(1)
			for range 3 {
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				for range steps {
					l.step(t)
				}
				runtime.ReadMemStats(&m1)
				recs := float64(steps * c.run)
				allocs = min(allocs, float64(m1.Mallocs-m0.Mallocs)/recs)
				bytes = min(bytes, float64(m1.TotalAlloc-m0.TotalAlloc)/recs)
			}
			t.Logf("%.1f allocations, %.0f bytes a record", allocs, bytes)
			maxAllocs, maxBytes := c.allocs, float64(c.bytes)
			if raceEnabled {
				maxAllocs, maxBytes = maxAllocs+0.3, maxBytes+150 // a Record every fourth record (race_on_test.go)
			}
			if allocs > maxAllocs || bytes > maxBytes {
				t.Fatalf("the state path of a record allocates %.1f times, %.0f bytes; at most %.1f and %.0f (TestStateRecordAllocs)", allocs, bytes, maxAllocs, maxBytes)
			}
		})
	}
}
