package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/abi"
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

// What the host knows a topic refuses (topicLimits): a record over its
// max.message.bytes, counted as franz-go counts a batch of one, with room
// for the trace headers; a null key on a compacted topic. A topic it could
// not read is held to franz-go's default bound.
func TestTopicLimitsRefuse(t *testing.T) {
	l := topicLimits{"small": {maxBytes: 2000}, "compacted": {maxBytes: 1_048_588, compacted: true}, "tiny": {maxBytes: 1}}
	fit := make([]byte, 2000-61-21-traceHeaderBytes)
	for _, tc := range []struct {
		topic   string
		key     []byte
		nullKey bool
		value   []byte
		hs      []abi.Header
		want    string
	}{
		{"small", nil, true, fit, nil, ""},
		{"small", []byte("k"), false, fit, nil, "over the topic's max.message.bytes (2000)"},
		{"small", nil, true, fit[:len(fit)-5], []abi.Header{{Key: "h", Value: []byte("v")}}, "over the topic's max.message.bytes"},
		{"compacted", []byte{}, false, []byte("v"), nil, ""},
		{"compacted", nil, true, []byte("v"), nil, "null key"},
		{"unknown", nil, true, make([]byte, defaultMaxMessageBytes), nil, "(1000012)"},
		{"unknown", nil, true, make([]byte, 100), nil, ""},
		{"tiny", nil, true, nil, nil, "(512)"}, // franz-go's floor
	} {
		got := l.refuses(tc.topic, tc.key, tc.nullKey, tc.value, tc.hs)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s, key %q (null %v), %d bytes: %q, want %q", tc.topic, tc.key, tc.nullKey, len(tc.value), got, tc.want)
		}
	}
	if got := l.batchMax("tiny"); got != 512 {
		t.Errorf("batchMax of a topic of 1 byte: %d", got)
	}
	if got := (topicLimits(nil)).batchMax("x"); got != defaultMaxMessageBytes {
		t.Errorf("batchMax unknown: %d", got)
	}
}

// refusedRecords: a refusal for what a record holds is remembered until the
// record runs again or its partition moves; bounded.
func TestRefusedRecords(t *testing.T) {
	for err, want := range map[error]bool{
		kerr.MessageTooLarge: true, fmt.Errorf("x: %w", kerr.InvalidRecord): true, kerr.InvalidTimestamp: true,
		kerr.NotLeaderForPartition: false, kerr.TopicAuthorizationFailed: false, context.Canceled: false,
	} {
		if refusedForRecord(err) != want {
			t.Errorf("refusedForRecord(%v) = %v", err, !want)
		}
	}
	var rr refusedRecords
	a, b := &kgo.Record{Topic: "in", Partition: 1, Offset: 5}, &kgo.Record{Topic: "in", Partition: 2, Offset: 5}
	if rr.take(a) != "" {
		t.Fatal("an empty set took a record")
	}
	rr.note(a, "too large")
	rr.note(b, "invalid")
	if got := rr.take(a); got != "too large" || rr.take(a) != "" {
		t.Fatalf("take: %q, then again", got)
	}
	rr.forget(map[string][]int32{"in": {2}})
	if rr.take(b) != "" || rr.n.Load() != 0 {
		t.Fatal("a moved partition's record kept")
	}
	for i := range maxRefused + 10 {
		rr.note(&kgo.Record{Topic: "in", Offset: int64(i)}, "x")
	}
	if int(rr.n.Load()) != maxRefused {
		t.Fatalf("%d remembered, bound %d", rr.n.Load(), maxRefused)
	}
}
