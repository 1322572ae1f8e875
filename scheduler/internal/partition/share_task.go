// What a consume: share pipeline's task and role do differently
// (scheduler/internal/source/share.go): records enter without the offset
// tracker (its ledger's policy: ledger.Share), and the broker's delivery
// count is the attempt.

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

// forget gives back what an abandoned record counted in the task, when its
// ledger lets it go at once (Ledger.Abandon: a share record released to the
// broker); under a consumer group it stays counted until the task closes.
func (t *Task) forget(r *kgo.Record) {
	t.mu.Lock()
	t.q.inFlight--
	t.q.bytes -= len(r.Key) + len(r.Value)
	if !t.q.closed {
		t.d.Budget.AddInFlight(-1)
	}
	t.mu.Unlock()
}
