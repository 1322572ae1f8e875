//go:build !race

package scheduler

// raceOn: see race_on_test.go.
const raceOn = false
