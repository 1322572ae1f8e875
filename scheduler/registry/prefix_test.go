//go:build integration

package registry

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// registryTopics lists the topics of brokers that begin with one of
// prefixes, and deletes them when the test ends.
func registryTopics(t *testing.T, adm *kadm.Client, prefixes ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range ts.Names() {
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				out = append(out, name)
			}
		}
	}
	return out
}

// TestRegistryTopicsStartWithTheGroup: with the default prefix the
// registry's topics are <kafka.group>.registry.modules, .deploys and
// .hosts — inside the <kafka.group>. prefix the README's ACLs grant —
// and none of the previous default's wasmstream.<kafka.group>.* are made
// (before: with group sec-app the host asked for wasmstream.sec-app.*).
// A fleet whose registry is in the previous default's topics keeps it
// there: a host opening with the default finds the deployment written
// there, says so naming admin.registry_topic_prefix, and creates no topic
// of the new names.
func TestRegistryTopicsStartWithTheGroup(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	ctx := context.Background()
	stamp := time.Now().UnixNano()

	// A new fleet.
	g := fmt.Sprintf("sec-app-%d", stamp)
	t.Cleanup(func() { adm.DeleteTopics(context.Background(), registryTopics(t, adm, g+".", "wasmstream."+g+".")...) })
	c := testConfig(brokers, g+".registry", "h1")
	c.OldPrefix = "wasmstream." + g
	r, err := Open(ctx, c, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if r.Prefix() != g+".registry" || r.Modules != g+".registry.modules" || r.Deploys != g+".registry.deploys" || r.Hosts != g+".registry.hosts" {
		t.Fatalf("registry topics %s %s %s (prefix %s), want %s.registry.*", r.Modules, r.Deploys, r.Hosts, r.Prefix(), g)
	}
	made := registryTopics(t, adm, g+".", "wasmstream."+g+".")
	if strings.Join(made, ",") != strings.Join([]string{g + ".registry.deploys", g + ".registry.hosts", g + ".registry.modules"}, ",") {
		t.Fatalf("topics made for group %s: %v, want only %s.registry.deploys, .hosts, .modules", g, made, g)
	}

	// A fleet that ran before: its registry is in wasmstream.<group>.*.
	g2 := fmt.Sprintf("old-app-%d", stamp)
	t.Cleanup(func() {
		adm.DeleteTopics(context.Background(), registryTopics(t, adm, g2+".", "wasmstream."+g2+".")...)
	})
	old, err := Open(ctx, testConfig(brokers, "wasmstream."+g2, "old-host"), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	v1 := []byte("\x00asm\x01\x00\x00\x00 version one")
	d := Deployment{Pipeline: "p", Digest: digestOf(v1), Size: len(v1), At: time.Now().UTC(), By: "old-host"}
	cl := kafkatest.Client(t, brokers)
	if err := cl.ProduceSync(ctx, append(moduleRecords(old.Modules, v1), deployRecord(t, old.Deploys, d))...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	old.Close()
	var logs syncLog
	c2 := testConfig(brokers, g2+".registry", "h2")
	c2.OldPrefix = "wasmstream." + g2
	r2, err := Open(ctx, c2, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if r2.Prefix() != "wasmstream."+g2 {
		t.Fatalf("a fleet whose registry is in the previous default's topics: prefix %s, want wasmstream.%s", r2.Prefix(), g2)
	}
	if got, ok := r2.Deployment("p"); !ok || got.Digest != d.Digest {
		t.Fatalf("the deployment written in the previous default's topics: %+v %v", got, ok)
	}
	if !strings.Contains(logs.String(), "admin.registry_topic_prefix=wasmstream."+g2) {
		t.Errorf("the log does not name admin.registry_topic_prefix:\n%s", logs.String())
	}
	if made := registryTopics(t, adm, g2+"."); len(made) > 0 {
		t.Errorf("topics of the new names made beside the fleet's registry: %v", made)
	}
}

// syncLog is a log written from the registry's goroutines and read by the
// test.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
