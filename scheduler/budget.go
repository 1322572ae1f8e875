package scheduler

import "github.com/wasmstream/wasmstream/scheduler/internal/budget"

// Budget is the host-wide reserve of instances and bound on records in
// flight (scheduler/internal/budget).
type Budget = budget.Budget

// OutputAccount is what the budget reads of the outputs held back
// (scheduler/internal/budget).
type OutputAccount = budget.OutputAccount

// NewBudget returns a budget of maxInstances instances reserving at most
// maxBytes of memory, and maxInFlight records in flight.
func NewBudget(maxInstances int, maxBytes int64, maxInFlight int) *Budget {
	return budget.New(maxInstances, maxBytes, maxInFlight)
}
