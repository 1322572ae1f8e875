package pinpart

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// place places r as franz-go would with tp, among n partitions with
// nothing buffered.
func place(tp kgo.TopicPartitioner, r *kgo.Record, n int) int {
	if b, ok := tp.(kgo.TopicBackupPartitioner); ok {
		return b.PartitionByBackup(r, n, &emptyBackup{n: n})
	}
	return tp.Partition(r, n)
}

type emptyBackup struct{ i, n int }

func (b *emptyBackup) Next() (int, int64) { b.i++; return b.i - 1, 0 }
func (b *emptyBackup) Rem() int           { return b.n - b.i }

// Records without a key move on to another partition every SwitchBytes; a
// pinned record stays pinned.
func TestNullKeysSpread(t *testing.T) {
	tp := New().ForTopic("out")
	const n = 8
	per := make([]int, n)
	value := bytes.Repeat([]byte("v"), 100)
	for range 10000 {
		per[place(tp, &kgo.Record{Value: value, Partition: -1}, n)]++
	}
	for p, c := range per {
		if c == 0 {
			t.Fatalf("partition %d got none of 10,000 null-keyed records: %v", p, per)
		}
	}
	for range 10 {
		if p := place(tp, &kgo.Record{Partition: 11}, n); p != 3 {
			t.Fatalf("pinned partition 11 of 8 went to %d, want 3", p)
		}
	}
	if !tp.RequiresConsistency(&kgo.Record{Partition: 2}) {
		t.Fatal("a pinned record does not require consistency")
	}
}

// A key is hashed as the Java client does (murmur2): the same key, the
// same partition, as franz-go's key partitioner places it.
func TestKeysHashLikeJava(t *testing.T) {
	tp := New().ForTopic("out")
	ref := kgo.StickyKeyPartitioner(nil).ForTopic("out")
	for i := range 1000 {
		r := &kgo.Record{Key: []byte{byte(i), byte(i >> 8), 'k'}, Partition: -1}
		if got, want := place(tp, r, 12), ref.Partition(r, 12); got != want {
			t.Fatalf("key %q: partition %d, want %d", r.Key, got, want)
		}
		if !tp.RequiresConsistency(r) {
			t.Fatal("a keyed record does not require consistency")
		}
	}
}
