package admin

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wasmstream/wasmstream/scheduler/registry"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// fleetHost is one host of a fleet test: its admin API on a registry of
// the in-process broker, applying what it reads, as assembly wires it.
type fleetHost struct {
	srv   *httptest.Server
	api   *API
	reg   *registry.Registry
	d     *fakeDeployer
	store *Store
}

// openRegistry opens host's registry (not started) on brokers.
func openRegistry(t *testing.T, brokers []string, host string) *registry.Registry {
	t.Helper()
	reg, err := registry.Open(context.Background(), registry.Config{Brokers: brokers, ClientID: "test", Prefix: "fleet", HostID: host, MaxModuleBytes: 1024}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	return reg
}

// newFleetHost starts host, running first as pipeline p's version.
func newFleetHost(t *testing.T, brokers []string, host string, first []byte) *fleetHost {
	t.Helper()
	srv, d, store, api := newTestAPIWith(t, io.Discard, nil)
	digest, err := store.Put("p", "config", first)
	if err == nil {
		err = store.Activate("p", digest)
	}
	if err != nil {
		t.Fatal(err)
	}
	reg := openRegistry(t, brokers, host)
	api.UseRegistry(reg)
	reg.OnDeploy(api.Apply)
	reg.Running(context.Background(), "p", digest, "", nil)
	reg.Start()
	return &fleetHost{srv, api, reg, d, store}
}

func module(v string) []byte { return append(append([]byte{}, goodModule...), " "+v...) }

// TestFleetRollbackSuperseded: a rollback through host A's API waiting for
// every live host (?wait=all), and another host's deploy written right
// after it: the rollback's outcome is known at once (superseded) and the
// API says so with 409 and the deployment that replaced it, instead of
// waiting its two minutes for a version no host will run and answering
// 504.
func TestFleetRollbackSuperseded(t *testing.T) {
	brokers := kafkatest.Fake(t)
	v1, v2, v3 := module("v1"), module("v2"), module("v3")
	a := newFleetHost(t, brokers, "host-a", v1)
	// Host B runs p but applies nothing (it is slow, say): it will never
	// run the version rolled back to.
	b := openRegistry(t, brokers, "host-b")
	b.Running(context.Background(), "p", Digest(v2), "", nil)
	b.Start()
	if code, body := do(t, a.srv, "POST", "/v1/pipelines/p/modules?deploy=true", testToken, "application/wasm", v2); code != 201 {
		t.Fatalf("deploy v2: %d %s", code, body)
	}

	type answer struct {
		code int
		body string
		took time.Duration
	}
	res := make(chan answer, 1)
	start := time.Now()
	go func() {
		code, body := do(t, a.srv, "POST", "/v1/pipelines/p/rollback?wait=all", testToken, "", nil)
		res <- answer{code, body, time.Since(start)}
	}()
	kafkatest.Eventually(t, 30*time.Second, "the rollback in the registry", func() bool {
		d, ok := b.Deployment("p")
		return ok && d.Rollback
	})
	cur, _ := b.Deployment("p")
	if _, err := b.Publish(context.Background(), registry.Deployment{Pipeline: "p", Digest: Digest(v3), History: append(cur.History, cur.Digest)}, v3); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-res:
		t.Logf("superseded rollback answered in %s: %d %s", r.took.Round(time.Millisecond), r.code, r.body)
		if r.code != http.StatusConflict || !strings.Contains(r.body, "superseded") || !strings.Contains(r.body, Digest(v3)[:12]) || !strings.Contains(r.body, "host-b") {
			t.Fatalf("superseded rollback: %d %s", r.code, r.body)
		}
		if r.took > 10*time.Second {
			t.Fatalf("superseded rollback answered after %s", r.took)
		}
	case <-time.After(applyWait + 30*time.Second):
		t.Fatal("no answer")
	}
	// Host A runs the deployment that superseded the rollback.
	kafkatest.Eventually(t, 30*time.Second, "host A on v3", func() bool {
		d, _ := a.store.Active("p")
		return d == Digest(v3)
	})
}
