package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/registry"
	"github.com/wasmstream/wasmstream/scheduler/registry/rollout"
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
	reg, err := registry.Open(context.Background(), registry.Config{Base: []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID("test")}, Prefix: "fleet", HostID: host, MaxModuleBytes: 1024}, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
	case <-time.After(rollout.ApplyWait + 30*time.Second):
		t.Fatal("no answer")
	}
	// Host A runs the deployment that superseded the rollback.
	kafkatest.Eventually(t, 30*time.Second, "host A on v3", func() bool {
		d, _ := a.store.Active("p")
		return d == Digest(v3)
	})
}

// floodHosts writes n live statuses of phantom hosts running p at digest,
// as anyone who may write the hosts topic can, and waits until the
// registry read them.
func floodHosts(t *testing.T, brokers []string, reg *registry.Registry, n int, digest string) {
	t.Helper()
	cl := kafkatest.Client(t, brokers)
	var recs []*kgo.Record
	for i := range n {
		h := registry.HostStatus{Host: fmt.Sprintf("phantom-%05d", i), Pipelines: map[string]string{"p": digest}, At: time.Now().UTC().Add(time.Hour)}
		b, _ := json.Marshal(h)
		recs = append(recs, &kgo.Record{Topic: reg.Hosts, Key: []byte(h.Host), Value: b})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	kafkatest.Eventually(t, time.Minute, "the phantom statuses read", func() bool {
		return int64(len(reg.HostsStatus()))+reg.IgnoredStatuses() >= int64(n)
	})
}

// TestFleetListsBoundedHosts: 50,000 phantom hosts written to the hosts
// topic, dated an hour ahead (live until then before statuses from the
// future were refused). GET /v1/pipelines stays small: the phantoms are
// not live, and of live hosts at most MaxListedHosts are listed, with a
// count of the others. Measured: 4,650,616 bytes before, now a few KB.
func TestFleetListsBoundedHosts(t *testing.T) {
	brokers := kafkatest.Fake(t)
	v1 := module("v1")
	a := newFleetHost(t, brokers, "host-a", v1)
	floodHosts(t, brokers, a.reg, 50000, Digest(v1))
	_, body := do(t, a.srv, "GET", "/v1/pipelines", testToken, "", nil)
	t.Logf("50,000 phantom hosts dated ahead: GET /v1/pipelines is %d bytes", len(body))
	if len(body) > 64<<10 {
		t.Fatalf("GET /v1/pipelines: %d bytes", len(body))
	}
	// Live phantoms (dated now): at most MaxHosts kept, MaxListedHosts listed.
	cl := kafkatest.Client(t, brokers)
	var recs []*kgo.Record
	for i := range 5000 {
		h := registry.HostStatus{Host: fmt.Sprintf("live-%05d", i), Pipelines: map[string]string{"p": Digest(v1)}, At: time.Now().UTC()}
		b, _ := json.Marshal(h)
		recs = append(recs, &kgo.Record{Topic: a.reg.Hosts, Key: []byte(h.Host), Value: b})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var views []PipelineView
	kafkatest.Eventually(t, 30*time.Second, "the live phantoms read", func() bool {
		_, body = do(t, a.srv, "GET", "/v1/pipelines", testToken, "", nil)
		views = nil
		return json.Unmarshal([]byte(body), &views) == nil && views[0].Fleet.LiveHosts >= registry.MaxHosts-1
	})
	f := views[0].Fleet
	t.Logf("5,000 live phantom hosts: GET /v1/pipelines is %d bytes; %d live hosts kept, %d listed, %d not listed", len(body), f.LiveHosts, len(f.Hosts), f.NotListed)
	if len(f.Hosts) != MaxListedHosts || f.NotListed != f.LiveHosts-MaxListedHosts || f.LiveHosts > registry.MaxHosts || len(body) > 64<<10 {
		t.Fatalf("listing of live phantoms: %d listed, %d not, %d live, %d bytes", len(f.Hosts), f.NotListed, f.LiveHosts, len(body))
	}
}
