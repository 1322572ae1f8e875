package state

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/wasmstream/wasmstream/abi"
)

// A flush gives the Records of the batches it applied to the next Begin
// (spareRecords), blank: a record that begins on one reads nothing of the
// record it was, nor its batch's produce room (ProduceRoom) the sink filled.
func TestFlushedRecordsAreReusedBlank(t *testing.T) {
	ts := newTestPartition(t)
	flushed := map[*Record]bool{}
	for i := range 100 {
		rs := ts.Begin()
		rs.Put([]byte(fmt.Sprintf("k%d", i)), []byte("v"))
		rs.StreamTime()
		b, outs := ts.CommitAt(int64(i), 5, rs, nil)
		if b == nil || len(outs) != 1 {
			t.Fatalf("record %d: batch %v, %d outputs, want a batch and its changelog output", i, b, len(outs))
		}
		if pr := b.ProduceRoom(); pr != &rs.batch.produce {
			t.Fatal("the produce room is not the batch's own")
		} else {
			pr.Topic, pr.Value = "p.changelog", []byte("v") // as the sink fills it
		}
		b.Acked(int64(i), nil)
		flushed[rs] = true
	}
	if err := ts.Flush(100); err != nil {
		t.Fatal(err)
	}
	reused := 0
	for range 100 {
		rs := ts.Begin()
		if !flushed[rs] {
			continue
		}
		reused++
		if rs.ts != ts || rs.writes != nil || rs.index != nil || rs.bytes != 0 || rs.run != nil || rs.k != 0 ||
			rs.batch.writes != nil || rs.batch.offset != 0 || rs.batch.produce.Topic != "" || rs.batch.produce.Value != nil || rs.outs[0].Key != nil || rs.outs[1].Topic != "" ||
			rs.committed.Load() || rs.readTime || rs.over || rs.pinned || rs.lent || rs.overUsed != 0 {
			t.Fatalf("a reused Record keeps its last record's fields: %+v", rs)
		}
		if v, e := rs.Get([]byte("k7")); e != 0 || string(v) != "v" {
			t.Fatalf("a reused Record reads k7 = %q (%v), want the store's v", v, e)
		}
		if len(rs.Writes()) != 0 {
			t.Fatalf("a reused Record begins with writes %v", rs.Writes())
		}
	}
	if reused == 0 {
		t.Fatal("no Record of the 100 flushed was reused by the next 100 Begins")
	}
	t.Logf("%d of 100 Records reused", reused)
}

// A Reader taken in a run reads the records before its own after their
// attempts (reader.inRun asks whether they are committed): a flush does
// not give those records to another Begin.
func TestReaderKeepsItsRunsRecords(t *testing.T) {
	ts := newTestPartition(t)
	run := ts.BeginRun(func(int) bool { return true })
	r1 := run.Begin()
	r1.Put([]byte("a"), []byte("run"))
	r2 := run.Begin()
	rd := r2.Reader()
	r1.EndRun()
	r2.EndRun()
	b, _ := ts.Commit(0, r1, nil)
	b.Acked(0, nil)
	if err := ts.Flush(1); err != nil {
		t.Fatal(err)
	}
	for i := range 100 { // any spare goes to these
		rs := ts.Begin()
		if rs == r1 {
			t.Fatal("a record a Reader's run holds was given to Begin again")
		}
		rs.Put([]byte("a"), []byte(fmt.Sprintf("later-%d", i)))
	}
	if r1.ts != ts || !r1.committed.Load() {
		t.Fatalf("the Reader's prior record was reset: %+v", r1)
	}
	if v, ok, e := rd.Get([]byte("a")); !ok || e != 0 || string(v) != "run" {
		t.Fatalf("the reader reads a = %q (%v, %v), want run", v, ok, e)
	}
}

// The room a Record lends the host for its record's outputs (OutputRoom)
// holds them until they are acknowledged: a commit that is not given them
// (Local's callers keep the host's outputs apart from the changelog
// outputs) puts its changelog outputs elsewhere, and one that is given
// them adds after them.
func TestOutputRoomIsNotOverwritten(t *testing.T) {
	ts := newTestPartition(t)
	for _, given := range []bool{false, true} {
		rs := ts.Begin()
		room := rs.OutputRoom(1)
		if room == nil || cap(room) != 2 {
			t.Fatalf("OutputRoom(1) = cap %d, want the Record's room for two", cap(room))
		}
		if again := rs.OutputRoom(1); again != nil {
			t.Fatal("the room was lent twice")
		}
		room = append(room, abi.Output{Topic: "out", Value: []byte("the record's")})
		rs.Put([]byte("k"), []byte("v"))
		var in []abi.Output
		if given {
			in = room
		}
		_, outs := ts.Commit(1, rs, in)
		if string(room[0].Value) != "the record's" || room[0].Topic != "out" {
			t.Fatalf("given %v: the record's output became %+v", given, room[0])
		}
		want := 1 + len(in)
		if len(outs) != want || outs[len(outs)-1].Topic != "p.changelog" {
			t.Fatalf("given %v: %d outputs %+v, want %d ending with the changelog output", given, len(outs), outs, want)
		}
		if given && &outs[0] != &room[0] {
			t.Fatal("given the room's outputs, the commit did not add after them in place")
		}
	}
	if rs := ts.Begin(); rs.OutputRoom(2) != nil {
		t.Fatal("OutputRoom(2) lent the room for two, which leaves no place for a write")
	}
}

// A Record is 544 bytes, in Go's 576-byte size class: what its first
// commit interval allocates (the Records used again allocate nothing).
// One field more that passes 576 shows here.
func TestRecordSize(t *testing.T) {
	if got := unsafe.Sizeof(Record{}); got != 544 {
		t.Fatalf("a state.Record is %d bytes, want 544 (the 576-byte size class; say why it grew)", got)
	}
}
