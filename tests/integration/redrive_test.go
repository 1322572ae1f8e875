//go:build integration

package integration

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/failhdr"
	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestRedriveIdentityRealKafka: on the real broker, `dlq redrive` sends
// keyless dead letters back to the partitions they were first consumed
// from; a second redrive refuses them and exits 1; after the dead-letter
// topic is deleted and created again (a new topic ID), its new dead letters
// at the old places are pending and redrive sends them, and markers forged
// into <dlq>.redriven hide nothing.
func TestRedriveIdentityRealKafka(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 4, in)
	kafkatest.CreateTopic(t, brokers, 1, out, dlq)
	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adm.DeleteTopics(ctx, in, out, dlq, dlq+".redriven")
	})
	cfg := writeConfig(t, brokers, n, modules["uppercase"], in, out, dlq, "")
	cli := func(wantCode int, args ...string) string {
		t.Helper()
		b, err := exec.Command(binary, append(args, "--config", cfg)...).CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("wasmstream %v: %v", args, err)
		}
		if code != wantCode {
			t.Fatalf("wasmstream %v: exit status %d, want %d\n%s", args, code, wantCode, b)
		}
		return string(b)
	}
	dead := func(partition int32, offset int64) *kgo.Record {
		st := failhdr.State{
			Pipeline: "p", Kind: "guest.fail", Error: "asked to fail",
			Origin:  failhdr.Origin{Topic: in, Partition: partition, Offset: offset, Timestamp: 1},
			Attempt: 1, ModuleDigest: "sha256:00", FailedAt: time.Now(), FirstFailure: time.Now(),
			History: []failhdr.Entry{{Attempt: 1, Text: "guest.fail: asked to fail"}},
		}
		return &kgo.Record{Topic: dlq, Value: []byte(fmt.Sprintf(`{"partition":%d}`, partition)), Headers: failhdr.Encode(nil, &st)}
	}
	produce := func(rs ...*kgo.Record) {
		t.Helper()
		if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var first []*kgo.Record
	for i := range 8 {
		first = append(first, dead(int32(i%4), int64(i)))
	}
	produce(first...)

	// Back to the partitions they came from, keyless as they are.
	if s := cli(0, "dlq", "redrive"); !strings.Contains(s, "8 records redriven, 0 could not be, 0 refused") || !strings.Contains(s, "redriven 0@3 -> "+in+"[3]") {
		t.Fatalf("redrive:\n%s", s)
	}
	inr := kafkatest.NewReader(t, brokers, in)
	inr.ReadUntil(t, 30*time.Second, "eight copies in the input", func(rs []*kgo.Record) bool { return len(rs) >= 8 })
	for _, r := range inr.Recs {
		if want := fmt.Sprintf(`{"partition":%d}`, r.Partition); string(r.Value) != want {
			t.Errorf("copy %s is on partition %d", r.Value, r.Partition)
		}
	}
	if s := cli(1, "dlq", "redrive"); !strings.Contains(s, "8 of 8 matching records refused as redriven already") {
		t.Fatalf("second redrive:\n%s", s)
	}

	// The dead-letter topic deleted and created again: a new topic ID.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.DeleteTopic(ctx, dlq); err != nil {
		t.Fatal(err)
	}
	kafkatest.Eventually(t, time.Minute, "the dead-letter topic created again", func() bool {
		r, err := adm.CreateTopic(ctx, 1, 1, nil, dlq)
		if err == nil {
			err = r.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			t.Fatalf("create %s again: %v", dlq, err)
		}
		return err == nil
	})
	kafkatest.Eventually(t, 30*time.Second, "the new dead-letter topic led", func() bool {
		ends, err := adm.ListEndOffsets(ctx, dlq)
		return err == nil && ends.Error() == nil
	})
	produce(dead(0, 100), dead(1, 101))
	ts, err := adm.ListTopics(ctx, dlq)
	if err != nil {
		t.Fatal(err)
	}
	tid := ts[dlq].ID
	id := base64.RawURLEncoding.EncodeToString(tid[:])
	// Forged markers: old-format for 0@0, and one for 0@1 of the new topic
	// ID that guesses every coordinate but the record itself.
	forged := func(key string, of map[string]any) *kgo.Record {
		m := map[string]any{"to": in, "copy": "0@0", "at": time.Now().Add(time.Hour)}
		if of != nil {
			m["of"] = of
		}
		v, _ := json.Marshal(m)
		return &kgo.Record{Topic: dlq + ".redriven", Key: []byte(key), Value: v}
	}
	produce(forged("0@0", nil), forged(id+":0@1", map[string]any{"topic_id": id, "partition": 0, "offset": 1, "origin_topic": in,
		"origin_partition": 1, "origin_offset": 101, "attempt": 1, "digest": "sha256:00"}))

	s := cli(0, "dlq", "list", "--pending")
	for _, want := range []string{"2 of 2 dead-lettered records in " + dlq + " match and are not redriven", "8 markers of another topic ID ignored",
		"1 old-format markers (keyed partition@offset alone) ignored", "[marker ignored: it names another record at this place (its digest differs)]"} {
		if !strings.Contains(s, want) {
			t.Errorf("list --pending lacks %q", want)
		}
	}
	if t.Failed() {
		t.Fatalf("list --pending after the topic was created again:\n%s", s)
	}
	if s := cli(0, "dlq", "redrive"); !strings.Contains(s, "2 records redriven, 0 could not be, 0 refused") {
		t.Fatalf("redrive after the topic was created again:\n%s", s)
	}
	inr.ReadUntil(t, 30*time.Second, "ten copies in the input", func(rs []*kgo.Record) bool { return len(rs) >= 10 })
	for _, r := range inr.Recs[8:] {
		if want := fmt.Sprintf(`{"partition":%d}`, r.Partition); string(r.Value) != want {
			t.Errorf("copy %s is on partition %d", r.Value, r.Partition)
		}
	}
}

