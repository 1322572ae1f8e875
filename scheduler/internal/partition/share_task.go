// What a consume: share pipeline's task and role do differently
// (scheduler/internal/source/share.go): records enter without the offset tracker, and the broker's
// delivery count is the attempt.

package partition

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/internal/failhdr"
)

// ShareRole is a primary's role under a share group: the broker's
// delivery count is the record's attempt (a record redelivered after a
// host was lost or gave it back is on its second attempt).
type ShareRole struct{ Role }

func (s ShareRole) prior(r *kgo.Record) (failhdr.State, int) {
	st, untrusted := s.Role.prior(r)
	st.Attempt = max(int(r.DeliveryCount()), 1)
	return st, untrusted
}

// EnqueueShared takes records of a share-group poll: like enqueue, without
// the offset tracker (a share group redelivers offsets below those it
// handed out; the acknowledgement, not a watermark, makes a record durable).
// Ordering is none: every record goes to the free queue.
func (t *Task) EnqueueShared(recs []*kgo.Record) {
	nb := 0
	t.mu.Lock()
	for _, r := range recs {
		nb += len(r.Key) + len(r.Value)
		t.free.Push(unit{r: r})
	}
	t.takenLocked(len(recs), nb)
	t.mu.Unlock()
}

// forgetShared gives back what an abandoned record counted in the task
// (under a consumer group it stays counted until the task closes).
func (t *Task) forgetShared(r *kgo.Record) {
	t.mu.Lock()
	t.inFlight--
	t.bytes -= len(r.Key) + len(r.Value)
	if !t.closed {
		t.d.Budget.AddInFlight(-1)
	}
	t.mu.Unlock()
}
