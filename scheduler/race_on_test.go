//go:build race

package scheduler

// raceOn reports whether the tests run under the race detector, which
// makes guest and host code several times slower: a test whose premise
// needs work to last (a backlog that grows a pool) sizes it by this.
const raceOn = true
