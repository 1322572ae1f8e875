// The fetch step of a record's path (DESIGN.md): the poll loop
// (scheduler/internal/source) reads and does what it needs on the
// pipeline's task map through partition.Set (Demand, Resume, Dispatch);
// what is left here is the client's count of the records it decodes.

package scheduler

import (
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// readHook counts the records the client decodes from fetch responses.
type readHook struct{ n *atomic.Int64 }

func (h readHook) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	h.n.Add(int64(m.NumRecords))
}
