package host

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// fillRec is a record for host/testdata/statefill: n values of size bytes.
func fillRec(n, size int, more ...string) *abi.Record {
	r := &abi.Record{Topic: "in", Key: []byte("k"), Value: []byte("fill"), Attempt: 1, Headers: []abi.Header{
		{Key: "fill.n", Value: []byte(strconv.Itoa(n))}, {Key: "fill.bytes", Value: []byte(strconv.Itoa(size))}}}
	for _, h := range more {
		r.Headers = append(r.Headers, abi.Header{Key: h})
	}
	return r
}

// stateBytes is the keys' and values' bytes in s.
func stateBytes(s *mapState) int {
	n := 0
	for k, v := range s.m {
		n += len(k) + len(v)
	}
	return n
}

// A record's state writes are changelog outputs: state_put and
// state_delete count them in limits.max_outputs (one per key the record
// writes), limits.max_output_bytes (key + value) and the engine's bound on
// held outputs (host.max_held_output_bytes), and refuse past any of them
// with errno 5 (limit), as emit does. A key written again counts its
// newest write only.
func TestStateWritesInRecordLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lim    Limits
		held   int64 // the engine's bound
		rec    *abi.Record
		ok     bool
		stored int // at most this many bytes reach the state
	}{
		{"max_output_bytes", Limits{MaxOutputBytes: 1 << 20}, 0, fillRec(64, 64<<10), false, 1 << 20},
		{"max_outputs", Limits{MaxOutputs: 10}, 0, fillRec(20, 10), false, 10 * 14},
		{"held outputs", Limits{}, 1 << 20, fillRec(64, 64<<10), false, 1 << 20},
		{"deletes", Limits{MaxOutputs: 10}, 0, fillRec(20, 0, "fill.delete"), false, 0},
		{"one key rewritten", Limits{MaxOutputs: 2, MaxOutputBytes: 128 << 10}, 1 << 20, fillRec(1000, 64<<10, "fill.same"), true, 64<<10 + 1},
		{"within the limits", Limits{MaxOutputBytes: 1 << 20}, 1 << 20, fillRec(10, 64<<10), true, 10 * (64<<10 + 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t)
			e.LimitHeldOutputs(tc.held)
			tc.lim.RecordTimeout = 10 * time.Second
			m, err := e.Load(context.Background(), guest(t, "host/testdata/statefill"), ModuleConfig{Name: "test", Limits: tc.lim})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			in := newInstance(t, m)
			st := &mapState{m: map[string][]byte{}, maxValue: 64 << 10}
			res := in.ProcessState(context.Background(), tc.rec, "r", st)
			if n := stateBytes(st); n > tc.stored {
				t.Errorf("%d bytes of state written, want at most %d", n, tc.stored)
			}
			if !tc.ok {
				if res.Status != abi.StatusRetry || res.Err == nil || !strings.Contains(res.Err.Error(), abi.ErrnoLimit.Error()) {
					t.Fatalf("a record writing past %s: %v %v", tc.name, res.Status, res.Err)
				}
				if h, _ := e.HeldOutputBytes(); h != 0 {
					t.Fatalf("%d bytes held after the record failed", h)
				}
				return
			}
			if res.Status != abi.StatusOK {
				t.Fatalf("%v %v", res.Status, res.Err)
			}
			// What the record's writes count is handed over with its result,
			// to be released once the changelog records are acknowledged.
			h, _ := e.HeldOutputBytes()
			if tc.held > 0 && (h != res.HeldBytes || h < int64(stateBytes(st))) {
				t.Fatalf("%d bytes held, the result hands over %d, the record wrote %d", h, res.HeldBytes, stateBytes(st))
			}
			e.ReleaseOutputs(res.HeldBytes)
		})
	}
}

