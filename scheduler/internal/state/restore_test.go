package state

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// A restore waits out a broker that died under it: the dial error franz-go
// returns for the dead leader (inside kadm's shard errors) is retried
// until state.restore_timeout, as a retriable Kafka error is. Before, only
// kerr.IsRetriable was asked, which says no to it, and the pipeline failed
// (TestClusterKills/state_exactly_once: "restoring partition 0 …: end
// offset: request ListOffsets has 1 separate shard errors, first: unable to
// dial: … connection reset by peer").
func TestRestoreRetriesADeadBroker(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNRESET)}
	shard := &kadm.ShardErrors{Name: "ListOffsets", Errs: []kadm.ShardError{{Err: fmt.Errorf("unable to dial: %w", dial)}}, AllFailed: true}
	if kerr.IsRetriable(shard) {
		t.Fatal("kerr.IsRetriable took the dial error as retriable: this test no longer shows anything")
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{shard, true},
		{kerr.UnknownTopicOrPartition, true},
		{&kadm.ShardErrors{Name: "ListOffsets", Errs: []kadm.ShardError{{Err: kerr.TopicAuthorizationFailed}}}, false},
		{context.DeadlineExceeded, false},
		{kgo.ErrClientClosed, false},
	} {
		if got := restoreRetriable(c.err); got != c.want {
			t.Errorf("restoreRetriable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestStateRestoreTime measures a full restore of one partition's store
// from a changelog of 100,000 keys (the in-process broker; the figure for
// BENCHMARKS.md), through the clients a pipeline gives its stores.
func TestStateRestoreTime(t *testing.T) {
	if testing.Short() {
		t.Skip("produces 100k records")
	}
	brokers := kafkatest.Fake(t)
	const changelog = "g.p.changelog"
	kafkatest.CreateTopic(t, brokers, 1, "in", changelog)
	const n = 100_000
	cl := kafkatest.Client(t, brokers, kgo.ProducerLinger(5*time.Millisecond))
	recs := make([]*kgo.Record, 0, n)
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: changelog, Partition: 0, Key: []byte(fmt.Sprintf("key-%06d", i)), Value: []byte(fmt.Sprint(i))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dial := func(opts ...kgo.Opt) (*kgo.Client, error) {
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	}
	s := NewStores(Config{Pipeline: "p", Input: "in", Limits: Limits{Changelog: changelog}}, kafkatest.Client(t, brokers), dial, nil, slog.New(slog.DiscardHandler))
	store, err := statestore.Open(filepath.Join(t.TempDir(), "restore.db"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ps := &partStore{store: store}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.restore(ctx, ps, 0); err != nil {
		t.Fatal(err)
	}
	if ps.restored != n || store.Keys() != n {
		t.Fatalf("restored %d records, %d keys; want %d", ps.restored, store.Keys(), n)
	}
	if next, _ := store.Next(); next != n {
		t.Fatalf("store reflects the changelog up to %d, want %d", next, n)
	}
	t.Logf("full restore of %d keys: %s (%.0f records/s), store %d bytes", n, ps.took, n/ps.took.Seconds(), store.Size())
}
