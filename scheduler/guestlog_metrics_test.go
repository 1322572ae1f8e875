package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// guestLines counts the guest log lines that reach the host's handler.
type guestLines struct {
	slog.Handler
	n *atomic.Int64
}

func (h guestLines) Handle(ctx context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "source" && a.Value.String() == "guest" {
			h.n.Add(1)
		}
		return true
	})
	return h.Handler.Handle(ctx, r)
}
func (h guestLines) WithAttrs(as []slog.Attr) slog.Handler {
	return guestLines{h.Handler.WithAttrs(as), h.n}
}

// Guest log lines dropped over limits.log_* are exported on /metrics as
// wasmstream_guest_log_dropped_total{pipeline}: with what was written, they
// account for every log call.
func TestGuestLogDroppedMetric(t *testing.T) {
	const records, perRecord, msgLen = 3, 1000, 100
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq")
	mod := filepath.Join(t.TempDir(), "flood.wasm")
	if err := os.WriteFile(mod, wt.LogLoop(perRecord, abi.LogInfo, msgLen).Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cl := kafkatest.Client(t, brokers)
	for i := 0; i < records; i++ {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "in", Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// limits.* lines continue the test config's limits section.
	cfg := testConfigWith(t, brokers, "g", mod, "in", "out", "dlq", "      log_bytes_per_second: 1\n      log_burst_bytes: 8192", "")
	var written atomic.Int64
	r, err := NewRunner(context.Background(), cfg, slog.New(guestLines{slog.NewTextHandler(io.Discard, nil), &written}))
	if err != nil {
		t.Fatal(err)
	}
	handler := servedMetricsOf(t, r)
	r.Start()
	defer r.Stop(context.Background())
	kafkatest.Eventually(t, time.Minute, "every record done", func() bool { return r.Snapshots()[0].Done == records })

	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	value := func(name string) int64 {
		m := regexp.MustCompile(`(?m)^` + name + `\{[^}]*pipeline="p"[^}]*\} (\d+)$`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics has no %s{pipeline=\"p\"}:\n%s", name, grepLines(body, "guest_log"))
		}
		v, _ := strconv.ParseInt(m[1], 10, 64)
		return v
	}
	dropped, droppedBytes := value("wasmstream_guest_log_dropped_total"), value("wasmstream_guest_log_dropped_bytes_total")
	t.Logf("%d log calls: %d written, %d dropped (%d bytes)", records*perRecord, written.Load(), dropped, droppedBytes)
	if dropped+written.Load() != records*perRecord || droppedBytes != dropped*msgLen {
		t.Fatalf("%d dropped (%d bytes) + %d written != %d log calls of %d bytes", dropped, droppedBytes, written.Load(), records*perRecord, msgLen)
	}
	// 8192 bytes of burst pay for 23 lines of 100+256 bytes per instance.
	if w := written.Load(); w < 1 || w > 23*int64(records) {
		t.Fatalf("%d guest lines written; the burst allows 23 per instance", w)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
