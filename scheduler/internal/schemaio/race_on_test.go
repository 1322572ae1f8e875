//go:build race

package schemaio

// raceEnabled: the test binary is built with the race detector, whose
// instrumentation allocates on its own (the allocation counts are not
// asserted).
const raceEnabled = true
