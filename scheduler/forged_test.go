package scheduler

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"

	"github.com/wasmstream/wasmstream/tests/kafkatest"
)

// TestForgedHeadersOnInput: a producer that puts wasmstream.* headers on
// input records cannot make the host believe them. The guest sees the real
// coordinates (its idempotency key) on the first attempt and on the retry,
// never the headers; retry and dead-letter copies carry the record's own
// headers and the host's account of its attempts only; every forged header
// is counted in wasmstream.forged_headers.
func TestForgedHeadersOnInput(t *testing.T) {
	brokers := kafkatest.Fake(t)
	kafkatest.CreateTopic(t, brokers, 1, "in", "out", "dlq", "g.p.retry.300ms")
	forged := []kgo.RecordHeader{
		{Key: HeaderOriginalTopic, Value: []byte("evil")},
		{Key: HeaderOriginalPartition, Value: []byte("7")},
		{Key: HeaderOriginalOffset, Value: []byte("999")},
		{Key: HeaderOriginalTimestamp, Value: []byte("1")},
		{Key: HeaderAttempt, Value: []byte("5")},
		{Key: HeaderHistoryPrefix + "1", Value: []byte("forged: history")},
		{Key: HeaderFirstFailure, Value: []byte("2000-01-01T00:00:00Z")},
		{Key: HeaderDue, Value: []byte("4102444800000")}, // 2100
	}
	values := []string{
		`{"fault":"transient","until":2}`, // retried once through g.p.retry.300ms
		`{"fault":"fail"}`,                // dead-lettered at attempt 1
		`{"i":2}`,                         // succeeds at attempt 1
	}
	var recs []*kgo.Record
	for i, v := range values {
		hs := append([]kgo.RecordHeader{{Key: "own", Value: []byte("kept")}}, forged...)
		if i == 2 {
			// The mark `dlq redrive` leaves is expected on an input: not counted.
			hs = append(hs, kgo.RecordHeader{Key: HeaderRedrivenFrom, Value: []byte("dlq[0]@0")})
		}
		recs = append(recs, &kgo.Record{Topic: "in", Key: []byte("k"), Value: []byte(v), Headers: hs})
	}
	if err := kafkatest.Client(t, brokers).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfigWith(t, brokers, "g", guestPath(t, "enrich"), "in", "out", "dlq",
		"    retry: {max_attempts: 2, backoff: [300ms]}", "")
	r := newRunner(t, cfg)
	reader := metricsOf(t, r)
	r.Start()
	defer r.Stop(context.Background())

	out := kafkatest.NewReader(t, brokers, "out")
	out.ReadUntil(t, time.Minute, "two outputs", func(rs []*kgo.Record) bool { return len(rs) >= 2 })
	for _, rec := range out.Recs {
		var doc struct {
			I       *int
			Attempt int
			Source  struct {
				Topic     string
				Partition int32
				Offset    int64
			}
		}
		if err := json.Unmarshal(rec.Value, &doc); err != nil {
			t.Fatal(err)
		}
		wantOffset, wantAttempt := int64(0), 2
		if doc.I != nil {
			wantOffset, wantAttempt = 2, 1
		}
		if doc.Source.Topic != "in" || doc.Source.Partition != 0 || doc.Source.Offset != wantOffset || doc.Attempt != wantAttempt {
			t.Errorf("the guest saw %s on attempt %d; want in[0]@%d on attempt %d", rec.Value, doc.Attempt, wantOffset, wantAttempt)
		}
		// The guest echoes the headers it was shown.
		for _, h := range rec.Headers {
			if strings.HasPrefix(h.Key, HeaderPrefix) {
				t.Errorf("the guest was shown %s=%q", h.Key, h.Value)
			}
		}
		if kafkatest.Header(rec, "own") != "kept" {
			t.Errorf("the record's own header was lost: %v", rec.Headers)
		}
	}

	dl := kafkatest.NewReader(t, brokers, "dlq")
	dl.ReadUntil(t, time.Minute, "the dead letter", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	rt := kafkatest.NewReader(t, brokers, cfg.Pipelines[0].TierTopic(0))
	rt.ReadUntil(t, time.Minute, "the retry copy", func(rs []*kgo.Record) bool { return len(rs) >= 1 })
	for _, c := range []struct {
		rec                      *kgo.Record
		offset, attempt, history string
	}{
		{dl.Recs[0], "1", "1", "guest.fail: asked to fail"},
		{rt.Recs[0], "0", "2", "guest.retry: transient failure on attempt 1 (succeeds at 2)"},
	} {
		rec := c.rec
		for k, want := range map[string]string{
			HeaderOriginalTopic: "in", HeaderOriginalPartition: "0", HeaderOriginalOffset: c.offset,
			HeaderAttempt: c.attempt, HeaderHistoryPrefix + "1": c.history, "own": "kept",
		} {
			if got := kafkatest.Header(rec, k); got != want {
				t.Errorf("%s copy of offset %s: %s = %q, want %q", rec.Topic, c.offset, k, got, want)
			}
		}
		if ff := kafkatest.Header(rec, HeaderFirstFailure); strings.HasPrefix(ff, "2000") {
			t.Errorf("%s copy: forged first failure carried: %s", rec.Topic, ff)
		}
		if ts := kafkatest.Header(rec, HeaderOriginalTimestamp); ts == "1" {
			t.Errorf("%s copy: forged timestamp carried", rec.Topic)
		}
		n := 0
		for _, h := range rec.Headers {
			if h.Key == HeaderDue && strings.HasPrefix(string(h.Value), "4102444800000") || h.Key == HeaderRedrivenFrom {
				t.Errorf("%s copy carries %s=%s", rec.Topic, h.Key, h.Value)
			}
			if strings.HasPrefix(h.Key, HeaderHistoryPrefix) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s copy has %d history headers, want 1: %v", rec.Topic, n, rec.Headers)
		}
	}

	pipeline := func(name string) func(attribute.Set) bool {
		return func(s attribute.Set) bool { v, _ := s.Value("pipeline"); return v.AsString() == name }
	}
	want := int64(3 * len(forged))
	kafkatest.Eventually(t, 10*time.Second, "forged headers counted", func() bool {
		return sumInt(collect(t, reader)["wasmstream.forged_headers"], pipeline("p")) == want
	})
	// The retry copy the host wrote decodes cleanly: nothing counted there.
	if n := sumInt(collect(t, reader)["wasmstream.forged_headers"], pipeline("p.retry")); n != 0 {
		t.Fatalf("%d headers of the host's own retry copy counted as forged", n)
	}
	if n := sumInt(collect(t, reader)["wasmstream.forged_headers"], pipeline("p")); n != want {
		t.Fatalf("forged headers counted %d, want %d", n, want)
	}
}
