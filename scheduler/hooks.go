package scheduler

import (
	"github.com/wasmstream/wasmstream/scheduler/internal/hooks"
	"github.com/wasmstream/wasmstream/scheduler/internal/ledger"
)

// The engine's counters, failure events and instruments live in
// scheduler/internal/hooks; these names are the scheduler's API for them.
type (
	// Stats are a pipeline's (or a partition's) counters since it started.
	Stats = hooks.Stats
	// FailureEvent is one failed attempt as the scheduler routed it.
	FailureEvent = hooks.FailureEvent
	// EventHeader is one of a FailureEvent's record headers, cut to size.
	EventHeader = hooks.EventHeader
	// FailureObserver is told of every failed attempt routed.
	FailureObserver = hooks.FailureObserver
	// Metrics are the runner's OpenTelemetry instruments.
	Metrics = hooks.Metrics
	// counter picks one of a Stats' counters.
	counter = hooks.Counter
	// ShareStats are a share pipeline's counters (consume: share).
	ShareStats = ledger.ShareStats
)

// Bounds of what a FailureEvent copies from a record.
const (
	MaxEventKeyBytes    = hooks.MaxEventKeyBytes
	MaxEventErrorBytes  = hooks.MaxEventErrorBytes
	MaxEventValueBytes  = hooks.MaxEventValueBytes
	MaxEventHeaders     = hooks.MaxEventHeaders
	MaxEventHeaderBytes = hooks.MaxEventHeaderBytes
)
