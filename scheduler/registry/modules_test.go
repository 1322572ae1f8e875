package registry

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// openTest opens a registry on the in-process broker with cfg adjusted by
// tune, and a plain client to write its topics as anyone may who can.
func openTest(t *testing.T, tune func(*Config)) (*Registry, *kgo.Client) {
	t.Helper()
	return openOn(t, kafkatest.Fake(t), "reg", tune)
}

// openOn is openTest on brokers, the topics named from prefix.
func openOn(t *testing.T, brokers []string, prefix string, tune func(*Config)) (*Registry, *kgo.Client) {
	t.Helper()
	cfg := testConfig(brokers, prefix, "h1")
	if tune != nil {
		tune(&cfg)
	}
	r, err := Open(context.Background(), cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r, kafkatest.Client(t, brokers, kgo.ProducerBatchMaxBytes(ChunkBytes+64<<10))
}

func produce(t *testing.T, cl *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestModuleForgedChunksDoNotHideIt: a good module of three chunks, then
// records a writer of the modules topic forged for its digest: a chunk
// under another chunk count, a copy of chunk 1 with other bytes, a chunk of
// the wrong length. The module reads back whole, from a deployment that
// declares its size and from one that does not (an older host's).
func TestModuleForgedChunksDoNotHideIt(t *testing.T) {
	r, cl := openTest(t, nil)
	wasm := append([]byte("\x00asm\x01\x00\x00\x00"), bytes.Repeat([]byte("good"), ChunkBytes/2)...) // 3 chunks
	if err := r.PutModule(context.Background(), wasm); err != nil {
		t.Fatal(err)
	}
	d := digestOf(wasm)
	produce(t, cl,
		&kgo.Record{Topic: r.Modules, Key: chunkKey(d, 0, 4), Value: []byte("forged count")},
		&kgo.Record{Topic: r.Modules, Key: chunkKey(d, 1, 3), Value: bytes.Repeat([]byte("x"), ChunkBytes)},
		&kgo.Record{Topic: r.Modules, Key: chunkKey(d, 2, 3), Value: []byte("short")},
	)
	for _, size := range []int{len(wasm), 0} {
		got, err := r.Module(context.Background(), d, size)
		if err != nil || !bytes.Equal(got, wasm) {
			t.Fatalf("declared size %d: %v (%d bytes)", size, err, len(got))
		}
	}
	// A deployment declaring more than admin.max_module_bytes reads
	// nothing.
	if _, err := r.Module(context.Background(), d, 65<<20); err == nil || !strings.Contains(err.Error(), "admin.max_module_bytes") {
		t.Fatalf("a declared size over the bound: %v", err)
	}
}

func TestParseChunkKey(t *testing.T) {
	d := digestOf(nil)
	for _, c := range []struct {
		key  string
		ok   bool
		i, n int
	}{
		{d + "/0/1", true, 0, 1},
		{d + "/3/4", true, 3, 4},
		{d + "/4/4", false, 0, 0},
		{d + "/-1/4", false, 0, 0},
		{d + "/0/0", false, 0, 0},
		{d + "/0/1/2", false, 0, 0},
		{d + "/0x1/2", false, 0, 0},
		{"abc/0/1", false, 0, 0},
		{fmt.Sprintf("%s/%d/%d", d, 1, 1<<40), true, 1, 1 << 40},
	} {
		_, i, n, ok := parseChunkKey([]byte(c.key))
		if ok != c.ok || (ok && (i != c.i || n != c.n)) {
			t.Errorf("%q: %d %d %v", c.key, i, n, ok)
		}
	}
}

// TestPruneDeletesWhatNoDeploymentNames: modules deployed, in a history,
// as a canary, one no deployment names, a junk key, and the status of a
// host not heard of for two days. Within the retention nothing is deleted;
// past it, the unnamed module's chunks, the junk key and the stale status
// are tombstoned, and the named modules still read back.
func TestPruneDeletesWhatNoDeploymentNames(t *testing.T) {
	r, cl := openTest(t, nil)
	r.pruner.last = time.Now().Add(time.Hour) // no prune in the background: this test calls Prune
	r.Start()
	ctx := context.Background()
	mod := func(v string) []byte {
		return append([]byte("\x00asm\x01\x00\x00\x00"), bytes.Repeat([]byte(v), ChunkBytes/len(v)+1)...) // two chunks
	}
	deployed, history, canary, unnamed := mod("deployed"), mod("history"), mod("canary"), mod("unnamed")
	for _, m := range [][]byte{history, canary, unnamed} {
		if err := r.PutModule(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Publish(ctx, Deployment{Pipeline: "p", Digest: digestOf(deployed), History: []string{digestOf(history)},
		Canary: &Canary{Digest: digestOf(canary), Percent: 10}}, deployed); err != nil {
		t.Fatal(err)
	}
	produce(t, cl, &kgo.Record{Topic: r.Modules, Key: []byte("garbage"), Value: []byte("x")},
		statusRecord(t, r.Hosts, HostStatus{Host: "gone", At: time.Now().Add(-48 * time.Hour)}))
	kafkatest.Eventually(t, 10*time.Second, "the deployment and the statuses read", func() bool {
		_, ok := r.Deployment("p")
		return ok && len(r.HostsStatus()) == 2
	})
	if res, err := r.Prune(ctx, time.Hour); err != nil || res.Keys != 0 || res.Hosts != 1 {
		t.Fatalf("within the retention: %+v, %v", res, err)
	}
	res, err := r.Prune(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pruned: %+v", res)
	if res.Modules != 1 || res.Keys != 3 || res.Bytes != len(unnamed)+1 {
		t.Fatalf("pruned %+v", res)
	}
	if _, err := r.Module(ctx, digestOf(unnamed), len(unnamed)); err == nil {
		t.Fatal("the unnamed module still reads")
	}
	for _, m := range [][]byte{deployed, history, canary} {
		if got, err := r.Module(ctx, digestOf(m), len(m)); err != nil || !bytes.Equal(got, m) {
			t.Fatalf("a named module: %v", err)
		}
	}
	kafkatest.Eventually(t, 10*time.Second, "the stale status deleted", func() bool { return len(r.HostsStatus()) == 1 })
}
