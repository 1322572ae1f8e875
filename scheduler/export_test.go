package scheduler

import (
	"github.com/wasmstream/wasmstream/scheduler/internal/commit"
	"github.com/wasmstream/wasmstream/scheduler/internal/partition"
	"github.com/wasmstream/wasmstream/scheduler/internal/source"
	"github.com/wasmstream/wasmstream/scheduler/internal/state"
)

// Test-only accessors: the tests reach the pipeline's insides through these
// rather than through its fields, so that moving the record engine's parts
// (the committers, the state stores, the partitions' tasks) changes these
// few lines and not the tests.

// injectTxnFailure makes the open transaction abort at its cut, as a
// failed produce does (exactly_once pipelines only).
func (p *Pipeline) injectTxnFailure(err error) { p.commit.(*commit.Transactions).Failed(err) }

// shareHeld is how many records a share pipeline holds acquired now.
func (p *Pipeline) shareHeld() int { return p.src.(*source.Share).Locks().Len() }

// stateSizes returns each open state store's size (its file, and its keys
// and values) by partition.
func (p *Pipeline) stateSizes() map[int32]state.Size { return p.subs.state.Sizes() }

// taskFor is the task of an assigned partition now (nil: none).
func (p *Pipeline) taskFor(topic string, partition int32) *partition.Task {
	return p.tasks.Get(tp{Topic: topic, Partition: partition})
}
