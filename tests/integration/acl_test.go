//go:build integration

package integration

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	wt "github.com/wasmstream/wasmstream/host/wasmtest"
	"github.com/wasmstream/wasmstream/scheduler"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
	"github.com/wasmstream/wasmstream/tests/logbuf"
)

// appACL is one of the least-privilege ACLs README.md lists ("ACLs the host
// needs"), for the principal User:app of the secure broker.
type appACL struct {
	name string
	b    *kadm.ACLBuilder
	// denied is what the host's error says without this ACL; optional
	// ACLs' absence is a warning (what was not done) instead.
	denied   string
	optional bool
}

// appACLs are README.md's kafka-acls commands for an application of group
// g whose pipelines read inputs and write outputs (dead-letter topics
// included).
func appACLs(g string, inputs, outputs []string) []appACL {
	p := "User:app"
	prefixed := kadm.ACLPatternPrefixed
	return []appACL{
		{"read the inputs", kadm.NewACLs().Allow(p).Topics(inputs...).Operations(kadm.OpRead, kadm.OpDescribe),
			fmt.Sprintf("DESCRIBE on topic %q (pipelines[0].inputs[0])", first(inputs)), false},
		{"write the outputs", kadm.NewACLs().Allow(p).Topics(outputs...).Operations(kadm.OpWrite, kadm.OpDescribe),
			fmt.Sprintf("DESCRIBE on topic %q (pipelines[0].output)", first(outputs)), false},
		{"the host's own topics", kadm.NewACLs().Allow(p).Topics(g+".").ResourcePatternType(prefixed).
			Operations(kadm.OpCreate, kadm.OpRead, kadm.OpWrite, kadm.OpDescribe, kadm.OpDescribeConfigs),
			fmt.Sprintf("DESCRIBE on topic %q (pipelines[0].retry)", g+".alo.retry.1s"), false},
		{"the groups", kadm.NewACLs().Allow(p).Groups(g+".").ResourcePatternType(prefixed).Operations(kadm.OpRead, kadm.OpDescribe),
			fmt.Sprintf("DESCRIBE, READ on group %q (pipelines[0].group)", g+".alo"), false},
		{"share groups' configs", kadm.NewACLs().Allow(p).Groups(g+".").ResourcePatternType(prefixed).Operations(kadm.OpAlterConfigs, kadm.OpDescribeConfigs),
			"could not set the share group's share.auto.offset.reset from kafka.start_offset (the host needs ALTER_CONFIGS on the group)", true},
		{"transactional ids", kadm.NewACLs().Allow(p).TransactionalIDs(g+".").ResourcePatternType(prefixed).Operations(kadm.OpWrite, kadm.OpDescribe),
			"deny this host's principal WRITE on its transactional id", false},
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func aclConfig(t *testing.T, s secureBroker, g string, topics map[string][2]string) string {
	y := fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  commit_interval: 200ms
  session_timeout: 10s
  tls: {enabled: true, ca_file: %q}
  sasl: {mechanism: SCRAM-SHA-512, username: app, password_file: %q}
pipelines:
  - name: alo
    module: %s
    inputs: [%s]
    output: %s
    dead_letter_topic: %s
    retry: {max_attempts: 3, backoff: [1s]}
  - name: eos
    module: %s
    inputs: [%s]
    output: %s
    dead_letter_topic: %s
    guarantee: exactly_once
  - name: state
    module: %s
    inputs: [%s]
    output: %s
    dead_letter_topic: %s
    guarantee: exactly_once
    retry: {max_attempts: 1}
    state: {enabled: true, dir: %q}
  - name: share
    module: %s
    inputs: [%s]
    output: %s
    dead_letter_topic: %s
    consume: share
    ordering: none
shutdown:
  drain_timeout: 5s
metrics:
  listen: 127.0.0.1:0
admin:
  enabled: false
`, s.saslSSL, g, s.file("ca.pem"), s.file("app.password"),
		modules["uppercase"], topics["alo"][0], topics["alo"][1], topics["alo"][1]+"-dlq",
		modules["uppercase"], topics["eos"][0], topics["eos"][1], topics["eos"][1]+"-dlq",
		modules["count"], topics["state"][0], topics["state"][1], topics["state"][1]+"-dlq", t.TempDir(),
		modules["uppercase"], topics["share"][0], topics["share"][1], topics["share"][1]+"-dlq")
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestLeastPrivilegeACLs runs at_least_once (with retry tiers),
// exactly_once, a stateful exactly_once and a share-group pipeline as a
// principal that has exactly README.md's ACLs, on a broker with
// StandardAuthorizer: every input's output arrives.
func TestLeastPrivilegeACLs(t *testing.T) {
	s := secureBrokers(t)
	plain := []string{s.plain}
	g := names(t)
	topics := map[string][2]string{}
	var inputs, outputs []string
	for _, p := range []string{"alo", "eos", "state", "share"} {
		in, out := "user-"+g+"-"+p+"-in", "user-"+g+"-"+p+"-out"
		topics[p] = [2]string{in, out}
		kafkatest.CreateTopic(t, plain, 2, in, out, out+"-dlq")
		inputs = append(inputs, in)
		outputs = append(outputs, out, out+"-dlq")
	}
	adm := kadm.NewClient(kafkatest.Client(t, plain))
	ctx, cancel := ctxTimeout(3 * time.Minute)
	defer cancel()
	for _, a := range appACLs(g, inputs, outputs) {
		if _, err := adm.CreateACLs(ctx, a.b); err != nil {
			t.Fatalf("ACL %s: %v", a.name, err)
		}
	}
	const count = 300
	for _, p := range []string{"alo", "eos", "state", "share"} {
		kafkatest.Produce(t, plain, topics[p][0], count, func(i int) string { return fmt.Sprintf("v-%05d", i) })
	}
	cfg, err := config.Load(aclConfig(t, s, g, topics), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := scheduler.NewRunner(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	defer r.Stop(ctx)
	for _, p := range []string{"alo", "eos", "state", "share"} {
		rd := kafkatest.NewReader(t, plain, topics[p][1])
		rd.ReadUntil(t, 2*time.Minute, p+" outputs", func(rs []*kgo.Record) bool { return len(rs) >= count })
	}
}

// TestLeastPrivilegeEachACLNeeded removes one of README.md's ACLs at a
// time: the host fails (at start, or through Runner.Failed) within a
// minute with an error naming the resource and the operation denied —
// never a hang or a crash loop.
func TestLeastPrivilegeEachACLNeeded(t *testing.T) {
	s := secureBrokers(t)
	plain := []string{s.plain}
	adm := kadm.NewClient(kafkatest.Client(t, plain))
	for i := range appACLs("x", nil, nil) {
		g := names(t)
		topics := map[string][2]string{}
		var inputs, outputs []string
		for _, p := range []string{"alo", "eos", "state", "share"} {
			in, out := "user-"+g+"-"+p+"-in", "user-"+g+"-"+p+"-out"
			topics[p] = [2]string{in, out}
			inputs = append(inputs, in)
			outputs = append(outputs, out, out+"-dlq")
		}
		acls := appACLs(g, inputs, outputs)
		t.Run(acls[i].name, func(t *testing.T) {
			for _, p := range []string{"alo", "eos", "state", "share"} {
				kafkatest.CreateTopic(t, plain, 1, topics[p][0], topics[p][1], topics[p][1]+"-dlq")
				kafkatest.Produce(t, plain, topics[p][0], 10, func(i int) string { return fmt.Sprintf("v-%05d", i) })
			}
			ctx, cancel := ctxTimeout(3 * time.Minute)
			defer cancel()
			for j, a := range acls {
				if j == i {
					continue
				}
				if _, err := adm.CreateACLs(ctx, a.b); err != nil {
					t.Fatalf("ACL %s: %v", a.name, err)
				}
			}
			cfg, err := config.Load(aclConfig(t, s, g, topics), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var logs logbuf.Buffer
			r, err := scheduler.NewRunner(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			if acls[i].optional {
				if err != nil {
					t.Fatalf("without the optional %q the host did not start: %v", acls[i].name, err)
				}
				r.Start()
				defer r.Stop(ctx)
				kafkatest.Eventually(t, time.Minute, "a warning of what was not done", func() bool { return strings.Contains(logs.String(), acls[i].denied) })
				t.Logf("without %q the host runs and warns (%s)", acls[i].name, time.Since(start).Round(time.Millisecond))
				return
			}
			if err == nil {
				r.Start()
				defer r.Stop(ctx)
				select {
				case err = <-r.Failed():
				case <-time.After(time.Minute):
					t.Fatalf("without %q the host neither failed nor stopped within a minute", acls[i].name)
				}
			}
			if !strings.Contains(err.Error(), acls[i].denied) {
				t.Errorf("without %q the error does not say %q:\n%v", acls[i].name, acls[i].denied, err)
			}
			t.Logf("without %q, after %s: %v", acls[i].name, time.Since(start).Round(time.Millisecond), err)
		})
	}
}

// TestLeastPrivilegeFleetDeploy: a host (the wasmstream process) with the
// admin API and the fleet registry, as a principal with exactly README.md's
// ACLs on <kafka.group>., runs its registry in <group>.registry.* (before:
// it asked for wasmstream.<group>.*, which those ACLs do not cover) and
// takes a deploy of a second build; with admin.registry_topic_prefix set
// to a prefix it has no ACL on, it stops at start naming the key.
func TestLeastPrivilegeFleetDeploy(t *testing.T) {
	s := secureBrokers(t)
	plain := []string{s.plain}
	g := names(t)
	in, out := "user-"+g+"-in", "user-"+g+"-out"
	kafkatest.CreateTopic(t, plain, 2, in, out, out+"-dlq")
	dir := t.TempDir()
	v1, v2 := filepath.Join(dir, "v1.wasm"), filepath.Join(dir, "v2.wasm")
	os.WriteFile(v1, wt.BuildGoGuest(t, "plugins/examples/uppercase", "-ldflags=-X main.version=1"), 0o644)
	os.WriteFile(v2, wt.BuildGoGuest(t, "plugins/examples/uppercase", "-ldflags=-X main.version=2"), 0o644)
	adm := kadm.NewClient(kafkatest.Client(t, plain))
	ctx, cancel := ctxTimeout(3 * time.Minute)
	defer cancel()
	acls := appACLs(g, []string{in}, []string{out, out + "-dlq"})
	for _, a := range acls {
		if _, err := adm.CreateACLs(ctx, a.b); err != nil {
			t.Fatalf("ACL %s: %v", a.name, err)
		}
	}
	admin := freePort(t)
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  commit_interval: 200ms
  session_timeout: 10s
  tls: {enabled: true, ca_file: %q}
  sasl: {mechanism: SCRAM-SHA-512, username: app, password_file: %q}
pipelines:
  - name: p
    module: %s
    inputs: [%s]
    output: %s
    dead_letter_topic: %s
    retry: {max_attempts: 1}
shutdown:
  drain_timeout: 5s
metrics:
  listen: 127.0.0.1:0
admin:
  listen: %s
  store_dir: %s
`, s.saslSSL, g, s.file("ca.pem"), s.file("app.password"), v1, in, out, out+"-dlq", admin, filepath.Join(dir, "store"))), 0o644)
	token := "WASMSTREAM_ADMIN_TOKEN=" + adminToken(g)

	// A registry prefix the principal has no ACL on (the previous
	// default, set by hand): a prompt stop naming the key.
	p := startProcEnv(t, []string{token}, "run", "--config", cfg, "--set", "admin.registry_topic_prefix=wasmstream."+g)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatal("with a registry prefix outside the ACLs the host did not stop within a minute")
	}
	if want := fmt.Sprintf("DESCRIBE on topic %q (admin.registry_topic_prefix", "wasmstream."+g+".deploys"); !strings.Contains(p.logText(), want) {
		t.Fatalf("with a registry prefix outside the ACLs the log does not say %q:\n%s", want, tail(p.logText(), 20))
	}

	// The default prefix: inside README.md's ACLs.
	p = startProcEnv(t, []string{token}, "run", "--config", cfg)
	kafkatest.Produce(t, plain, in, 200, func(i int) string { return fmt.Sprintf("v-%05d", i) })
	rd := kafkatest.NewReader(t, plain, out)
	rd.ReadUntil(t, 2*time.Minute, "version 1 outputs", func(rs []*kgo.Record) bool { return len(rs) >= 200 })
	o, err := cli(t, []string{token}, "deploy", "--pipeline", "p", "--wait-all", "--admin", "http://"+admin, v2)
	if err != nil || !strings.Contains(o, "every live host of the group runs it") {
		t.Fatalf("deploy --wait-all: %v\n%s", err, o)
	}
	kafkatest.Produce(t, plain, in, 200, func(i int) string { return fmt.Sprintf("w-%05d", i) })
	rd.ReadUntil(t, 2*time.Minute, "version 2 outputs", func(rs []*kgo.Record) bool {
		n := 0
		for _, r := range rs {
			if kafkatest.Header(r, "processor.version") == "2" {
				n++
			}
		}
		return n >= 200
	})
	if code := p.stop(t, time.Minute); code != 0 {
		t.Errorf("exit code %d", code)
	}
	ts, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{g + ".registry.modules", g + ".registry.deploys", g + ".registry.hosts"} {
		if !ts.Has(want) {
			t.Errorf("registry topic %s not made", want)
		}
	}
}
