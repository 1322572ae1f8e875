package host

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
)

func holdRec(bytes, wait string) *abi.Record {
	return &abi.Record{Topic: "in", Key: []byte("k"), Value: []byte("x"), Attempt: 1,
		Headers: []abi.Header{{Key: "hold.bytes", Value: []byte(bytes)}, {Key: "hold.wait", Value: []byte(wait)}}}
}

// The engine's bound on held outputs (host.max_held_output_bytes) covers
// records waiting on operations and outputs handed to the caller: emit
// refuses past it (the guest sees a limit error), and the bytes come back
// when a record ends without handing its outputs over or when the caller
// releases what it was handed.
func TestHeldOutputsBound(t *testing.T) {
	e := newEngine(t)
	e.LimitHeldOutputs(1 << 20)
	m, err := e.Load(context.Background(), guest(t, "host/testdata/holdout"), ModuleConfig{Name: "test", Limits: Limits{RecordTimeout: 10 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	a, b := newInstance(t, m), newInstance(t, m)
	defer b.Close(context.Background())

	// a waits holding 640 KiB.
	if res := a.Process(context.Background(), holdRec("655360", "1h"), "a"); res.Status != abi.StatusPending {
		t.Fatalf("a: %+v", res)
	}
	held, _ := e.HeldOutputBytes()
	if held < 640<<10 || held > 640<<10+10*256 { // ten outputs of 64 KiB
		t.Fatalf("%d bytes held while a waits, want 640 KiB and the outputs' overhead", held)
	}
	// b's 640 KiB do not fit beside them: its emit is refused.
	res := b.Process(context.Background(), holdRec("655360", "0s"), "b")
	if res.Status != abi.StatusRetry || res.Err == nil || !strings.Contains(res.Err.Error(), "limit") {
		t.Fatalf("b emitted past the host's bound: %+v", res)
	}
	if h, _ := e.HeldOutputBytes(); h != held {
		t.Fatalf("b's refused record left %d bytes held, want a's %d", h, held)
	}
	// a's instance goes away: its waiting record's outputs are dropped.
	a.Close(context.Background())
	if lost := a.Poll(context.Background(), time.Now()); len(lost) != 1 {
		t.Fatalf("a lost %d records, want 1", len(lost))
	}
	if h, _ := e.HeldOutputBytes(); h != 0 {
		t.Fatalf("%d bytes held after a's record was lost", h)
	}
	// Handed over, the outputs stay counted until the caller releases them.
	res = b.Process(context.Background(), holdRec("655360", "0s"), "b")
	for deadline := time.Now().Add(5 * time.Second); res.Status == abi.StatusPending && time.Now().Before(deadline); {
		<-b.Ready()
		for _, d := range b.Poll(context.Background(), time.Now()) {
			res = d.Result
		}
	}
	if res.Status != abi.StatusOK || len(res.Outputs) != 10 {
		t.Fatalf("b: %+v", res)
	}
	if h, _ := e.HeldOutputBytes(); h != res.HeldBytes || h < 640<<10 {
		t.Fatalf("%d bytes held, the result hands over %d", h, res.HeldBytes)
	}
	e.ReleaseOutputs(res.HeldBytes)
	if h, _ := e.HeldOutputBytes(); h != 0 {
		t.Fatalf("%d bytes held after the caller released its outputs", h)
	}
}

// One record's outputs are bounded by limits.max_outputs and
// limits.max_output_bytes whatever the host-wide bound: emit past either
// returns the limit error, the record fails and holds nothing afterwards.
func TestRecordOutputLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lim   Limits
		bytes string
	}{
		{"max_outputs", Limits{MaxOutputs: 3}, "262144"},                  // four outputs of 64 KiB
		{"max_output_bytes", Limits{MaxOutputBytes: 100 << 10}, "131072"}, // 128 KiB > 100 KiB
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t)
			e.LimitHeldOutputs(64 << 20)
			tc.lim.RecordTimeout = 10 * time.Second
			m, err := e.Load(context.Background(), guest(t, "host/testdata/holdout"), ModuleConfig{Name: "test", Limits: tc.lim})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			in := newInstance(t, m)
			res := in.Process(context.Background(), holdRec(tc.bytes, "0s"), "r")
			if res.Status != abi.StatusRetry || res.Err == nil || !strings.Contains(res.Err.Error(), "limit") || len(res.Outputs) != 0 {
				t.Fatalf("a record emitting past %s: %+v", tc.name, res)
			}
			if h, _ := e.HeldOutputBytes(); h != 0 {
				t.Fatalf("%d bytes held after the record failed", h)
			}
			// Within the limit the same guest succeeds.
			res = in.Process(context.Background(), holdRec("65536", "0s"), "r2")
			for deadline := time.Now().Add(5 * time.Second); res.Status == abi.StatusPending && time.Now().Before(deadline); {
				<-in.Ready()
				for _, d := range in.Poll(context.Background(), time.Now()) {
					res = d.Result
				}
			}
			if res.Status != abi.StatusOK || len(res.Outputs) != 1 {
				t.Fatalf("a record within the limits: %+v", res)
			}
		})
	}
}