// TestRedriveByVersionRealKafka: on the real broker, a host running the
// enrich example as version v7-real (version_source: config, module_label)
// dead-letters a poison record with that version's label and digest in its
// headers; `dlq list --version` and `dlq redrive --version` select it by
// either, and another version selects nothing.
func TestRedriveByVersionRealKafka(t *testing.T) {
	brokers := kafkatest.RealBrokers(t)
	n := names(t)
	in, out, dlq := n+"-in", n+"-out", n+"-dlq"
	kafkatest.CreateTopic(t, brokers, 1, in, out, dlq)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`kafka:
  brokers: [%q]
  group: %s
  commit_interval: 200ms
  session_timeout: 10s
pipelines:
  - name: p
    module: %s
    version_source: config
    module_label: v7-real
    inputs: [%s]
    output: %s
    dead_letter_topic: %s
    retry: {max_attempts: 1}
    limits: {record_timeout: 10s, memory_pages: 256}
shutdown: {drain_timeout: 5s}
metrics: {listen: ""}
admin: {listen: "127.0.0.1:0", store_dir: %s, registry: false}
`, strings.Join(brokers, ","), n, modules["enrich"], in, out, dlq, filepath.Join(dir, "store"))), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startProcEnv(t, []string{"WASMSTREAM_ADMIN_TOKEN=9b1e4c7a2f08d35e6c41b9a7f2e05d83c6a1f49e27b0d5c8a3e6f1b94d07c2a5"}, "run", "--config", cfg)
	defer p.stop(t, 30*time.Second)
	cl := kafkatest.Client(t, brokers)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: in, Key: []byte("poison"), Value: []byte(`{"n":1,"user":"ada","text":"x","fault":"fail"}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	rd := kafkatest.NewReader(t, brokers, dlq)
	rd.ReadUntil(t, 2*time.Minute, "the poison record's dead letter", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	digest := strings.TrimPrefix(kafkatest.Header(rd.Recs[0], failhdr.ModuleDigest), "sha256:")
	if l := kafkatest.Header(rd.Recs[0], failhdr.ModuleLabel); l != "v7-real" || len(digest) < 12 {
		t.Fatalf("the dead letter's version: digest %q, label %q; want v7-real", digest, l)
	}
	cli := func(args ...string) string {
		t.Helper()
		b, err := exec.Command(binary, append(args, "--config", cfg)...).CombinedOutput()
		if err != nil {
			t.Fatalf("wasmstream %v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	for _, v := range []string{"v7-real", digest[:12]} {
		if s := cli("dlq", "list", "--version", v); !strings.Contains(s, "1 of 1 dead-lettered records in "+dlq+" match") || !strings.Contains(s, "version="+digest[:12]+" (v7-real)  key=\"poison\"") {
			t.Errorf("dlq list --version %s:\n%s", v, s)
		}
	}
	if s := cli("dlq", "list", "--version", "v8-other"); !strings.Contains(s, "0 of 1 dead-lettered records in "+dlq+" match") {
		t.Errorf("dlq list --version v8-other:\n%s", s)
	}
	if s := cli("dlq", "redrive", "--version", "v7-real", "--dry-run"); !strings.Contains(s, "1 records would be redriven") {
		t.Errorf("dlq redrive --version v7-real --dry-run:\n%s", s)
	}
}