// The figure of the report that found it: one record writing 8,000 values
// of 64 KiB under default limits. The host held 500 MB of state writes for
// it (and produced them to the changelog); the writes past
// limits.max_output_bytes (16 MiB) are refused now, and the record fails.
func TestStateWriteFloodBounded(t *testing.T) {
	e := newEngine(t)
	e.LimitHeldOutputs(256 << 20) // host.max_held_output_bytes' default
	m, err := e.Load(context.Background(), guest(t, "host/testdata/statefill"), ModuleConfig{Name: "test", Limits: Limits{RecordTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	in := newInstance(t, m)
	st := &mapState{m: map[string][]byte{}, maxValue: 64 << 10}
	before, rss := liveHeap(), vmRSS()
	res := in.ProcessState(context.Background(), fillRec(8000, 64<<10), "r", st)
	grew := liveHeap() - before
	t.Logf("status %v (%v); %d MiB of state written; live heap +%d MiB; %s before, %s after", res.Status, res.Err, stateBytes(st)>>20, grew>>20, rss, vmRSS())
	if res.Status == abi.StatusOK || stateBytes(st) > DefaultLimits.MaxOutputBytes {
		t.Fatalf("%d bytes of state writes taken from one record (status %v), want at most limits.max_output_bytes (%d)", stateBytes(st), res.Status, DefaultLimits.MaxOutputBytes)
	}
	if grew > 2*int64(DefaultLimits.MaxOutputBytes) {
		t.Fatalf("live heap grew by %d MiB", grew>>20)
	}
	e.ReleaseOutputs(res.HeldBytes)
}

// liveHeap is the bytes of live heap objects after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// scanGuest is a module of memPages pages that calls state_scan once per
// record with the buffer (buf, bufLen), stores what it returned at address
// 0 and succeeds.
func scanGuest(memPages uint32, buf, bufLen int32) []byte {
	scan := wt.Import{Module: abi.HostModule, Name: abi.ImportStateScan, Params: []byte{wt.I32, wt.I32, wt.I32, wt.I32, wt.I32, wt.I32, wt.I32}, Results: []byte{wt.I32}}
	body := wt.I32Const(0) // where i32.store puts the result
	body = append(body, wt.LocalGet(0)...)
	for i := 0; i < 4; i++ {
		body = append(body, wt.I32Const(0)...) // no prefix, no cursor
	}
	body = append(body, wt.I32Const(buf)...)
	body = append(body, wt.I32Const(bufLen)...)
	body = append(body, wt.Call(0)...)
	body = append(body, 0x36, 0x02, 0x00) // i32.store align=4 offset=0
	body = append(body, wt.I32Const(0)...)
	m := wt.Minimal(body, scan)
	m.MemoryMin = memPages
	return m.Bytes()
}

// bigState is a state of n values of 64 KiB.
func bigState(n int) *mapState {
	st := &mapState{m: map[string][]byte{}, maxValue: 64 << 10}
	v := make([]byte, 64<<10)
	for i := 0; i < n; i++ {
		st.m["k/"+strconv.Itoa(i)] = v
	}
	return st
}

// state_scan checks the guest's buffer against its memory before it reads
// the state: a buffer reaching past the memory (buf_len 0xfffffff0 in a
// 4 MiB memory) faults the call (bad_pointer) without the host building an
// answer of the state's size first.
func TestStateScanBufferCheckedFirst(t *testing.T) {
	m := load(t, scanGuest(64, 1024, -16), Limits{}) // 4 MiB of memory, buf_len 0xfffffff0
	st := bigState(1024)                             // 64 MiB of state
	in := newInstance(t, m)
	var res Result
	n := allocated(t, func() { res = in.ProcessState(context.Background(), &abi.Record{Topic: "in", Attempt: 1}, nil, st) })
	t.Logf("%v; allocated %d KiB", res.Err, n>>10)
	if f := res.Fault(); f == nil || f.Kind != FaultBadPointer {
		t.Fatalf("a scan into a buffer past the guest's memory: %v %v, want a bad_pointer fault", res.Status, res.Err)
	}
	if n > 1<<20 {
		t.Fatalf("the refused scan allocated %d MiB", n>>20)
	}
}

// One state_scan call answers at most abi.StateScanMaxBytes whatever the
// buffer, and the instance keeps no answer between calls: a scan into a
// 3 MiB buffer allocates and keeps nothing of its size.
func TestStateScanAnswerBounded(t *testing.T) {
	m := load(t, scanGuest(64, 1024, 3<<20), Limits{})
	st := bigState(1024)
	in := newInstance(t, m)
	defer in.Close(context.Background())
	var res Result
	before := liveHeap()
	n := allocated(t, func() { res = in.ProcessState(context.Background(), &abi.Record{Topic: "in", Attempt: 1}, nil, st) })
	kept := liveHeap() - before
	t.Logf("allocated %d KiB, kept %d KiB", n>>10, kept>>10)
	if res.Status != abi.StatusOK {
		t.Fatalf("%v %v", res.Status, res.Err)
	}
	if rc, _ := in.mod.Memory().ReadUint32Le(0); int32(rc) <= 0 || rc > abi.StateScanMaxBytes {
		t.Errorf("the scan answered %d bytes, want at most abi.StateScanMaxBytes (%d)", int32(rc), abi.StateScanMaxBytes)
	}
	if n > abi.StateScanMaxBytes/4 || kept > abi.StateScanMaxBytes/4 {
		t.Fatalf("a scan into a 3 MiB buffer allocated %d KiB and kept %d KiB", n>>10, kept>>10)
	}
}
