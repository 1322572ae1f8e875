package state

import (
	"cmp"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

// changelogApplier is the path from a changelog partition's records to its
// store (Stores.restore reads them; FuzzChangelogToStore feeds it any
// record a changelog can hold). What a record means:
//
//   - a control record (a transaction marker) writes nothing; its offset
//     counts as read;
//   - a key, empty or not, is the state key; a null key is the empty key
//     (the ABI has no null state key, and a host before the empty key was
//     stored wrote it null: on the in-process broker such a changelog may
//     exist, on Kafka a compacted topic refused it);
//   - a null value deletes the key (a tombstone), any other value is its
//     value, empty included;
//   - a statestore.StreamTimeHeader header is a write of the stream time
//     (statestore.StreamTimeKey) after the record's own, skipped and
//     counted unless its value has 8 bytes; other headers, timestamps and
//     producer ids mean nothing;
//   - a write the store cannot hold (statestore.Check: a key over
//     statestore.MaxKeyBytes, which no guest could have written) is
//     skipped and counted, never a reason to stop the restore.
//
// Writes are applied in transactions of at most restoreBatch, each noting
// the offset after its last record as the one the store reflects; flush
// applies what is left with the offset after the highest seen.
type changelogApplier struct {
	store *statestore.Store
	batch int // writes per transaction (0: restoreBatch)
	// onSkip is told of each record skipped (logged, bounded by the caller).
	onSkip func(r *kgo.Record, err error)

	ws   []statestore.Write
	offs []int64
	last int64 // the highest offset read, -1 before any

	applied, skipped int
}

// add takes the changelog's next record.
func (a *changelogApplier) add(r *kgo.Record) error {
	a.last = max(a.last, r.Offset)
	if r.Attrs.IsControl() {
		return nil
	}
	if a.take(r, statestore.Write{Key: r.Key, Value: r.Value}) {
		a.applied++
	}
	for _, h := range r.Headers {
		if h.Key != statestore.StreamTimeHeader {
			continue
		}
		if len(h.Value) != 8 { // nil too: a header never deletes it
			a.skip(r, fmt.Errorf("%w: a stream time header of %d bytes (8)", statestore.ErrCannotHold, len(h.Value)))
			continue
		}
		a.take(r, statestore.Write{Key: streamTimeKey, Value: h.Value})
	}
	if len(a.ws) < cmp.Or(a.batch, restoreBatch) {
		return nil
	}
	err := a.store.Apply(a.ws, a.offs[len(a.offs)-1]+1)
	a.ws, a.offs = a.ws[:0], a.offs[:0]
	return err
}

// take adds w, a write of r, unless the store cannot hold it (skipped and
// counted: false).
func (a *changelogApplier) take(r *kgo.Record, w statestore.Write) bool {
	if err := statestore.Check(w); err != nil {
		a.skip(r, err)
		return false
	}
	a.ws = append(a.ws, w)
	a.offs = append(a.offs, r.Offset)
	return true
}

// skip counts a write of r the store cannot hold, and tells onSkip why.
func (a *changelogApplier) skip(r *kgo.Record, err error) {
	a.skipped++
	if a.onSkip != nil {
		a.onSkip(r, err)
	}
}

// flush applies the writes not applied yet and records the offset after the
// highest read (when any was).
func (a *changelogApplier) flush() error {
	if a.last < 0 && len(a.ws) == 0 {
		return nil
	}
	err := a.store.Apply(a.ws, a.last+1)
	a.ws, a.offs = a.ws[:0], a.offs[:0]
	return err
}
