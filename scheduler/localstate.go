package scheduler

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/wasmstream/wasmstream/abi"
	"github.com/wasmstream/wasmstream/host"
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/statestore"
)

// LocalState is one partition's state in a store of its own, for running a
// module on records outside a pipeline (`wasmstream test`): the same State a
// worker gives each attempt (the record's writes over the earlier records'
// over the store), with the pipeline's bounds (state.max_value_bytes,
// state.max_bytes). A succeeded record's writes join the state for the next
// record; nothing is produced or flushed. Not safe for concurrent use.
type LocalState struct {
	ts    *taskState
	store *statestore.Store
	dir   string
}

// OpenLocalState opens an empty state for pc's records in a new temporary
// directory, which Close removes.
func OpenLocalState(pc *config.Pipeline) (*LocalState, error) {
	dir, err := os.MkdirTemp("", "wasmstream-state-")
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	st, err := statestore.Open(filepath.Join(dir, "state.db"), 10*time.Second)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("state: %w", err)
	}
	ts := newTaskState(&partStore{store: st}, 0, 1, pc.State.MaxValueBytes, pc.State.Changelog)
	ts.maxBytes = pc.State.MaxBytes
	return &LocalState{ts: ts, store: st, dir: dir}, nil
}

// Begin returns the State of one attempt of a record.
func (l *LocalState) Begin() host.State { return l.ts.begin() }

// Commit keeps the writes of a succeeded record's attempt (st, from Begin)
// and returns them as the changelog records a pipeline would produce.
func (l *LocalState) Commit(st host.State, offset int64) []abi.Output {
	_, outs := l.ts.commitRecord(offset, st.(*recordState))
	return outs
}

// Close closes the store and removes its directory.
func (l *LocalState) Close() error {
	err := l.store.Close()
	if rerr := os.RemoveAll(l.dir); err == nil {
		err = rerr
	}
	return err
}
