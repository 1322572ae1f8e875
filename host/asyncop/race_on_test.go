//go:build race

package asyncop

// raceBuild: the test binary is built with the race detector, whose
// instrumentation allocates a few times more on some paths.
const raceBuild = true
