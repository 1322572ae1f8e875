//go:build !race

package schemaio

const raceEnabled = false
