package state

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

// Local is one partition's state in a store of its own, for running a
// module on records outside a pipeline (`wasmstream test`): the same State a
// worker gives each attempt (the record's writes over the earlier records'
// over the store), with the pipeline's bounds (state.max_value_bytes,
// state.max_bytes). A succeeded record's writes join the state for the next
// record; nothing is produced or flushed. Not safe for concurrent use.
type Local struct {
	p     *Partition
	store *statestore.Store
	dir   string
}

// OpenLocal opens an empty state with the bounds l in a new temporary
// directory, which Close removes.
func OpenLocal(l Limits) (*Local, error) {
	dir, err := os.MkdirTemp("", "wasmstream-state-")
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	st, err := statestore.Open(filepath.Join(dir, "state.db"), 10*time.Second)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("state: %w", err)
	}
	return &Local{p: NewPartition(st, 0, 1, l), store: st, dir: dir}, nil
}

// Begin returns the State of one attempt of a record.
func (l *Local) Begin() host.State { return l.p.Begin() }

// Commit keeps the writes of a succeeded record's attempt (st, from Begin)
// and returns them as the changelog records a pipeline would produce.
func (l *Local) Commit(st host.State, offset int64) []abi.Output {
	_, outs := l.p.Commit(offset, st.(*Record), nil)
	return outs
}

// Close closes the store and removes its directory.
func (l *Local) Close() error {
	err := l.store.Close()
	if rerr := os.RemoveAll(l.dir); err == nil {
		err = rerr
	}
	return err
}

// CommitAt is Commit for a record of timestamp (milliseconds), which moves
// the state's stream time (ABI.md §4.2) as a pipeline's decided record
// does.
func (l *Local) CommitAt(st host.State, offset, timestamp int64) []abi.Output {
	_, outs := l.p.CommitAt(offset, timestamp, st.(*Record), nil)
	return outs
}

// Due lists up to n of the timers due by the state's stream time, in (at,
// key) order (Partition.Due), and that stream time.
func (l *Local) Due(n int) ([]Timer, int64, error) {
	t := l.p.StreamTime()
	due, err := l.p.Due(t, n)
	return due, t, err
}

// Advance is Partition.Advance: the stream time moved forward by ms
// without a record (timers.idle_advance), and returned.
func (l *Local) Advance(ms int64) int64 { return l.p.Advance(ms) }

// StreamTime is the state's stream time, -1 before any record.
func (l *Local) StreamTime() int64 { return l.p.StreamTime() }

// Timers lists up to n of the timers set, due or not, in (at, key) order.
func (l *Local) Timers(n int) ([]Timer, error) { return l.p.Due(math.MaxInt64, n) }
