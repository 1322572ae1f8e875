package host

import (
	"context"
	"strings"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// headerGuest is a module whose on_record writes, at address 0, an output
// with a null key and value and n empty headers (8 zero bytes each, 20 + 8n
// bytes in all), then emits it: once (loop false), returning emit's result
// as its status, or until emit refuses (loop true), returning the errno.
func headerGuest(n int32, loop bool) wt.Module {
	store := func(addr, v int32) []byte { // i32.store align=2 offset=0
		return append(append(wt.I32Const(addr), wt.I32Const(v)...), 0x36, 0x02, 0x00)
	}
	var body []byte
	body = append(body, store(4, -1)...)  // partition -1
	body = append(body, store(8, -1)...)  // key null
	body = append(body, store(12, -1)...) // value null
	body = append(body, store(16, n)...)  // header count; the headers are zero memory
	emit := append(append(append(wt.LocalGet(0), wt.I32Const(0)...), wt.I32Const(20+8*n)...), wt.Call(0)...)
	if !loop {
		body = append(body, emit...)
	} else {
		body = append(body, 0x02, 0x40, 0x03, 0x40) // block, loop
		body = append(body, emit...)
		body = append(body, 0x22, 0x02, 0x0d, 0x01, 0x0c, 0x00, 0x0b, 0x0b) // local.tee 2, br_if 1, br 0, end, end
		body = append(body, wt.LocalGet(2)...)
	}
	m := wt.Minimal(body, wt.Import{Module: abi.HostModule, Name: abi.ImportEmit, Params: []byte{wt.I32, wt.I32, wt.I32}, Results: []byte{wt.I32}})
	m.Funcs[1].Locals = []wt.Locals{{N: 1, Type: wt.I32}}
	m.MemoryMin = uint32((20+8*int64(n))>>16) + 1
	return m
}

// TestOutputHeadersBounded: a guest cannot make the host decode and hold
// headers beyond what its output limits allow. One output of 2,097,149
// empty headers (16 MiB, within limits.max_output_bytes) is refused as a bad
// encoding before its headers are decoded; outputs of 1,000 empty headers
// each count what their headers cost decoded, so emit refuses them once the
// record's limits.max_output_bytes is spent, not after max_outputs.
func TestOutputHeadersBounded(t *testing.T) {
	const most = (16<<20 - 20) / 8
	for _, tc := range []struct {
		name   string
		mod    wt.Module
		status string // the protocol fault the guest's returned errno causes
		max    uint64 // bytes the call may allocate
	}{
		{"one output of 2M headers", headerGuest(most, false), "invalid status -3", 24 << 20},
		{"outputs of 1,000 headers until refused", headerGuest(abi.MaxHeaders, true), "invalid status -5", 24 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := load(t, tc.mod.Bytes(), Limits{MaxOutputBytes: 16 << 20})
			in := newInstance(t, m)
			var res Result
			n := allocated(t, func() { res = in.Process(context.Background(), &abi.Record{Topic: "t"}, nil) })
			if f := res.Fault(); f == nil || !strings.Contains(f.Msg, tc.status) {
				t.Fatalf("got %+v (%v), want a fault with %q", res.Status, res.Err, tc.status)
			}
			if n > tc.max {
				t.Fatalf("the call allocated %.1f MB, want at most %.1f", float64(n)/1e6, float64(tc.max)/1e6)
			}
		})
	}
}
