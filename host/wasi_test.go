package host

import (
	"strings"
	"testing"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

// WASI calls outside the ABI's list (no filesystem, no sockets) are refused
// at load, naming the import; the allowed ones load.
func TestWASIImportsRefused(t *testing.T) {
	i32s := func(n int) []byte { return []byte(strings.Repeat(string(wt.I32), n)) }
	for _, im := range []wt.Import{
		{Module: "wasi_snapshot_preview1", Name: "path_open", Params: append(i32s(5), wt.I64, wt.I64, wt.I32, wt.I32), Results: i32s(1)},
		{Module: "wasi_snapshot_preview1", Name: "fd_read", Params: i32s(4), Results: i32s(1)},
		{Module: "wasi_snapshot_preview1", Name: "sock_accept", Params: i32s(3), Results: i32s(1)},
	} {
		err := loadErr(t, wt.Minimal(wt.I32Const(0), im).Bytes())
		if err == nil || !strings.Contains(err.Error(), "imports wasi_snapshot_preview1."+im.Name+", which the ABI forbids") {
			t.Errorf("%s: got %v, want refused naming the import", im.Name, err)
		}
	}
	ok := wt.Minimal(wt.I32Const(0),
		wt.Import{Module: "wasi_snapshot_preview1", Name: "fd_write", Params: i32s(4), Results: i32s(1)},
		wt.Import{Module: "wasi_snapshot_preview1", Name: "clock_time_get", Params: []byte{wt.I32, wt.I64, wt.I32}, Results: i32s(1)})
	if err := loadErr(t, ok.Bytes()); err != nil {
		t.Fatalf("fd_write and clock_time_get refused: %v", err)
	}
}
