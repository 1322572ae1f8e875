package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/failhdr"
	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/internal/termsafe"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// What `dlq redrive` sent is recorded in a compacted topic beside the
// dead-letter topic, <dead_letter_topic>.redriven: one record per dead
// letter redriven, written once its copy is acknowledged. `dlq list
// --pending` hides those, and a second redrive of them is refused unless
// --force. RATIONALE.md, "Redrive records what it sent", says why.
//
// A marker names its dead letter by identity, not by place alone: its key
// is "<topic ID>:<partition>@<offset>" (the dead-letter topic's ID and the
// dead letter's place in it), and its value repeats those with the dead
// letter's own coordinates (where it was first consumed, per its failure
// headers), its attempt and a digest of the record. A marker counts only
// for the dead letter it names in full: a marker of a dead-letter topic
// deleted and created again since (another topic ID), one written before
// the record at its place existed (another digest: the failure headers
// hold when it failed, to the nanosecond) and a forged one hide nothing;
// they are ignored and reported. Markers written before this (keyed
// "<partition>@<offset>" only) name no topic and no record: they are
// ignored too, for the same reason, and `dlq list` shows each beside the
// record at its place.

// redrivenSuffix names the marker topic of a dead-letter topic.
const redrivenSuffix = ".redriven"

// redriven is the value of a marker record.
type redriven struct {
	To   string    `json:"to"`   // the topic the copy went to
	Copy string    `json:"copy"` // "<partition>@<offset>" of the copy
	At   time.Time `json:"at"`
	// Of is the dead letter the marker is about; nil in markers of the old
	// format, keyed "<partition>@<offset>" alone.
	Of *deadLetterID `json:"of,omitempty"`
}

// deadLetterID is the identity of a dead letter: which topic (its ID),
// where in it, and which record it is.
type deadLetterID struct {
	TopicID         string `json:"topic_id"`
	Partition       int32  `json:"partition"`
	Offset          int64  `json:"offset"`
	OriginTopic     string `json:"origin_topic"` // where it was first consumed, per its failure headers
	OriginPartition int32  `json:"origin_partition"`
	OriginOffset    int64  `json:"origin_offset"`
	Attempt         int    `json:"attempt"`
	Digest          string `json:"digest"` // recordDigest
}

// identity is the identity of dead letter r of dl (st: what its headers say).
func identity(dl *deadLetters, r *kgo.Record, st *failhdr.State) deadLetterID {
	return deadLetterID{
		TopicID: dl.id, Partition: r.Partition, Offset: r.Offset,
		OriginTopic: st.Origin.Topic, OriginPartition: st.Origin.Partition, OriginOffset: st.Origin.Offset,
		Attempt: st.Attempt, Digest: recordDigest(r),
	}
}

// mismatch says how marker identity m differs from dead letter d's; "" if
// it names d.
func (m *deadLetterID) mismatch(d *deadLetterID) string {
	switch {
	case m.TopicID != d.TopicID:
		return fmt.Sprintf("it names topic ID %q, the topic's is %q", m.TopicID, d.TopicID)
	case m.Partition != d.Partition || m.Offset != d.Offset:
		return fmt.Sprintf("it names the dead letter at %d@%d", m.Partition, m.Offset)
	case m.OriginTopic != d.OriginTopic || m.OriginPartition != d.OriginPartition || m.OriginOffset != d.OriginOffset:
		return fmt.Sprintf("it names a record first consumed at %q[%d]@%d, this one was at %q[%d]@%d",
			m.OriginTopic, m.OriginPartition, m.OriginOffset, d.OriginTopic, d.OriginPartition, d.OriginOffset)
	case m.Attempt != d.Attempt:
		return fmt.Sprintf("it names attempt %d, this dead letter is of attempt %d", m.Attempt, d.Attempt)
	case m.Digest != d.Digest:
		return "it names another record at this place (its digest differs)"
	}
	return ""
}

