package host

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host/wasmtest"
)

// logCounter is a slog handler that counts what reaches it: the guest's
// lines and message bytes, and the host's "dropped" summaries.
type logCounter struct {
	mu             sync.Mutex
	guestLines     int
	guestBytes     int
	summaries      int
	summaryDropped int64
}

type logCounterHandler struct{ c *logCounter }

func (h logCounterHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h logCounterHandler) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h logCounterHandler) WithGroup(string) slog.Handler                { return h }
func (h logCounterHandler) Handle(_ context.Context, r slog.Record) error {
	var source string
	var dropped int64
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "source":
			source = a.Value.String()
		case "dropped_lines":
			dropped = a.Value.Int64()
		}
		return true
	})
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	switch {
	case source == "guest":
		h.c.guestLines++
		h.c.guestBytes += len(r.Message)
	case dropped > 0:
		h.c.summaries++
		h.c.summaryDropped += dropped
	}
	return nil
}

// A guest calling log a million times in one record writes at most its
// instance's burst plus its rate to the host's log; every other line is
// counted as dropped, exactly, and summarised in a few lines.
func TestGuestLogFloodIsBounded(t *testing.T) {
	const calls, msgLen = 1_000_000, 100
	var c logCounter
	e, err := NewEngine("", slog.New(logCounterHandler{&c}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A long deadline: the flood must be bounded by the log limits, not cut
	// short by the record's deadline.
	m, err := e.Load(ctx, wasmtest.LogLoop(calls, abi.LogInfo, msgLen).Bytes(), ModuleConfig{Name: "flood", Limits: Limits{RecordTimeout: 2 * time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := m.NewInstance(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res := in.Process(ctx, &abi.Record{Value: []byte("x")}, nil)
	elapsed := time.Since(start)
	if res.Err != nil || res.Status != abi.StatusOK {
		t.Fatalf("record: status %s, err %v", res.Status, res.Err)
	}
	in.Close(ctx)
	m.Close(ctx) // writes the summary of the drops not yet reported
	c.mu.Lock()
	defer c.mu.Unlock()
	lim := DefaultLimits
	bound := lim.LogBurstBytes + int(elapsed.Seconds()*float64(lim.LogBytesPerSecond)) + 1
	t.Logf("%d log calls in %s: %d lines (%d bytes) reached the handler, %d summary lines", calls, elapsed.Round(time.Millisecond), c.guestLines, c.guestBytes, c.summaries)
	if c.guestBytes > bound {
		t.Errorf("the guest wrote %d bytes to the host's log in %s; the bucket allows %d", c.guestBytes, elapsed, bound)
	}
	if c.guestLines == 0 {
		t.Error("no guest line reached the log: the burst should let the first ones through")
	}
	lines, bytes := e.GuestLogDropped("flood")
	if lines+int64(c.guestLines) != calls || bytes != lines*msgLen {
		t.Errorf("dropped %d lines (%d bytes) + %d written != %d calls of %d bytes", lines, bytes, c.guestLines, calls, msgLen)
	}
	if c.summaryDropped != lines {
		t.Errorf("summary lines report %d dropped, the counter %d", c.summaryDropped, lines)
	}
	if max := 2 + int(elapsed/logSummaryInterval); c.summaries < 1 || c.summaries > max {
		t.Errorf("%d summary lines in %s, want 1 to %d", c.summaries, elapsed, max)
	}
}

// Lines at a level the host does not write are neither written nor counted
// as dropped: they cost the guest's bucket nothing.
func TestGuestLogBelowLevelIsFree(t *testing.T) {
	var c logCounter
	e, err := NewEngine("", slog.New(logCounterHandler{&c}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := e.Load(ctx, wasmtest.LogLoop(10_000, abi.LogDebug, 100).Bytes(), ModuleConfig{Name: "debug"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	in := newInstance(t, m)
	if res := in.Process(ctx, &abi.Record{}, nil); res.Err != nil {
		t.Fatal(res.Err)
	}
	if lines, _ := e.GuestLogDropped("debug"); lines != 0 || c.guestLines != 0 {
		t.Fatalf("debug lines: %d dropped, %d written; want none of either", lines, c.guestLines)
	}
	if !in.logs.last.IsZero() {
		t.Fatal("debug lines took from the instance's log bucket")
	}
}

// The bucket lets a burst through, then its rate.
func TestLogBucket(t *testing.T) {
	var b logBucket
	t0 := time.Unix(1000, 0)
	n := 0
	for b.take(t0, 100, 1000, 1000) {
		n++
	}
	if n != 10 {
		t.Fatalf("burst of 1000 bytes passed %d lines of 100, want 10", n)
	}
	if b.take(t0.Add(99*time.Millisecond), 100, 1000, 1000) {
		t.Fatal("a line passed before the bucket refilled its cost")
	}
	if !b.take(t0.Add(100*time.Millisecond), 100, 1000, 1000) {
		t.Fatal("no line passed after the bucket refilled its cost")
	}
	if b.take(t0.Add(time.Hour), 1001, 1000, 1000) {
		t.Fatal("a line over the burst passed")
	}
	n = 0
	for b.take(t0.Add(2*time.Hour), 100, 1000, 1000) {
		n++
	}
	if n != 10 {
		t.Fatalf("after a long pause %d lines passed, want the burst (10)", n)
	}
}

// Summaries are written at the first drop, then at most once an interval,
// and report every drop between them.
func TestGuestLogSummaryRate(t *testing.T) {
	s := &guestLogStats{summaryEvery: 10 * time.Second}
	t0 := time.Unix(1000, 0)
	var got []logSummary
	for i := 0; i < 300; i++ { // a drop every 100ms for 30s
		if sum, ok := s.drop(t0.Add(time.Duration(i)*100*time.Millisecond), 10); ok {
			got = append(got, sum)
		}
	}
	if sum, ok := s.flush(t0.Add(30 * time.Second)); ok {
		got = append(got, sum)
	}
	var total int64
	for _, g := range got {
		total += g.lines
		if g.bytes != g.lines*10 {
			t.Errorf("summary of %d lines reports %d bytes", g.lines, g.bytes)
		}
	}
	if len(got) != 4 || got[0].lines != 1 || total != 300 {
		t.Fatalf("summaries %+v: want 4 (the first drop, at 10s, 20s, and the flush) reporting 300 lines", got)
	}
	if l, b := s.lines.Load(), s.bytes.Load(); l != 300 || b != 3000 {
		t.Fatalf("totals %d lines %d bytes", l, b)
	}
}
