package host

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// clockGuest reads, in one record, the monotonic clock, the wall clock and
// the monotonic clock again (WASI clock_time_get) into memory at 0, 8 and
// 16, and the two clocks' resolutions (clock_res_get) at 24 and 32.
func clockGuest() []byte {
	get := func(id, at int32) []byte { // clock_time_get(id, precision 0, at); drop the errno
		b := append(wt.I32Const(id), 0x42, 0x00) // i64.const 0
		b = append(b, wt.I32Const(at)...)
		return append(append(b, wt.Call(0)...), 0x1a)
	}
	res := func(id, at int32) []byte { // clock_res_get(id, at)
		return append(append(append(wt.I32Const(id), wt.I32Const(at)...), wt.Call(1)...), 0x1a)
	}
	var body []byte
	for _, b := range [][]byte{get(1, 0), get(0, 8), get(1, 16), res(1, 24), res(0, 32), wt.I32Const(0)} {
		body = append(body, b...)
	}
	const wasi = "wasi_snapshot_preview1"
	return wt.Minimal(body,
		wt.Import{Module: wasi, Name: "clock_time_get", Params: []byte{wt.I32, wt.I64, wt.I32}, Results: []byte{wt.I32}},
		wt.Import{Module: wasi, Name: "clock_res_get", Params: []byte{wt.I32, wt.I32}, Results: []byte{wt.I32}},
	).Bytes()
}

// readClocks runs one record of clockGuest on a fresh module of e and
// returns what the guest read: monotonic, wall, monotonic, and the two
// resolutions.
func readClocks(t *testing.T, e *Engine) [5]uint64 {
	t.Helper()
	m, err := e.Load(context.Background(), clockGuest(), ModuleConfig{Name: "clock"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(context.Background()) })
	in := newInstance(t, m)
	if res := in.Process(context.Background(), &abi.Record{Topic: "t"}, nil); res.Err != nil {
		t.Fatal(res.Err)
	}
	b, ok := in.mod.Memory().Read(0, 40)
	if !ok {
		t.Fatal("memory")
	}
	var v [5]uint64
	for i := range v {
		v[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return v
}

// TestGuestClocksCoarse: the clocks a guest reads tick at the engine's
// resolution (1 ms by default, host.clock_resolution): two readings of the
// monotonic clock and one of the wall clock are whole milliseconds, and
// clock_res_get says 1 ms. At 1 ns (the host's own clocks, as before) they
// are not.
func TestGuestClocksCoarse(t *testing.T) {
	e := newEngine(t)
	for range 20 { // any reading not on a tick fails; 20 records, 60 readings
		v := readClocks(t, e)
		for i, what := range []string{"monotonic", "wall", "monotonic again"} {
			if v[i]%uint64(time.Millisecond) != 0 {
				t.Fatalf("%s clock read %d ns: not a whole millisecond", what, v[i])
			}
		}
		if v[2] < v[0] {
			t.Fatalf("monotonic clock went back: %d then %d", v[0], v[2])
		}
		if wall := time.Unix(0, int64(v[1])); time.Since(wall) > time.Minute || time.Since(wall) < -time.Second {
			t.Fatalf("wall clock reads %v", wall)
		}
		if v[3] != uint64(time.Millisecond) || v[4] != uint64(time.Millisecond) {
			t.Fatalf("clock resolutions %d and %d ns, want 1 ms", v[3], v[4])
		}
	}

	e.SetClockResolution(time.Nanosecond)
	fine := 0
	for range 20 {
		v := readClocks(t, e)
		for i := range 3 {
			if v[i]%uint64(time.Millisecond) != 0 {
				fine++
			}
		}
	}
	if fine == 0 {
		t.Fatal("at a 1 ns resolution, 60 readings were all whole milliseconds")
	}
	t.Logf("at 1 ns: %d of 60 readings not on a millisecond", fine)
}
