package assembly

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler/admin"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestUnreachableBrokersNoWarningFirst: a host whose brokers cannot be
// reached fails with the error that says so, and does not first warn that
// it goes on without the fleet registry (a warning that read as if the
// host would run, right before it stopped).
func TestUnreachableBrokersNoWarningFirst(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there: connections are refused
	t.Setenv(admin.TokenEnv, "3f9c2a71d8e4b6055a17c3e9f0d2b84c6e1a9f3072d5c8b4e6a1f0937c2d5e8b")
	dir := t.TempDir()
	module := filepath.Join(dir, "m.wasm")
	if err := os.WriteFile(module, wt.BuildGoGuest(t, "plugins/examples/uppercase"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`kafka:
  brokers: [%q]
  group: g
pipelines:
  - {name: p, module: %s, inputs: [in], output: out, dead_letter_topic: dlq}
metrics: {listen: ""}
admin: {listen: "127.0.0.1:0", store_dir: %s}
`, addr, module, filepath.Join(dir, "store"))), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedLog
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := Start(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err == nil {
		h.Shutdown()
		t.Fatal("a host whose brokers cannot be reached started")
	}
	if !strings.Contains(err.Error(), "kafka.brokers") {
		t.Errorf("the error does not name kafka.brokers: %v", err)
	}
	if s := logs.String(); strings.Contains(s, "level=WARN") {
		t.Errorf("a warning before the fatal error %q:\n%s", err, s)
	}
}
