package scheduler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

// memState is a State over a map, without overlay, changelog or store:
// what the guest's state calls cost by themselves.
type memState map[string][]byte

func (m memState) Get(k []byte) ([]byte, abi.Errno) {
	v, ok := m[string(k)]
	if !ok {
		return nil, abi.ErrnoNotFound
	}
	return v, 0
}
func (m memState) Put(k, v []byte) abi.Errno { m[string(k)] = append([]byte(nil), v...); return 0 }
func (m memState) Delete(k []byte) abi.Errno { delete(m, string(k)); return 0 }
func (m memState) Scan(_, _ []byte, _ func(k, v []byte) bool) abi.Errno {
	return 0
}

// Reader: the benchmarks start no asynchronous state operation.
func (m memState) Reader() host.StateReader { return nil }

// Written: every write counts anew in the record's bounds.
func (m memState) Written([]byte) (int, bool) { return 0, false }

func benchInstance(b *testing.B, guest string) *host.Instance {
	e, err := host.NewEngine("", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close(context.Background()) })
	wasm, err := os.ReadFile(guestPath(b, guest))
	if err != nil {
		b.Fatal(err)
	}
	m, err := e.Load(context.Background(), wasm, host.ModuleConfig{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	in, err := m.NewInstance(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(context.Background()) })
	return in
}

// BenchmarkStateRecord is the per-record cost of a get and a put (the count
// example) beside a stateless guest doing the same emit (uppercase): the
// instance call alone, with state calls answered from a map (the ABI
// crossings), and through the scheduler's state (record writes, overlay,
// key check, changelog outputs, the bbolt store applied every 1000
// records as a commit would).
func BenchmarkStateRecord(b *testing.B) {
	const parts = 4
	var keys [][]byte
	for i := 0; len(keys) < 1000; i++ {
		if k := []byte(fmt.Sprintf("k%d", i)); state.KeyPartition(k, parts) == 0 {
			keys = append(keys, k)
		}
	}
	rec := func(i int) *abi.Record {
		return &abi.Record{Topic: "in", Offset: int64(i), Key: keys[i%len(keys)], Value: []byte("value"), Attempt: 1}
	}
	b.Run("stateless_uppercase", func(b *testing.B) {
		in := benchInstance(b, "uppercase")
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if res := in.Process(context.Background(), rec(i), nil); res.Status != abi.StatusOK {
				b.Fatal(res.Err)
			}
		}
	})
	b.Run("count_map_state", func(b *testing.B) {
		in := benchInstance(b, "count")
		st := memState{}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if res := in.ProcessState(context.Background(), rec(i), nil, st); res.Status != abi.StatusOK {
				b.Fatal(res.Err)
			}
		}
	})
	b.Run("count_bbolt_state", func(b *testing.B) {
		in := benchInstance(b, "count")
		store, err := statestore.Open(filepath.Join(b.TempDir(), "s.db"), time.Second)
		if err != nil {
			b.Fatal(err)
		}
		defer store.Close()
		ts := state.NewPartition(store, 0, parts, state.Limits{MaxValueBytes: 64 << 10, Changelog: "p.changelog"})
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			rs := ts.Begin()
			res := in.ProcessState(context.Background(), rec(i), nil, rs)
			if res.Status != abi.StatusOK {
				b.Fatal(res.Err)
			}
			sb, outs := ts.Commit(int64(i), rs, nil)
			if len(outs) != 1 {
				b.Fatalf("%d changelog outputs", len(outs))
			}
			sb.Acked(int64(i), nil)
			if i%1000 == 999 {
				if err := ts.Flush(int64(i + 1)); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
