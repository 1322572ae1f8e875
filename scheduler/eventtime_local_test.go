package scheduler

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
)

// The eventtime guest over the scheduler's state (state.Local: the
// record's writes, the overlay, the bbolt store) without a broker: 300
// subs of 1 KiB under one key take several state_scan2 calls of the
// guest's 64 KiB buffer, each going on after the last sub it received,
// and list every sub once, in order; stream time follows the committed
// records' timestamps (not the record in progress's), and the one-part
// key of the same bytes stays apart (the guest fails if (k, "") reads it).
func TestEventTimeOverTheState(t *testing.T) {
	t.Parallel()
	e, err := host.NewEngine("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	m, err := e.Load(context.Background(), wt.BuildGoGuest(t, "host/testdata/eventtime"), host.ModuleConfig{Name: "eventtime"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	in, err := m.NewInstance(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close(context.Background())
	l, err := state.OpenLocal(state.Limits{MaxValueBytes: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	value := bytes.Repeat([]byte{'v'}, 1<<10)
	const n = 300
	for i := 0; i < n; i++ {
		st := l.Begin()
		at := int64(100000 + i) // six digits: subs sort as the timestamps
		var hs []abi.Header
		if i == 0 {
			hs = []abi.Header{{Key: "eventtime.one"}}
		}
		res := in.ProcessState(context.Background(), &abi.Record{Topic: "in", Key: []byte("k"), Value: value, Timestamp: at, Attempt: 1, Headers: hs}, nil, st)
		if res.Status != abi.StatusOK {
			t.Fatalf("record %d: %v %v", i, res.Status, res.Err)
		}
		l.CommitAt(st, int64(i), at)
	}
	st := l.Begin()
	res := in.ProcessState(context.Background(), &abi.Record{Topic: "in", Key: []byte("k"), Value: []byte("x"), Timestamp: 99, Attempt: 1,
		Headers: []abi.Header{{Key: "eventtime.count"}}}, nil, st)
	// The record's own sub, "99", is among them, last in byte order.
	want := fmt.Sprintf("%d n=%d last=99", 100000+n-1, n+1)
	if res.Status != abi.StatusOK || len(res.Outputs) != 1 || string(res.Outputs[0].Value) != want {
		t.Fatalf("%v %v %+v, want %q", res.Status, res.Err, res.Outputs, want)
	}
}
