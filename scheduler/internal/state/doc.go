// Package state is a stateful pipeline's per-partition state (DESIGN.md,
// "State"): the partitions' local stores, opened and restored from the
// changelog when a partition is assigned (Stores), each partition's view of
// its state for the records that run on it (Partition), one attempt's
// writes (Record), and a succeeded record's writes tied to their changelog
// records (Batch). It knows partitions, never the tasks or committers that
// use them.
//
// How state moves: an attempt of a record writes into its own Record; when
// the record succeeds, the worker hands those writes to the partition's
// current view (Partition.Commit) before it frees the record's lane, so the
// next record of the key or partition reads them from the overlay; the same
// writes become changelog records among the record's outputs, produced
// (at_least_once) or put in the transaction (exactly_once) with them. Once
// the record's offset is committed, the commit applies its writes to the
// partition's bbolt store (Stores.Flush, Partition.Flush) with the
// changelog offset the store now reflects, and drops them from the overlay.
//
// Two-part keys (ABI.md §4.2) travel the same way under their encoding
// (statestore.Key2), and so does the partition's stream time, once a record
// read it: a write of statestore.StreamTimeKey among a committed record's
// writes (Partition.CommitAt).
package state
