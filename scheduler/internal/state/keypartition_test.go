package state

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// KeyPartition agrees with the partitioner the host produces with.
func TestKeyPartitionMatchesProducer(t *testing.T) {
	for _, n := range []int{1, 3, 4, 12} {
		tp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
		for i := 0; i < 2000; i++ {
			k := []byte(fmt.Sprintf("key-%d", i))
			if i%7 == 0 {
				k = k[:i%5]
			}
			if got, want := KeyPartition(k, n), int32(tp.Partition(&kgo.Record{Key: k}, n)); got != want {
				t.Fatalf("%q over %d: %d, producer %d", k, n, got, want)
			}
		}
	}
}
