package partition

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/wasmstream/wasmstream/abi"
)

// TopicLimits are what the brokers refuse of a record on each topic the
// pipelines produce to — its max.message.bytes, and a null key when its
// cleanup.policy compacts — read once at start (readTopicLimits). They
// serve twice:
//
//   - franz-go cuts batches at a topic's bound (ProducerBatchMaxBytesFn)
//     instead of its default 1,000,012 bytes, so that the broker never
//     refuses a batch of records that each fit, with every record in it;
//   - a record whose outputs (changelog records included) a topic would
//     refuse fails before its outcome is released (sink.refuses):
//     under exactly_once a refused produce aborts the transaction, and the
//     record would run again into the same refusal for ever.
//
// RATIONALE.md, "A record the broker refuses". Read-only once built: safe
// for concurrent use.
type TopicLimits map[string]topicLimit

type topicLimit struct {
	maxBytes  int32 // max.message.bytes (0: unknown)
	compacted bool  // cleanup.policy has compact: a null key is refused
}

// defaultMaxMessageBytes is the bound of a topic whose config could not be
// read: franz-go's default, Kafka's default max.message.bytes.
const defaultMaxMessageBytes = 1_000_012

// BatchMax is the most bytes franz-go puts in one batch to topic, in the
// range franz-go accepts.
func (l TopicLimits) BatchMax(topic string) int32 {
	n := l[topic].maxBytes
	if n <= 0 {
		return defaultMaxMessageBytes
	}
	return min(max(n, 512), 1<<30)
}

// recordBatchBytes bounds the bytes of a batch holding only a record of
// key, value and headers, uncompressed, as franz-go measures it against
// batchMax: the batch header (61), the record's fixed fields and varints
// (at most 21), each header's two lengths (10), and room for the trace
// context headers the host may add when it produces (traceHeaderBytes).
func recordBatchBytes(key, value []byte, headers []abi.Header) int {
	n := 61 + 21 + len(key) + len(value) + traceHeaderBytes
	for _, h := range headers {
		n += 10 + len(h.Key) + len(h.Value)
	}
	return n
}

// traceHeaderBytes is room for traceparent and tracestate
// (withTraceContext): 55 bytes and a tracestate of at most 512, with
// their names and lengths.
const traceHeaderBytes = 640

// refuses says why topic would refuse a record of key (null when nullKey),
// value and headers; "" when it would not.
func (l TopicLimits) refuses(topic string, key []byte, nullKey bool, value []byte, headers []abi.Header) string {
	if n, limit := recordBatchBytes(key, value, headers), l.BatchMax(topic); n > int(limit) {
		return fmt.Sprintf("a record of %d bytes to %s, over the topic's max.message.bytes (%d)", n, topic, limit)
	}
	if nullKey && l[topic].compacted {
		return fmt.Sprintf("a record with a null key to %s, which is compacted (cleanup.policy) and refuses it", topic)
	}
	return ""
}

// ReadTopicLimits reads the limits of topics. A topic whose config cannot
// be read (an ACL without DescribeConfigs, a broker that does not answer)
// keeps franz-go's default bound, logged: the broker still refuses what is
// over its bound, and such a record then fails when it runs again
// (refusedRecords).
func ReadTopicLimits(ctx context.Context, adm *kadm.Client, topics []string, log *slog.Logger) TopicLimits {
	l := TopicLimits{}
	if len(topics) == 0 {
		return l
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		log.Warn("cannot read the output topics' max.message.bytes and cleanup.policy; records are checked against 1,000,012 bytes", "topics", strings.Join(topics, ","), "err", err)
		return l
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			log.Warn("cannot read a topic's max.message.bytes and cleanup.policy; its records are checked against 1,000,012 bytes", "topic", rc.Name, "err", rc.Err)
			continue
		}
		var tl topicLimit
		for _, c := range rc.Configs {
			if c.Value == nil {
				continue
			}
			switch c.Key {
			case "max.message.bytes":
				if n, err := strconv.ParseInt(*c.Value, 10, 32); err == nil {
					tl.maxBytes = int32(n)
				}
			case "cleanup.policy":
				tl.compacted = slices.Contains(strings.Split(*c.Value, ","), "compact")
			}
		}
		l[rc.Name] = tl
	}
	return l
}
