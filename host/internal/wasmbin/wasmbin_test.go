package wasmbin_test

import (
	"bytes"
	"testing"

	"github.com/wasmstream/wasmstream/host/internal/wasmbin"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
)

func sample() wt.Module {
	m := wt.Minimal(wt.I32Const(0), wt.Import{Module: "wasi_snapshot_preview1", Name: "proc_exit", Params: []byte{wt.I32}})
	m.Tables = []wt.Table{{Min: 3}, {Min: 2, Max: 9, HasMax: true}}
	m.Globals = 2
	m.Elements = []int{5}
	m.Data = [][]byte{[]byte("abc")}
	m.Funcs = append(m.Funcs, wt.Func{Locals: []wt.Locals{{N: 7, Type: wt.I32}, {N: 3, Type: wt.I64}}})
	return m
}

func TestRead(t *testing.T) {
	s, err := wasmbin.Read(sample().Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Tables) != 2 || s.Tables[0].Min != 3 || s.Tables[0].HasMax || s.Tables[1].Max != 9 ||
		s.Globals != 2 || s.ElementEntries != 5 || s.DataBytes != 3 || s.MaxLocals != 10 || s.MaxLocalsFunc != 2 ||
		s.Functions != 3 || s.ImportedFunctions != 1 {
		t.Fatalf("summary %+v", s)
	}
}

func TestWithTableMax(t *testing.T) {
	b := sample().Bytes()
	s, _ := wasmbin.Read(b)
	out := wasmbin.WithTableMax(b, s, []uint32{100000, 5})
	s2, err := wasmbin.Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if !s2.Tables[0].HasMax || s2.Tables[0].Max != 100000 || s2.Tables[1].Max != 5 || s2.Tables[1].Min != 2 {
		t.Fatalf("tables %+v", s2.Tables)
	}
	// Only the table section changed.
	want := sample()
	want.Tables = []wt.Table{{Min: 3, Max: 100000, HasMax: true}, {Min: 2, Max: 5, HasMax: true}}
	if !bytes.Equal(out, want.Bytes()) {
		t.Fatal("rewritten module differs from the module declaring those maximums")
	}
}

// FuzzRead: Read never panics, counts no more entries than the module has
// bytes, and what it accepts it measures consistently:
// rewriting the tables yields a module it reads again with the new maximums.
func FuzzRead(f *testing.F) {
	f.Add(sample().Bytes())
	f.Add(wt.Minimal(wt.Loop).Bytes())
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x02\x05\xff\xff\xff\xff\x0f")) // import count 2^32-1
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x00\x09\x04name\x01\x02\xff\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := wasmbin.Read(b)
		if err != nil {
			return
		}
		if s.ElementEntries > uint64(len(b)) || s.DataBytes > uint64(len(b)) {
			t.Fatalf("counts beyond the module's size: %+v", s)
		}
		maxes := make([]uint32, len(s.Tables))
		for i := range maxes {
			maxes[i] = uint32(i) * 1000
		}
		s2, err := wasmbin.Read(wasmbin.WithTableMax(b, s, maxes))
		if err != nil {
			t.Fatalf("rewritten module unreadable: %v", err)
		}
		for i, tb := range s2.Tables {
			if !tb.HasMax || tb.Min != s.Tables[i].Min || tb.Max != max(maxes[i], tb.Min) {
				t.Fatalf("table %d: %+v, want min %d max %d", i, tb, s.Tables[i].Min, maxes[i])
			}
		}
	})
}
