// Package pinpart is how wasmstream places the records it produces: a
// record pinned to a partition (Partition >= 0, taken modulo the partition
// count) goes there; any other is placed as the Java client (3.3 and
// later, KIP-794) places it: a key is hashed (murmur2), and records without
// a key go to one partition until SwitchBytes of them were placed there,
// then to another, chosen with a bias towards the partitions with the
// least buffered (franz-go's UniformBytesPartitioner, adaptive).
//
// Every optional interface of the inner partitioner is forwarded: franz-go
// finds them by type assertion, and a wrapper that hides them changes how
// records are placed. Hiding the sticky partitioner's new-batch
// notification kept every null-keyed output on one partition for the life
// of the process; and even with it, the older sticky placement (KIP-480)
// piles a burst onto the one partition whose batch is still filling while
// the others send theirs at once (10,000 outputs: 9,995 on one of 8
// partitions, measured on a real broker), which is why KIP-794 replaced it.
package pinpart

import "github.com/twmb/franz-go/pkg/kgo"

// SwitchBytes is how many bytes of records without a key go to one
// partition before the next ones go to another: the Java client's
// batch.size default, which its partitioner switches at.
const SwitchBytes = 16 << 10

// New returns the partitioner of the host's outputs, dead letters and
// redriven records.
func New() kgo.Partitioner {
	return Wrap(kgo.UniformBytesPartitioner(SwitchBytes, true, true, nil))
}

// Wrap returns inner with pinned partitions honoured.
func Wrap(inner kgo.Partitioner) kgo.Partitioner { return partitioner{inner} }

type partitioner struct{ inner kgo.Partitioner }

func (p partitioner) ForTopic(t string) kgo.TopicPartitioner {
	inner := p.inner.ForTopic(t)
	tp := topicPartitioner{inner: inner}
	if nb, ok := inner.(kgo.TopicPartitionerOnNewBatch); ok {
		tp.onNewBatch = nb.OnNewBatch
	}
	if b, ok := inner.(kgo.TopicBackupPartitioner); ok {
		return backupPartitioner{topicPartitioner: tp, backup: b}
	}
	return tp
}

// topicPartitioner is one topic's partitioner. It always has OnNewBatch
// (franz-go asks for it by type assertion), which does nothing when the
// inner partitioner has none.
type topicPartitioner struct {
	inner      kgo.TopicPartitioner
	onNewBatch func()
}

func (p topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Partition >= 0 || p.inner.RequiresConsistency(r)
}

func (p topicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Partition >= 0 {
		return int(r.Partition) % n
	}
	return p.inner.Partition(r, n)
}

func (p topicPartitioner) OnNewBatch() {
	if p.onNewBatch != nil {
		p.onNewBatch()
	}
}

// backupPartitioner is topicPartitioner for an inner partitioner that
// places records by what is buffered per partition.
type backupPartitioner struct {
	topicPartitioner
	backup kgo.TopicBackupPartitioner
}

func (p backupPartitioner) PartitionByBackup(r *kgo.Record, n int, it kgo.TopicBackupIter) int {
	if r.Partition >= 0 {
		return int(r.Partition) % n
	}
	return p.backup.PartitionByBackup(r, n, it)
}
