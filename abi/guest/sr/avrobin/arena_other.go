//go:build !wasip1

package avrobin

import "sync"

// Outside a guest (a processor's tests, a native program using generated
// codecs) decoders may run in parallel: the arena is locked.
var (
	sharedMu sync.Mutex
	shared   arena
)

func lockArena() *arena { sharedMu.Lock(); return &shared }
func unlockArena()      { sharedMu.Unlock() }
