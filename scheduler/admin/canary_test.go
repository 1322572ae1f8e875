package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/registry"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// canaryHost is a host whose pipeline p runs stable with a canary of
// canaryDigest in the registry, and whose own heartbeat reports own; it
// judges canaries with a margin of 5 points. cl writes the registry's
// topics as anyone who may.
type canaryHost struct {
	api    *API
	reg    *registry.Registry
	cl     *kgo.Client
	stable string
	canary string
	seq    int
}

func newCanaryHost(t *testing.T, own func(stable, canary string) map[string]registry.Counts) *canaryHost {
	t.Helper()
	brokers := kafkatest.Fake(t)
	_, _, _, api := newTestAPIWith(t, io.Discard, nil)
	reg, err := registry.Open(context.Background(), registry.Config{Base: []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID("test")}, Prefix: "fleet", HostID: "host-a", MaxModuleBytes: 1024}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	h := &canaryHost{api: api, reg: reg, cl: kafkatest.Client(t, brokers), stable: Digest(module("stable")), canary: Digest(module("canary"))}
	api.UseRegistry(reg)
	api.SetCanaryAbortMargin(0.05)
	reg.OnHeartbeat(func() map[string]map[string]registry.Counts {
		return map[string]map[string]registry.Counts{"p": own(h.stable, h.canary)}
	}, nil)
	h.write(t, reg.Deploys, "p", registry.Deployment{Pipeline: "p", Digest: h.stable, At: time.Now().UTC(), By: "host-a",
		Canary: &registry.Canary{Digest: h.canary, Percent: 25, At: time.Now().UTC()}})
	reg.Start()
	h.sync(t)
	if d, ok := reg.Deployment("p"); !ok || d.Canary == nil {
		t.Fatal("no canary")
	}
	return h
}

func (h *canaryHost) write(t *testing.T, topic, key string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	if err := h.cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Key: []byte(key), Value: b}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// sync waits until the registry read everything written so far: a
// sentinel status written now is read after it.
func (h *canaryHost) sync(t *testing.T) {
	t.Helper()
	h.seq++
	name := fmt.Sprintf("sentinel-%d", h.seq)
	h.write(t, h.reg.Hosts, name, registry.HostStatus{Host: name, At: time.Now().UTC()})
	kafkatest.Eventually(t, 10*time.Second, "the registry read what was written", func() bool {
		for _, s := range h.reg.HostsStatus() {
			if s.Host == name {
				return true
			}
		}
		return false
	})
}

// check runs the canary judgement and reports whether the canary is still
// running.
func (h *canaryHost) check(t *testing.T) (running bool, aborted string) {
	t.Helper()
	h.api.CheckCanaries(context.Background())
	h.sync(t)
	d, _ := h.reg.Deployment("p")
	return d.Canary != nil, d.Aborted
}

// TestCanaryNotAbortedByAStatusFromTheFuture: a status written to the
// hosts topic dated 2099 claims the canary failed 1,000 of 1,000 records.
// This host's canary is healthy (0 of 500 failed). The canary keeps
// running (before, that status was live until 2099 and the canary was
// aborted on the next heartbeat, 5 s).
func TestCanaryNotAbortedByAStatusFromTheFuture(t *testing.T) {
	h := newCanaryHost(t, func(stable, canary string) map[string]registry.Counts {
		return map[string]registry.Counts{stable: {Records: 1500}, canary: {Records: 500}}
	})
	h.write(t, h.reg.Hosts, "forged", registry.HostStatus{Host: "forged", Pipelines: map[string]string{"p": h.stable}, At: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC),
		Versions: map[string]map[string]registry.Counts{"p": {h.canary: {Records: 1000, Failed: 1000}}}})
	h.sync(t)
	if running, why := h.check(t); !running {
		t.Fatalf("a healthy canary aborted by a status dated 2099: %s", why)
	}
}

// TestCanaryFailingHereNotKeptAliveByForgedSuccesses: this host's canary
// fails every record (100 of 100); a live status written to the hosts
// topic claims the canary decided 10^12 records without a failure. The
// canary is aborted on this host's own counts, and the reason says so
// (before, the forged records diluted the fleet's rate to 10^-10 and the
// canary ran on).
func TestCanaryFailingHereNotKeptAliveByForgedSuccesses(t *testing.T) {
	h := newCanaryHost(t, func(stable, canary string) map[string]registry.Counts {
		return map[string]registry.Counts{stable: {Records: 1500}, canary: {Records: 100, Failed: 100}}
	})
	h.write(t, h.reg.Hosts, "forged", registry.HostStatus{Host: "forged", Pipelines: map[string]string{"p": h.stable}, At: time.Now().UTC(),
		Versions: map[string]map[string]registry.Counts{"p": {h.canary: {Records: 1e12}}}})
	h.sync(t)
	running, why := h.check(t)
	t.Logf("aborted: %s", why)
	if running {
		t.Fatal("a canary failing every record here kept running beside forged successes")
	}
}
