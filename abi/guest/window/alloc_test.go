package window_test

import (
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/window"
)

// countHost holds one window's count and answers every Get with it, as
// the wasm host's Get does: bytes the caller may keep.
type countHost struct {
	st  int64
	agg [8]byte
}

func (h *countHost) StreamTime() (int64, error)                { return h.st, nil }
func (h *countHost) SetTimer(key []byte, at int64) error       { return nil }
func (h *countHost) DeleteTimer(key []byte, at int64) error    { return nil }
func (h *countHost) Put(key, sub, value []byte) error          { copy(h.agg[:], value); return nil }
func (h *countHost) Delete(key, sub []byte) error              { return nil }
func (h *countHost) Get(key, sub []byte) ([]byte, bool, error) { return h.agg[:], true, nil }
func (h *countHost) Scan(key, prefix []byte, fn func(sub, value []byte) bool) error {
	return nil
}

// A record's Add allocates nothing of its own in the guest, where an
// allocation costs the wasm build of the Go runtime more than the rest of
// the call: the window's sub key is kept from one record to the next, the
// count is written into the bytes Get returned, the windows are a loop
// (no closure) and a success boxes no error. It was 3 allocations a
// record (and the host's copy of the value, here left out).
func TestAddAllocatesNothing(t *testing.T) {
	w, err := window.Tumbling(time.Minute, window.Options{Name: "w", Grace: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := &countHost{st: 1000}
	r := &guest.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(2000)}
	var out outputs
	n := testing.AllocsPerRun(1000, func() {
		if err := w.Add(h, r, &out); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("Add allocates %.1f times a record; want none", n)
	}
	if c, _ := window.DecodeCount(h.agg[:]); c != 1001 {
		t.Fatalf("the count is %d after 1,001 records", c)
	}
}
