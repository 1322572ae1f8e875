//go:build race

package host

// raceEnabled: the test binary is built with the race detector, whose
// instrumentation allocates on its own (the allocation guards skip).
const raceEnabled = true
