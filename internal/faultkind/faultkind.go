// Package faultkind names the kinds of guest fault: the host classifies a
// fault by them, and the configuration (retry.retryable_faults) and the
// metrics name them. It imports nothing, so the configuration can know the
// kinds without linking the WebAssembly runtime.
package faultkind

// Kind classifies a guest fault. Every fault discards the instance.
type Kind string

const (
	Trap       Kind = "trap"        // a WebAssembly trap (unreachable, out-of-bounds access, ...)
	Exit       Kind = "exit"        // the guest exited
	Panic      Kind = "panic"       // the guest's language runtime panicked (a Go panic)
	Deadline   Kind = "deadline"    // the record deadline interrupted the guest
	OOM        Kind = "oom"         // the guest ran out of memory under the page limit
	BadPointer Kind = "bad_pointer" // a host function got a pointer/length outside guest memory
	Protocol   Kind = "protocol"    // the guest broke the ABI (invalid status, ...)
	Canceled   Kind = "canceled"    // the host abandoned the call (shutdown deadline)
	// InstanceLost: the record waited on asynchronous operations when its
	// instance was discarded (another record faulted on it).
	InstanceLost Kind = "instance_lost"
)

// Retryable are the fault kinds a record may be retried after
// (retry.retryable_faults names them): every kind but canceled, which is the
// host giving up on a call, not the record's outcome.
var Retryable = []Kind{Trap, Panic, Exit, Deadline, OOM, BadPointer, Protocol, InstanceLost}

// RetryableNames are Retryable as strings, in the same order.
func RetryableNames() []string {
	out := make([]string, len(Retryable))
	for i, k := range Retryable {
		out[i] = string(k)
	}
	return out
}
