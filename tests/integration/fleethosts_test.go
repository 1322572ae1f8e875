//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fleetHostConfig writes host i's config in dir (host-<i>.yaml) and
// returns its path: the config at base (writeConfig's) with the admin API
// listening on addr and a module store of the host's own (store-<i>), as
// the hosts of one fleet are run; edit, when not nil, changes the YAML
// further (a pipeline's module, a metrics address). The fleet and GitOps
// tests make their hosts with it alone, so that how a fleet host is
// configured is written once.
func fleetHostConfig(t *testing.T, base, dir string, i int, addr string, edit func(y string) string) string {
	t.Helper()
	b, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	const off = "admin:\n  enabled: false"
	if !strings.Contains(string(b), off) {
		t.Fatalf("%s has no %q to give host %d its admin API", base, off, i)
	}
	y := strings.Replace(string(b), off, fmt.Sprintf("admin:\n  listen: %s\n  store_dir: %s", addr, filepath.Join(dir, fmt.Sprint("store-", i))), 1)
	if edit != nil {
		y = edit(y)
	}
	cfg := filepath.Join(dir, fmt.Sprintf("host-%d.yaml", i))
	if err := os.WriteFile(cfg, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// load is a continuous input for tests that change a running host or
// fleet: one record each tick, record i to partition i % parts with key
// k<i> and the value its value function gives (v-<i> when nil), each
// produced synchronously. Its goroutine is the test's: Stop ends it, and
// the test's cleanup does if the test ends first, so that no produce
// reports into a finished test.
type load struct {
	produced atomic.Int64
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once
}

func startLoad(t *testing.T, cl *kgo.Client, topic string, parts int, every time.Duration, value func(i, p int) string) *load {
	l := &load{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			p := i % parts
			v := fmt.Sprintf("v-%d", i)
			if value != nil {
				v = value(i, p)
			}
			r := &kgo.Record{Topic: topic, Partition: int32(p), Key: []byte(fmt.Sprint("k", i)), Value: []byte(v)}
			if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			l.produced.Add(1)
		}
	}()
	t.Cleanup(func() { l.Stop() })
	return l
}

// Produced is how many records the broker acknowledged so far.
func (l *load) Produced() int { return int(l.produced.Load()) }

// Stop ends the load, waits for its last produce and returns how many
// records were produced; it may be called again.
func (l *load) Stop() int {
	l.once.Do(func() { close(l.stop) })
	<-l.done
	return l.Produced()
}