// recordDigest fingerprints a dead letter: its key, value, headers and
// timestamp, each length-prefixed (a null key or value told from an empty
// one). Its failure headers say when it failed, to the nanosecond, so a
// marker cannot name a dead letter before it exists.
func recordDigest(r *kgo.Record) string {
	h := sha256.New()
	put := func(b []byte) {
		n := uint64(len(b)) + 1
		if b == nil {
			n = 0
		}
		h.Write(binary.AppendUvarint(nil, n))
		h.Write(b)
	}
	put(r.Key)
	put(r.Value)
	h.Write(binary.AppendUvarint(nil, uint64(len(r.Headers))))
	for _, hd := range r.Headers {
		put([]byte(hd.Key))
		put(hd.Value)
	}
	h.Write(binary.AppendVarint(nil, r.Timestamp.UnixMilli()))
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// placeKey is "<partition>@<offset>": a copy's place in its topic, and the
// whole key of an old-format marker.
func placeKey(partition int32, offset int64) string {
	return strconv.FormatInt(int64(partition), 10) + "@" + strconv.FormatInt(offset, 10)
}

// markerKey is the key of the marker of the dead letter at partition@offset
// of the dead-letter topic whose ID is topicID.
func markerKey(topicID string, partition int32, offset int64) string {
	return topicID + ":" + placeKey(partition, offset)
}

// ledger is the marker topic of a dead-letter topic as read: the markers
// of that topic (by its ID), the old-format ones, and what was ignored,
// for the report.
type ledger struct {
	topic   string              // <dead_letter_topic>.redriven
	markers map[string]redriven // by markerKey, of the dead-letter topic's ID now
	old     map[string]redriven // old format, by placeKey
	// Ignored markers, counted for the report.
	otherTopic, unreadable, mismatched int
}

// readLedger reads the marker topic of dl: the last marker of each key (a
// null value deletes it, as compaction does). A topic that does not exist
// yet is none.
func readLedger(ctx context.Context, k config.Kafka, dl *deadLetters) (*ledger, error) {
	l := &ledger{topic: dl.topic + redrivenSuffix, markers: map[string]redriven{}, old: map[string]redriven{}}
	cl, err := kafkaconn.NewClient(k, k.Brokers)
	if err != nil {
		return nil, err
	}
	ts, err := kadm.NewClient(cl).ListTopics(ctx, l.topic)
	cl.Close()
	if err != nil {
		return nil, fmt.Errorf("topic %s: %w", l.topic, err)
	}
	if d, ok := ts[l.topic]; !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return l, nil
	}
	recs, err := readAll(ctx, k, l.topic)
	if err != nil {
		return nil, err
	}
	last := map[string][]byte{}
	for _, r := range recs {
		if r.Value == nil {
			delete(last, string(r.Key))
		} else {
			last[string(r.Key)] = r.Value
		}
	}
	for key, v := range last {
		var m redriven
		id, _, keyed := strings.Cut(key, ":")
		switch {
		case json.Unmarshal(v, &m) != nil:
			l.unreadable++
		case !keyed:
			l.old[key] = m
		case m.Of == nil:
			l.unreadable++
		case id != dl.id:
			l.otherTopic++
		default:
			l.markers[key] = m
		}
	}
	return l, nil
}

// lookup finds the marker of dead letter r of dl (st: what its headers
// say): done if a marker names it in full; otherwise ignored says why the
// marker at its place, if any, does not count.
func (l *ledger) lookup(dl *deadLetters, r *kgo.Record, st *failhdr.State) (m redriven, done bool, ignored string) {
	if m, ok := l.markers[markerKey(dl.id, r.Partition, r.Offset)]; ok {
		d := identity(dl, r, st)
		if why := m.Of.mismatch(&d); why != "" {
			l.mismatched++
			return m, false, why
		}
		return m, true, ""
	}
	if m, ok := l.old[placeKey(r.Partition, r.Offset)]; ok {
		return m, false, fmt.Sprintf("an old-format marker keyed %s alone says redriven %s -> %s %s; it names no topic ID or record",
			placeKey(r.Partition, r.Offset), m.At.Format(time.RFC3339), m.To, m.Copy)
	}
	return redriven{}, false, ""
}

// report writes to w what markers were ignored, and why.
func (l *ledger) report(w io.Writer) {
	warn := func(format string, args ...any) {
		fmt.Fprintf(w, "wasmstream dlq: warning: %s: %s\n", termsafe.Line(l.topic), fmt.Sprintf(format, args...))
	}
	if n := len(l.old); n > 0 {
		warn("%d old-format markers (keyed partition@offset alone) ignored: they name no topic ID or record, so they cannot be told from markers of a dead-letter topic deleted and created again, nor from forged ones; the records at their places are pending (`dlq list` shows each beside its old marker: check before a redrive)", n)
	}
	if l.otherTopic > 0 {
		warn("%d markers of another topic ID ignored: the dead-letter topic was deleted and created again since they were written", l.otherTopic)
	}
	if l.unreadable > 0 {
		warn("%d records that are not redrive markers ignored", l.unreadable)
	}
	if l.mismatched > 0 {
		warn("%d markers that do not match the dead letter they name ignored (`dlq list` shows why, beside each); those dead letters are pending", l.mismatched)
	}
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

// markerRecord is the marker of dead letter r of dl (st: what its headers
// say), whose copy is acknowledged.
func markerRecord(dl *deadLetters, r *kgo.Record, st *failhdr.State, copied *kgo.Record) *kgo.Record {
	id := identity(dl, r, st)
	v, _ := json.Marshal(redriven{To: copied.Topic, Copy: placeKey(copied.Partition, copied.Offset), At: time.Now().UTC(), Of: &id})
	return &kgo.Record{Topic: dl.topic + redrivenSuffix, Partition: -1, Key: []byte(markerKey(dl.id, r.Partition, r.Offset)), Value: v}
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
