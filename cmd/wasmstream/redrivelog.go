package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// What `dlq redrive` sent is recorded in a compacted topic beside the
// dead-letter topic, <dead_letter_topic>.redriven: one record per dead
// letter redriven, keyed "<partition>@<offset>" of the dead letter, written
// once its copy is acknowledged. `dlq list --pending` hides those, and a
// second redrive of them is refused unless --force. RATIONALE.md, "Redrive
// records what it sent", says why.

// redrivenSuffix names the marker topic of a dead-letter topic.
const redrivenSuffix = ".redriven"

// redriven is the value of a marker record.
type redriven struct {
	To   string    `json:"to"`   // the topic the copy went to
	Copy string    `json:"copy"` // "<partition>@<offset>" of the copy
	At   time.Time `json:"at"`
}

func markerKey(partition int32, offset int64) string {
	return strconv.FormatInt(int64(partition), 10) + "@" + strconv.FormatInt(offset, 10)
}

// readMarkers reads the marker topic of dlqTopic: the dead letters
// redriven, by markerKey. A topic that does not exist yet is none.
func readMarkers(ctx context.Context, k config.Kafka, dlqTopic string) (map[string]redriven, error) {
	topic := dlqTopic + redrivenSuffix
	cl, err := kafkaconn.NewClient(k, k.Brokers)
	if err != nil {
		return nil, err
	}
	ts, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	cl.Close()
	if err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	if d, ok := ts[topic]; !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return map[string]redriven{}, nil
	}
	recs, err := readAll(ctx, k, topic)
	if err != nil {
		return nil, err
	}
	out := map[string]redriven{}
	for _, r := range recs {
		if r.Value == nil {
			delete(out, string(r.Key))
			continue
		}
		var m redriven
		if json.Unmarshal(r.Value, &m) == nil {
			out[string(r.Key)] = m
		}
	}
	return out, nil
}

// ensureMarkerTopic creates the marker topic of dlqTopic if missing:
// compacted (a later redrive with --force replaces the marker), and
// deleted after the dead-letter topic's retention too, so markers do not
// outlive the records they describe by more than that.
func ensureMarkerTopic(ctx context.Context, cl *kgo.Client, dlqTopic string) error {
	adm := kadm.NewClient(cl)
	topic := dlqTopic + redrivenSuffix
	policy := "compact,delete"
	cfg := map[string]*string{"cleanup.policy": &policy}
	if rc, err := adm.DescribeTopicConfigs(ctx, dlqTopic); err == nil {
		for _, c := range rc {
			for _, v := range c.Configs {
				if v.Key == "retention.ms" && v.Value != nil {
					ms := *v.Value
					cfg["retention.ms"] = &ms
				}
			}
		}
	}
	parts := int32(1)
	if ts, err := adm.ListTopics(ctx, dlqTopic); err == nil {
		if d, ok := ts[dlqTopic]; ok && d.Err == nil {
			parts = int32(max(1, len(d.Partitions)))
		}
	}
	res, err := adm.CreateTopic(ctx, parts, -1, cfg, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating %s (where redrives are recorded): %w", topic, err)
	}
	return nil
}

// markerRecord is the marker of dead letter r, whose copy is acked.
func markerRecord(dlqTopic string, r, copied *kgo.Record) *kgo.Record {
	v, _ := json.Marshal(redriven{To: copied.Topic, Copy: markerKey(copied.Partition, copied.Offset), At: time.Now().UTC()})
	return &kgo.Record{Topic: dlqTopic + redrivenSuffix, Key: []byte(markerKey(r.Partition, r.Offset)), Value: v}
}

// previewBytes bounds the value shown by `dlq list`.
const previewBytes = 60

// preview is the start of a record's value for `dlq list`, quoted (Go
// escapes: no control, format or non-printable character reaches the
// terminal raw), at most previewBytes of it, cut at a character boundary,
// and how many bytes were left out.
func preview(v []byte) string {
	if v == nil {
		return "null"
	}
	n := len(v)
	if n > previewBytes {
		cut := previewBytes
		for cut > 0 && !utf8.RuneStart(v[cut]) {
			cut--
		}
		v = v[:cut]
	}
	s := strconv.Quote(string(v))
	if n > len(v) {
		s += fmt.Sprintf("…(+%d bytes)", n-len(v))
	}
	return s
}
