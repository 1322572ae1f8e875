package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/kafkaconn"
	"github.com/wasmstream/wasmstream/scheduler/config"
)

// checkOldRetryTopics keeps an upgrade from losing retries. The default
// retry.topic_prefix was the pipeline's name + ".retry"; it is now the
// pipeline's group + ".retry" (RATIONALE.md, "Retry topics named after the
// group"). A host upgraded with the default may find records its retry
// workers have not retried yet in topics of the old names, which nothing
// would read again: for each pipeline whose prefix is the default, when its
// retry workers' group (<group>.retry, which did not change) has records
// above its committed offsets there, startup fails naming
// retry.topic_prefix. Old topics with nothing left are logged once, to be
// deleted.
func (r *Runner) checkOldRetryTopics(ctx context.Context, cl *kgo.Client) error {
	var probs config.Problems
	for i := range r.cfg.Pipelines {
		pc := &r.cfg.Pipelines[i]
		old := pc.OldDefaultRetryTopics()
		if len(old) == 0 {
			continue
		}
		group := r.cfg.RetryGroupID(pc)
		pending, err := r.uncommitted(ctx, cl, group, old)
		if err != nil {
			return fmt.Errorf("pipelines[%d].retry.topic_prefix: checking the retry topics of the previous default prefix %q: %w", i, pc.OldDefaultRetryTopicPrefix(), err)
		}
		var held []string
		var n int64
		for _, t := range old {
			if pending[t] > 0 {
				held = append(held, fmt.Sprintf("%q", t))
				n += pending[t]
			}
		}
		if n > 0 {
			probs = append(probs, fmt.Sprintf("pipelines[%d].retry.topic_prefix: retry topics %s (named by the default before it named the pipeline's group) hold %d record%s the retry workers of group %q have not committed; set retry.topic_prefix: %q to keep draining them, or drain them first",
				i, strings.Join(held, ", "), n, plural(n), group, pc.OldDefaultRetryTopicPrefix()))
			continue
		}
		var present []string
		for _, t := range old {
			if _, ok := pending[t]; ok {
				present = append(present, t)
			}
		}
		if len(present) > 0 {
			r.log.Info("the retry topics of the previous default prefix hold nothing left to retry and can be deleted",
				"pipeline", pc.Name, "topics", strings.Join(present, ","), "retry_topics", strings.Join(pc.RetryTopics(), ","))
		}
	}
	if len(probs) > 0 {
		return probs
	}
	return nil
}

// uncommitted counts, for each of the topics that exists, the records above
// group's committed offsets (from the log start where it committed none, or
// committed below it).
func (r *Runner) uncommitted(ctx context.Context, cl *kgo.Client, group string, topics []string) (map[string]int64, error) {
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if errors.Is(err, kerr.TopicAuthorizationFailed) {
		// A principal given only the ACLs of the current names (README.md,
		// "ACLs the host needs") may not even describe the old ones: its
		// retry workers cannot have read them under these ACLs. Debug
		// only: under such ACLs it would be said at every start, of a
		// prefix the user most likely never used.
		r.log.Debug("not allowed to describe the retry topics of the previous default prefix: not checked", "topics", strings.Join(topics, ","))
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	// A topic the principal may not describe (the error per topic): as
	// above, not checked.
	gone := func(err error) bool {
		return errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.TopicAuthorizationFailed)
	}
	exist := false
	ends.Each(func(e kadm.ListedOffset) { exist = exist || !gone(e.Err) })
	if !exist {
		return nil, nil
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		committed, err = nil, nil // no commits (the in-process broker says so)
	}
	if err != nil {
		return nil, fmt.Errorf("group %q: %w", group, err)
	}
	out := map[string]int64{}
	spans := map[string]map[int32][2]int64{} // [from, end): offsets not committed
	for _, e := range sortedOffsets(ends) {
		if gone(e.Err) {
			continue // never created, deleted, or not ours to describe
		}
		s, ok := starts.Lookup(e.Topic, e.Partition)
		if e.Err == nil && !ok {
			e.Err = errors.New("no start offset")
		} else if e.Err == nil {
			e.Err = s.Err
		}
		if e.Err != nil {
			return nil, fmt.Errorf("topic %s partition %d: %w", e.Topic, e.Partition, e.Err)
		}
		if _, ok := out[e.Topic]; !ok {
			out[e.Topic] = 0 // it exists
		}
		from := s.Offset
		if c, ok := committed.Lookup(e.Topic, e.Partition); ok && c.Err == nil && c.At > from {
			from = c.At
		}
		if from < e.Offset {
			if spans[e.Topic] == nil {
				spans[e.Topic] = map[int32][2]int64{}
			}
			spans[e.Topic][e.Partition] = [2]int64{from, e.Offset}
		}
	}
	if len(spans) == 0 {
		return out, nil
	}
	return out, r.countRecords(ctx, spans, out)
}

// countRecords reads each partition's span of offsets [from, end) and adds
// the records in it to counts, by topic. Offsets are not all records:
// under exactly_once a transaction's marker takes one, and follows the last
// record the retry workers committed; records of aborted transactions are
// not retried either. Offsets it cannot read within 10s (an open
// transaction) count as records.
func (r *Runner) countRecords(ctx context.Context, spans map[string]map[int32][2]int64, counts map[string]int64) error {
	at := map[string]map[int32]kgo.Offset{}
	next := map[string]map[int32]int64{} // the offset after the last read
	for t, ps := range spans {
		at[t], next[t] = map[int32]kgo.Offset{}, map[int32]int64{}
		for p, span := range ps {
			at[t][p], next[t][p] = kgo.NewOffset().At(span[0]), span[0]
		}
	}
	cl, err := kafkaconn.NewClient(r.cfg.Kafka, r.brokers,
		kgo.ConsumePartitions(at), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	left := func() bool {
		for t, ps := range spans {
			for p, span := range ps {
				if next[t][p] < span[1] {
					return true
				}
			}
		}
		return false
	}
	for left() && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
			end, n := spans[rec.Topic][rec.Partition][1], next[rec.Topic]
			switch {
			case rec.Offset < n[rec.Partition]:
			case rec.Offset >= end: // the span is read (produced since)
				n[rec.Partition] = end
			default:
				if !rec.Attrs.IsControl() {
					counts[rec.Topic]++
				}
				n[rec.Partition] = rec.Offset + 1
			}
		})
	}
	for t, ps := range spans {
		for p, span := range ps {
			counts[t] += max(span[1]-next[t][p], 0)
		}
	}
	return nil
}

// sortedOffsets lists offsets in topic and partition order (stable errors
// and logs).
func sortedOffsets(l kadm.ListedOffsets) []kadm.ListedOffset {
	var out []kadm.ListedOffset
	l.Each(func(o kadm.ListedOffset) { out = append(out, o) })
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}
