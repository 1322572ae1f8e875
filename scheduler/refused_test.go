package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestExactlyOnceRefusedRecordFails: under exactly_once, a record whose
// changelog produce the broker refuses (the changelog's max.message.bytes
// lowered after the host read it, so the host's own check cannot know)
// aborts one transaction, then fails when it runs again: it reaches the
// dead-letter topic naming the refusal, and the counts go on exactly once
// without it. Before, it ran again into the same refusal in every
// transaction: the partition never moved past it.
func TestExactlyOnceRefusedRecordFails(t *testing.T) {
	t.Parallel() // owns its in-process broker; asserts no timing
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 2, "in", "out", "dlq")
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "count"), "in", "out", "dlq",
		fmt.Sprintf("    state: {enabled: true, dir: %q, max_value_bytes: 524288}\n    retry: {max_attempts: 1}\n    guarantee: exactly_once\n    transactions: {max_records: 200, interval: 50ms}", t.TempDir()), "")
	const n = 970
	want := map[string]int{}
	produce := func() {
		for i := 0; i < n; i++ {
			want[fmt.Sprintf("k%d", i%stateKeys)]++
		}
		kafkatest.Produce(t, brokers, "in", n, strconv.Itoa)
	}
	produce()
	r := startRunner(t, cfg)
	defer r.Stop(context.Background())
	rd := kafkatest.NewReader(t, brokers, "out")
	checkCounts(t, countUntil(t, r, rd, want), want)

	adm := kadm.NewClient(kafkatest.Client(t, brokers))
	setMax := func(v string) {
		t.Helper()
		resp, err := adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &v}}, cfg.Pipelines[0].State.Changelog)
		if err == nil {
			err = resp[0].Err
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	setMax("100")
	p := r.Pipelines()[0]
	aborted := p.Snapshot().TxnAborted
	bad := &kgo.Record{Topic: "in", Key: []byte("k3"), Value: []byte("pad"), Headers: []kgo.RecordHeader{{Key: "count.pad", Value: []byte("500000")}}}
	if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), bad).FirstErr(); err != nil {
		t.Fatal(err)
	}
	dlq := kafkatest.NewReader(t, brokers, "dlq")
	dlq.ReadUntil(t, time.Minute, "the refused record dead-lettered", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	if e := kafkatest.Header(dlq.Recs[0], "wasmstream.error"); !strings.Contains(e, "refused") || !strings.Contains(e, "MESSAGE_TOO_LARGE") {
		t.Errorf("dead letter's error %q, want it to say the broker refused it (MESSAGE_TOO_LARGE)", e)
	}
	if got := p.Snapshot().TxnAborted - aborted; got < 1 || got > 3 {
		t.Errorf("%d transactions aborted, want 1 (the refusal) or a few", got)
	}
	setMax("1000012")
	produce()
	top, seen := countState(t, rd, want)
	checkCounts(t, top, want)
	for kc, c := range seen {
		if c != 1 {
			t.Errorf("%s appears %d times", kc, c)
		}
	}
	t.Logf("1 record refused by the broker: %d transaction(s) aborted, then dead-lettered: %q", p.Snapshot().TxnAborted-aborted, kafkatest.Header(dlq.Recs[0], "wasmstream.error"))
}
