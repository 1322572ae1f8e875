package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// A deploy's label is kept with the version in the store, answered in the
// pipeline's view and handed to the Deployer (for its metrics); a label
// that is not one is refused with 400 and nothing is stored.
func TestAPIVersionLabels(t *testing.T) {
	srv, d, store := newTestAPI(t)
	v1, v2 := module("v1"), module("v2")
	for _, bad := range []string{"has%20space", "%1B%5B31m", strings.Repeat("x", 64)} {
		if code, body := do(t, srv, "POST", "/v1/pipelines/p/modules?deploy=true&label="+bad, testToken, "application/wasm", v1); code != http.StatusBadRequest || !strings.Contains(body, "label") {
			t.Fatalf("label %q: %d %s", bad, code, body)
		}
	}
	if d.deploys() != 0 || len(store.Versions("p")) != 0 {
		t.Fatal("a refused label stored or deployed something")
	}
	if code, body := do(t, srv, "POST", "/v1/pipelines/p/modules?deploy=true&label=v1.0", testToken, "application/wasm", v1); code != 201 {
		t.Fatalf("deploy v1: %d %s", code, body)
	}
	if code, body := do(t, srv, "POST", "/v1/pipelines/p/modules?deploy=true&label=v2.0-rc1", testToken, "application/wasm", v2); code != 201 {
		t.Fatalf("deploy v2: %d %s", code, body)
	}
	var v PipelineView
	_, body := do(t, srv, "GET", "/v1/pipelines/p", testToken, "", nil)
	json.Unmarshal([]byte(body), &v)
	if v.Label != "v2.0-rc1" || d.label(Digest(v2)) != "v2.0-rc1" || !strings.Contains(body, `"label": "v1.0"`) {
		t.Fatalf("view %s; deployer label %q", body, d.label(Digest(v2)))
	}
	// A rollback comes back on v1 with its label; a deploy by digest may
	// rename a version.
	if code, body := do(t, srv, "POST", "/v1/pipelines/p/rollback", testToken, "", nil); code != 200 || !strings.Contains(body, `"label": "v1.0"`) {
		t.Fatalf("rollback: %d %s", code, body)
	}
	req := `{"digest": "` + Digest(v2) + `", "label": "v2.0"}`
	if code, body := do(t, srv, "POST", "/v1/pipelines/p/deploy", testToken, "application/json", []byte(req)); code != 200 {
		t.Fatalf("deploy by digest: %d %s", code, body)
	}
	if got := store.Label(Digest(v2)); got != "v2.0" || d.label(Digest(v2)) != "v2.0" {
		t.Fatalf("renamed label %q (deployer %q)", got, d.label(Digest(v2)))
	}
}

// Across a fleet a label travels with the deployment: the host that did
// not take the deploy stores it with the module it reads from the registry
// and shows it; a label in the deploys topic that is not one (anyone who
// may write the topic) is dropped, never shown or made a metric label.
func TestFleetVersionLabels(t *testing.T) {
	brokers := kafkatest.Fake(t)
	v1, v2 := module("v1"), module("v2")
	a := newFleetHost(t, brokers, "host-a", v1)
	b := newFleetHost(t, brokers, "host-b", v1)
	if code, body := do(t, a.srv, "POST", "/v1/pipelines/p/modules?deploy=true&wait=all&label=v2", testToken, "application/wasm", v2); code != 201 {
		t.Fatalf("deploy v2: %d %s", code, body)
	}
	kafkatest.Eventually(t, 30*time.Second, "host B on v2 with its label", func() bool {
		return b.store.Label(Digest(v2)) == "v2" && b.d.label(Digest(v2)) == "v2"
	})
	var v PipelineView
	_, body := do(t, b.srv, "GET", "/v1/pipelines/p", testToken, "", nil)
	json.Unmarshal([]byte(body), &v)
	if v.Label != "v2" || v.Fleet == nil || v.Fleet.Label != "v2" {
		t.Fatalf("host B's view: %s", body)
	}
	cur, _ := a.reg.Deployment("p")
	forged := cur
	forged.Label, forged.At = "\x1b[2Jowned{x=\"1\"}", time.Now().UTC()
	val, _ := json.Marshal(forged)
	if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), &kgo.Record{Topic: a.reg.Deploys, Key: []byte("p"), Value: val}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	kafkatest.Eventually(t, 30*time.Second, "the forged deployment read", func() bool {
		d, _ := b.reg.Deployment("p")
		return d.At.Equal(forged.At)
	})
	if d, _ := b.reg.Deployment("p"); d.Label != "" {
		t.Fatalf("forged label kept: %q", d.Label)
	}
}
