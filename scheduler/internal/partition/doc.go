// Package partition is the record engine of one partition, or of a share
// group's one pool: a Task holds the partition's fetched records and its
// offset tracker, dispatches them to workers (one goroutine per module
// instance), releases their outcomes in order and routes failures. It is
// given everything once, in a Deps, and reaches outward only through its
// seams: the Ledger (when an outcome counts: scheduler/internal/ledger) and
// the Sink (how it leaves).
// It never imports package scheduler, which wires it (DESIGN.md, "Seams:
// source, ledger, sink, committer").
package partition
