package scheduler

import (
	"github.com/wasmstream/wasmstream/scheduler/config"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
)

// LocalState is one partition's state in a store of its own, for running a
// module on records outside a pipeline (`wasmstream test`): the state a
// worker gives each attempt, with pc's bounds (state.Local: Begin, Commit,
// Close).
type LocalState struct{ *state.Local }

// OpenLocalState opens an empty state for pc's records in a new temporary
// directory, which Close removes.
func OpenLocalState(pc *config.Pipeline) (*LocalState, error) {
	l, err := state.OpenLocal(stateLimits(pc))
	if err != nil {
		return nil, err
	}
	return &LocalState{l}, nil
}

// stateLimits are pc's bounds on its state.
func stateLimits(pc *config.Pipeline) state.Limits {
	return state.Limits{MaxValueBytes: pc.State.MaxValueBytes, MaxBytes: pc.State.MaxBytes, Changelog: pc.State.Changelog}
}
