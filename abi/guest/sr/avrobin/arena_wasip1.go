//go:build wasip1

package avrobin

// A Go guest runs one goroutine at a time and never in parallel: its
// arena needs no lock (a lock costs it as much as a small decode).
var shared arena

func lockArena() *arena { return &shared }
func unlockArena()      {}
