package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/admin"
	"github.com/wasmstream/wasmstream/scheduler/registry"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// fleetDeployer stands for the runner: it takes any module.
type fleetDeployer struct{}

func (fleetDeployer) Check(ctx context.Context, p string, wasm []byte) (host.Info, error) {
	return host.Info{}, nil
}
func (fleetDeployer) Deploy(ctx context.Context, p string, wasm []byte) (host.Info, error) {
	return host.Info{}, nil
}
func (fleetDeployer) PipelineNames() []string { return []string{"p"} }

// TestProcessorsOutputBounded: 50,000 phantom hosts written to the hosts
// topic dated an hour ahead, then 5,000 live ones: `wasmstream processors`
// prints what the API lists, at most MaxListedHosts hosts and a count of
// the others. Measured: 2,400,251 bytes before (every phantom a line), now
// under 8 KB.
func TestProcessorsOutputBounded(t *testing.T) {
	brokers := kafkatest.Fake(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := admin.OpenStore(t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := store.Put("p", "config", []byte("\x00asm\x01\x00\x00\x00"))
	store.Activate("p", d)
	api, err := admin.NewAPI(testAdminToken, store, fleetDeployer{}, 1024, log)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.Open(context.Background(), registry.Config{Base: []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID("t")}, Prefix: "fleet", HostID: "host-a", MaxModuleBytes: 1024}, log)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	api.UseRegistry(reg)
	reg.Running(context.Background(), "p", d, "", nil)
	reg.Start()
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	t.Setenv("WASMSTREAM_ADMIN_TOKEN", testAdminToken)
	cl := kafkatest.Client(t, brokers)
	for _, ahead := range []time.Duration{time.Hour, 0} {
		n := 50000
		if ahead == 0 {
			n = 5000 // enough to fill what the registry keeps
		}
		var recs []*kgo.Record
		for i := range n {
			h := registry.HostStatus{Host: fmt.Sprintf("phantom-%05d", i), Pipelines: map[string]string{"p": d}, At: time.Now().UTC().Add(ahead)}
			b, _ := json.Marshal(h)
			recs = append(recs, &kgo.Record{Topic: reg.Hosts, Key: []byte(h.Host), Value: b})
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		kafkatest.Eventually(t, 3*time.Minute, "the phantom statuses read", func() bool {
			out.Reset()
			errb.Reset()
			return cmdProcessors([]string{"--admin", srv.URL}, &out, &errb) == 0 && strings.Contains(out.String(), "host host-a") &&
				(ahead > 0 || strings.Contains(out.String(), "more live hosts, not listed"))
		})
		t.Logf("phantoms dated %s ahead: processors printed %d bytes, %d lines", ahead, out.Len(), strings.Count(out.String(), "\n"))
		if out.Len() > 8<<10 {
			t.Fatalf("processors printed %d bytes:\n%.2000s", out.Len(), out.String())
		}
	}
}
