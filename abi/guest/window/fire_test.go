package window_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi/guest"
	"github.com/wasmstream/wasmstream/abi/guest/window"
)

// memHost is a Host over maps that counts its scans.
type memHost struct {
	st    int64
	state map[string][]byte // key + "\x00" + sub
	scans int
}

func (h *memHost) StreamTime() (int64, error)             { return h.st, nil }
func (h *memHost) SetTimer(key []byte, at int64) error    { return nil }
func (h *memHost) DeleteTimer(key []byte, at int64) error { return nil }
func (h *memHost) Put(key, sub, value []byte) error {
	h.state[string(key)+"\x00"+string(sub)] = slices.Clone(value)
	return nil
}
func (h *memHost) Get(key, sub []byte) ([]byte, bool, error) {
	v, ok := h.state[string(key)+"\x00"+string(sub)]
	return slices.Clone(v), ok, nil
}
func (h *memHost) Delete(key, sub []byte) error {
	delete(h.state, string(key)+"\x00"+string(sub))
	return nil
}
func (h *memHost) Scan(key, prefix []byte, fn func(sub, value []byte) bool) error {
	h.scans++
	var subs []string
	for k := range h.state {
		if s, ok := strings.CutPrefix(k, string(key)+"\x00"); ok && strings.HasPrefix(s, string(prefix)) {
			subs = append(subs, s)
		}
	}
	slices.Sort(subs)
	for _, s := range subs {
		if !fn([]byte(s), h.state[string(key)+"\x00"+s]) {
			break
		}
	}
	return nil
}

type outputs []guest.Output

func (o *outputs) Emit(out guest.Output) error { *o = append(*o, out); return nil }

// A firing closes the window its timer was set for by reading it alone
// (a scan costs the host a store transaction); a timer whose window is not
// there, as after a change of the windows' size, scans and closes every
// window of its key that is due.
func TestFireReadsItsWindowAlone(t *testing.T) {
	w, err := window.Tumbling(time.Minute, window.Options{Name: "w", Grace: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := &memHost{st: -1, state: map[string][]byte{}}
	var out outputs
	for _, ts := range []int64{1_000, 2_000, 61_000} { // windows [0, 60s) and [60s, 120s)
		h.st = max(h.st, ts-1)
		if err := w.Add(h, &guest.Record{Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(ts)}, &out); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Fire(h, []byte("k"), 70_000, &out); err != nil || len(out) != 1 || h.scans != 0 {
		t.Fatalf("the firing of [0, 60s): %d outputs, %d scans, %v; want 1 and none", len(out), h.scans, err)
	}
	if n, _ := window.DecodeCount(out[0].Value); n != 2 {
		t.Fatalf("window [0, 60s) counted %d, want 2", n)
	}
	// A timer 5 s after the second window's close (its own was set for a
	// grace of 5 s): not its window; the scan finds it due.
	if err := w.Fire(h, []byte("k"), 135_000, &out); err != nil || len(out) != 2 || h.scans != 1 {
		t.Fatalf("a timer of no window: %d outputs, %d scans, %v; want 2 and 1", len(out), h.scans, err)
	}
	if len(h.state) != 0 {
		t.Fatalf("state left behind: %v", h.state)
	}
}
