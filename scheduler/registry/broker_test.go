//go:build integration

package registry

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// Registry readers on the real broker when a transactional writer (an
// exactly-once mirror of the registry from another cluster, say) wrote to
// the registry topics: each of its transactions ends with a commit marker,
// an offset that holds no record.

// mirror writes recs in one committed transaction, as an exactly-once
// mirror does: the topics end with a commit marker.
func mirror(t *testing.T, brokers []string, txnID string, recs ...*kgo.Record) {
	t.Helper()
	cl := kafkatest.Client(t, brokers, kgo.TransactionalID(txnID), kgo.ProducerBatchMaxBytes(ChunkBytes+64<<10))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
}

// TestRegistryReadsPastTransactionMarkers: a module and a deployment
// written by a transactional writer and committed. A host starting then
// reads the deploys topic to its end and the module from the modules topic
// in seconds, though each topic's last offset is a marker; following the
// topics, it applies a second such deployment, reading its module, in
// seconds too.
func TestRegistryReadsPastTransactionMarkers(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	prefix := fmt.Sprintf("regtxn-%d", time.Now().UnixNano())
	ctx := context.Background()
	r0, err := Open(ctx, testConfig(brokers, prefix, "creator"), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	modules, deploys := r0.Modules, r0.Deploys
	r0.Close()

	v1 := bytes.Repeat([]byte("v1"), ChunkBytes) // two chunks
	d1 := Deployment{Pipeline: "p", Digest: digestOf(v1), At: time.Now().UTC(), By: "mirror", Size: len(v1)}
	mirror(t, brokers, prefix+"-mirror", append(moduleRecords(modules, v1), deployRecord(t, deploys, d1))...)

	start := time.Now()
	octx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	r, err := Open(octx, testConfig(brokers, prefix, "h1"), quietLog())
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Open after %s: %v", took.Round(time.Millisecond), err)
	}
	defer r.Close()
	if got, ok := r.Deployment("p"); !ok || got.Digest != d1.Digest {
		t.Fatalf("deployment read at start: %+v, %v", got, ok)
	}
	if took > 10*time.Second {
		t.Fatalf("Open took %s", took)
	}
	start = time.Now()
	mctx, mcancel := context.WithTimeout(ctx, 30*time.Second)
	defer mcancel()
	wasm, err := r.Module(mctx, d1.Digest, d1.Size)
	mtook := time.Since(start)
	if err != nil || !bytes.Equal(wasm, v1) {
		t.Fatalf("Module after %s: %v", mtook.Round(time.Millisecond), err)
	}
	t.Logf("start: deploys read in %s, the module in %s", took.Round(time.Millisecond), mtook.Round(time.Millisecond))

	// Following: a second deployment, its module read by the apply.
	applied := make(chan time.Duration, 1)
	var pubAt atomic.Int64
	r.OnDeploy(func(_ context.Context, d Deployment) {
		mctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if _, err := r.Module(mctx, d.Digest, d.Size); err != nil {
			t.Errorf("Module in apply: %v", err)
		}
		applied <- time.Since(time.Unix(0, pubAt.Load()))
	})
	r.Start()
	v2 := bytes.Repeat([]byte("v2"), ChunkBytes/2+10)
	d2 := Deployment{Pipeline: "p", Digest: digestOf(v2), History: []string{d1.Digest}, At: time.Now().UTC(), By: "mirror", Size: len(v2)}
	pubAt.Store(time.Now().UnixNano())
	mirror(t, brokers, prefix+"-mirror", append(moduleRecords(modules, v2), deployRecord(t, deploys, d2))...)
	select {
	case d := <-applied:
		t.Logf("a mirrored deployment applied (its module read) %s after it was written", d.Round(time.Millisecond))
		if d > 10*time.Second {
			t.Fatalf("applied after %s", d)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a mirrored deployment not applied within 60 s")
	}
}

// TestRegistryHeartbeatsWhileApplying: while a deployment is being applied
// (a module being read and compiled), the host keeps writing its status
// every heartbeat interval and other pipelines' deployments are applied.
func TestRegistryHeartbeatsWhileApplying(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	prefix := fmt.Sprintf("regbeat-%d", time.Now().UnixNano())
	ctx := context.Background()
	r, err := Open(ctx, testConfig(brokers, prefix, "h1"), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	release := make(chan struct{})
	defer close(release)
	other := make(chan struct{}, 1)
	r.OnDeploy(func(_ context.Context, d Deployment) {
		if d.Pipeline == "slow" {
			<-release // a module read or compile that takes long
			return
		}
		other <- struct{}{}
	})
	r.Start()
	watch, err := Open(ctx, testConfig(brokers, prefix, "watcher"), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	watch.Start()
	digest := digestOf([]byte("x"))
	if _, err := r.Publish(ctx, Deployment{Pipeline: "slow", Digest: digest}, nil); err != nil {
		t.Fatal(err)
	}
	since := time.Now()
	if _, err := r.Publish(ctx, Deployment{Pipeline: "fast", Digest: digest}, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-other:
	case <-time.After(20 * time.Second):
		t.Fatal("another pipeline's deployment not applied while the first one's apply runs")
	}
	// Two heartbeats later than the deployment, seen from another host.
	kafkatest.Eventually(t, 4*HeartbeatInterval, "h1's status written while it applies a deployment", func() bool {
		for _, h := range watch.HostsStatus() {
			if h.Host == "h1" && h.At.After(since.Add(HeartbeatInterval)) {
				return true
			}
		}
		return false
	})
}

// TestModuleReadHoldsNoMoreThanTheBound: with admin.max_module_bytes of 1
// MiB (two chunks), 80 full chunks forged under a count of 4,096 for a
// digest are not held while the topic is read: the heap's peak during the
// read (live objects, sampled after a collection every 5 ms) stays within a
// few MiB, though the records total 40 MiB.
func TestModuleReadHoldsNoMoreThanTheBound(t *testing.T) {
	r, cl := openOn(t, kafkatest.RealBrokers(t), fmt.Sprintf("regbound-%d", time.Now().UnixNano()), func(c *Config) { c.MaxModuleBytes = 1 << 20 })
	d := digestOf([]byte("a module nobody wrote"))
	for i := range 80 {
		produce(t, cl, &kgo.Record{Topic: r.Modules, Key: chunkKey(d, i, 4096), Value: bytes.Repeat([]byte{byte(i)}, ChunkBytes)})
	}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		var m runtime.MemStats
		for {
			runtime.GC() // what is live, not the garbage of fetches read
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	_, err := r.Module(context.Background(), d, 0)
	close(stop)
	<-stopped
	grew := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("reading 80 forged chunks (40 MiB): %v; heap peak +%.1f MiB", err, float64(grew)/(1<<20))
	if err == nil {
		t.Fatal("a module read from forged chunks")
	}
	if grew > 16<<20 {
		t.Fatalf("the heap grew by %.1f MiB while reading forged chunks (bound: 1 MiB modules)", float64(grew)/(1<<20))
	}
}
