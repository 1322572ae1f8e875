package partition

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/wasmstream/wasmstream/abi"
)

// What the host knows a topic refuses (topicLimits): a record over its
// max.message.bytes, counted as franz-go counts a batch of one, with room
// for the trace headers; a null key on a compacted topic. A topic it could
// not read is held to franz-go's default bound.
func TestTopicLimitsRefuse(t *testing.T) {
	l := TopicLimits{"small": {maxBytes: 2000}, "compacted": {maxBytes: 1_048_588, compacted: true}, "tiny": {maxBytes: 1}}
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
	if got := l.BatchMax("tiny"); got != 512 {
		t.Errorf("batchMax of a topic of 1 byte: %d", got)
	}
	if got := (TopicLimits(nil)).BatchMax("x"); got != defaultMaxMessageBytes {
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
