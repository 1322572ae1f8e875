package admin

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// A rollback racing a deploy of the same pipeline: after every round the
// manifest names the version that runs (in memory and on disk), and no
// request is answered 500 (a failure after the swap).
func TestDeployRollbackRaceKeepsManifestTrue(t *testing.T) {
	srv, d, store := newTestAPI(t)
	var versions [][]byte
	for i := range 3 {
		v := append(append([]byte{}, goodModule...), fmt.Sprintf(" v%d", i)...)
		versions = append(versions, v)
		if code, body := do(t, srv, "POST", "/v1/pipelines/p/modules?deploy=true", testToken, "application/wasm", v); code != 201 {
			t.Fatalf("upload v%d: %d %s", i, code, body)
		}
	}
	d.mu.Lock()
	d.delay = 2 * time.Millisecond
	d.mu.Unlock()
	for round := range 40 {
		target := Digest(versions[round%len(versions)])
		var wg sync.WaitGroup
		codes := make([]int, 2)
		bodies := make([]string, 2)
		wg.Add(2)
		go func() {
			defer wg.Done()
			codes[0], bodies[0] = do(t, srv, "POST", "/v1/pipelines/p/deploy", testToken, "application/json", []byte(`{"digest": "`+target+`"}`))
		}()
		go func() {
			defer wg.Done()
			codes[1], bodies[1] = do(t, srv, "POST", "/v1/pipelines/p/rollback", testToken, "", nil)
		}()
		wg.Wait()
		for i, what := range []string{"deploy", "rollback"} {
			if codes[i] != http.StatusOK && codes[i] != http.StatusConflict {
				t.Errorf("round %d: %s answered %d: %s", round, what, codes[i], bodies[i])
			}
		}
		running := Digest(d.running())
		if a, _ := store.Active("p"); a != running {
			t.Fatalf("round %d: the manifest names %s, %s runs", round, short(a), short(running))
		}
		onDisk, err := OpenStore(store.dir, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if a, _ := onDisk.Active("p"); a != running {
			t.Fatalf("round %d: manifest.json names %s, %s runs", round, short(a), short(running))
		}
	}
}

// When recording a deploy in the manifest fails after the swap, the earlier
// version is swapped back: what runs is what the manifest says, and the
// answer says the deploy was undone.
func TestDeployNotRecordedIsUndone(t *testing.T) {
	srv, d, store := newTestAPI(t)
	v1 := append(append([]byte{}, goodModule...), " v1"...)
	v2 := append(append([]byte{}, goodModule...), " v2"...)
	if code, body := do(t, srv, "POST", "/v1/pipelines/p/modules?deploy=true", testToken, "application/wasm", v1); code != 201 {
		t.Fatalf("upload v1: %d %s", code, body)
	}
	if code, body := do(t, srv, "POST", "/v1/pipelines/p/modules", testToken, "application/wasm", v2); code != 201 {
		t.Fatalf("upload v2: %d %s", code, body)
	}
	// manifest.json becomes a non-empty directory: renaming over it fails,
	// even for root.
	man := filepath.Join(store.dir, "manifest.json")
	if err := os.Remove(man); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(man, "blocker"), 0o755); err != nil {
		t.Fatal(err)
	}
	code, body := do(t, srv, "POST", "/v1/pipelines/p/deploy", testToken, "application/json", []byte(`{"digest": "`+Digest(v2)+`"}`))
	if code != http.StatusInternalServerError || !strings.Contains(body, "deploy undone: recording it in the manifest failed") || !strings.Contains(body, short(Digest(v1))+" was deployed again") {
		t.Fatalf("deploy with a broken manifest: %d %s", code, body)
	}
	if !bytes.Equal(d.running(), v1) {
		t.Fatalf("%s runs after an undone deploy, want v1", d.running())
	}
	if a, _ := store.Active("p"); a != Digest(v1) {
		t.Fatalf("the manifest names %s, want v1", short(a))
	}
	if d.deploys() != 3 {
		t.Fatalf("%d deploys, want 3 (v1, v2, v1 again)", d.deploys())
	}
}
