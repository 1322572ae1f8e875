package scheduler

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/pinpart"
)

// newOutputPartitioner honours an output partition the guest pinned
// (Partition >= 0, taken modulo the partition count) and otherwise hashes
// the key like the Java client; records without a key are spread stickily
// (internal/pinpart, which forwards the sticky partitioner's new-batch
// notification).
func newOutputPartitioner() kgo.Partitioner { return pinpart.New() }
