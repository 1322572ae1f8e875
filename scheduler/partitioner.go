package scheduler

import "github.com/twmb/franz-go/pkg/kgo"

// outputPartitioner honours an output partition the guest pinned (Partition
// >= 0, taken modulo the partition count) and otherwise hashes the key like
// the Java client (records without a key are spread stickily).
type outputPartitioner struct{ inner kgo.Partitioner }

func newOutputPartitioner() kgo.Partitioner {
	return outputPartitioner{inner: kgo.StickyKeyPartitioner(nil)}
}

func (p outputPartitioner) ForTopic(t string) kgo.TopicPartitioner {
	return pinnedTopicPartitioner{inner: p.inner.ForTopic(t)}
}

type pinnedTopicPartitioner struct{ inner kgo.TopicPartitioner }

func (p pinnedTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Partition >= 0 || p.inner.RequiresConsistency(r)
}

func (p pinnedTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Partition >= 0 {
		return int(r.Partition) % n
	}
	return p.inner.Partition(r, n)
}
