package partition

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// refusedRecords are the input records (exactly_once) one of whose produces
// the broker refused for what the record holds — its size, its key, its
// timestamp — in a transaction that then aborted. Processed again, such a
// record would be refused again and abort every transaction it is in: it
// fails instead (txnSink.refuses), to its retry or dead-letter topic,
// and the partition moves on. topicLimits makes such refusals rare (the
// host checks what it knows before producing); this catches the rest. A
// refusal the broker makes of a whole batch also names the other records
// in that batch: they fail too (RATIONALE.md, "A record the broker
// refuses"). Safe for concurrent use; mu is a leaf lock.
type refusedRecords struct {
	n    atomic.Int32 // len(recs): the record path skips the lock while 0
	mu   sync.Mutex
	recs map[refusedKey]string // why
}

type refusedKey struct {
	topic     string
	partition int32
	offset    int64
}

// maxRefused bounds the records remembered: each is forgotten when it
// runs again or its partition moves.
const maxRefused = 4096

// refusedForRecord reports whether err is the broker (or franz-go, before
// sending) refusing a record for what it holds, so that producing it again
// can only fail again.
func refusedForRecord(err error) bool {
	for _, e := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.CorruptMessage, kerr.InvalidTimestamp} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// note remembers r as refused (why: the produce's error).
func (rr *refusedRecords) note(r *kgo.Record, why string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.recs == nil {
		rr.recs = map[refusedKey]string{}
	}
	if len(rr.recs) < maxRefused {
		rr.recs[refusedKey{r.Topic, r.Partition, r.Offset}] = why
		rr.n.Store(int32(len(rr.recs)))
	}
}

// take reports why r was refused, forgetting it; "" when it was not.
func (rr *refusedRecords) take(r *kgo.Record) string {
	if rr.n.Load() == 0 {
		return ""
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	k := refusedKey{r.Topic, r.Partition, r.Offset}
	why := rr.recs[k]
	delete(rr.recs, k)
	rr.n.Store(int32(len(rr.recs)))
	return why
}

// forget drops the records of partitions that moved to another member.
func (rr *refusedRecords) forget(parts map[string][]int32) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for k := range rr.recs {
		for _, p := range parts[k.topic] {
			if p == k.partition {
				delete(rr.recs, k)
			}
		}
	}
	rr.n.Store(int32(len(rr.recs)))
}
