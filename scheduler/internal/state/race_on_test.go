//go:build race

package state

// raceEnabled: the test binary is built with the race detector. Its
// sync.Pool drops a quarter of what it is given (spareRecords: a Record
// allocated every fourth record), and its instrumentation allocates a few
// bytes more.
const raceEnabled = true
