package partition

import (
	"testing"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A queue's element is one word, as before work that is not a record: a
// second word cost every record's place and copy its share of queues twice
// as large (BenchmarkSchedulingOverhead: 17 B a record more, and a few
// percent of its CPU). Work is found from its mark, and a record is never
// taken for work.
func TestUnitOneWord(t *testing.T) {
	t.Parallel()
	if s := unsafe.Sizeof(unit{}); s != unsafe.Sizeof(uintptr(0)) {
		t.Fatalf("a queue's element is %d bytes, want one word", s)
	}
	wk := &Work{Key: []byte("k")}
	u := wk.markUnit()
	if u.w() != wk || !u.isWork() || u.none() || string(u.key()) != "k" {
		t.Fatalf("a work's mark leads to %p (isWork %v, key %q), want %p", u.w(), u.isWork(), u.key(), wk)
	}
	r := unit{r: &kgo.Record{Offset: 0, Key: []byte("k")}}
	if r.w() != nil || r.isWork() || r.none() {
		t.Fatal("a record is taken for work")
	}
	if !u.before(r) || r.before(u) {
		t.Fatal("work is not taken before a lane's record")
	}
	if (unit{}).w() != nil || !(unit{}).none() {
		t.Fatal("no unit is taken for work")
	}
}
