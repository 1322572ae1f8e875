package host

import (
	"context"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/wasmtest"
)

// What a guest writes to stdout/stderr is kept up to a fixed size per call
// (for fault reports) and only counted past it: a guest writing a gigabyte
// to stdout in one record costs the host 2 KiB.
func TestGuestOutputBounded(t *testing.T) {
	const writes, size = 1 << 20, 1000    // 1 GiB in all
	store := func(addr, v int32) []byte { // i32.store addr, v
		b := append(wasmtest.I32Const(addr), wasmtest.I32Const(v)...)
		return append(b, 0x36, 0x02, 0x00)
	}
	write := append(wasmtest.I32Const(1), wasmtest.I32Const(0)...) // fd 1, iovs at 0
	write = append(write, wasmtest.I32Const(1)...)                 // one iovec
	write = append(write, wasmtest.I32Const(8)...)                 // nwritten at 8
	write = append(write, wasmtest.Call(0)...)
	write = append(write, wasmtest.Drop...)
	body := append(store(0, 16), store(4, size)...) // iovec {buf: 16, len: size}
	body = append(body, wasmtest.Repeat(writes, 2, write)...)
	body = append(body, wasmtest.Unreachable...)
	m := wasmtest.Minimal(nil, wasmtest.Import{Module: "wasi_snapshot_preview1", Name: "fd_write",
		Params: []byte{wasmtest.I32, wasmtest.I32, wasmtest.I32, wasmtest.I32}, Results: []byte{wasmtest.I32}})
	m.Funcs[1].Locals = []wasmtest.Locals{{N: 1, Type: wasmtest.I32}}
	m.Funcs[1].Body = body
	// A minute for the million writes: the test is about what they cost
	// the host, not how fast they run (under -race, on a busy machine,
	// they outlasted the default 5 s).
	mod := load(t, m.Bytes(), Limits{RecordTimeout: time.Minute})
	in := newInstance(t, mod)
	res := in.Process(context.Background(), &abi.Record{}, nil)
	f := res.Fault()
	if f == nil || f.Kind != FaultTrap {
		t.Fatalf("want a trap, got %+v", res)
	}
	if len(f.Stderr) > 2100 {
		t.Fatalf("the fault carries %d bytes of guest output", len(f.Stderr))
	}
	if c := cap(in.stderr.buf); c > 4096 {
		t.Fatalf("the instance's output buffer grew to %d bytes", c)
	}
	if in.stderr.dropped != writes*size-2048 {
		t.Fatalf("%d bytes counted past the buffer, want %d", in.stderr.dropped, writes*size-2048)
	}
}
