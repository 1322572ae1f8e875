// Package limits holds the host's fixed bounds and the defaults of its
// per-module limits and clocks: the numbers the
// configuration (scheduler/config) takes its defaults and ranges from. It
// imports nothing, so the configuration can know them without linking the
// WebAssembly runtime; package host uses them and re-exports them under its
// own names (host.MaxModuleBytes, host.DefaultLimits, ...). The settings of
// the asynchronous operations are package host/asyncop's.
package limits

import "time"

const (
	// MaxModuleBytes caps the module binary. Compiling takes about 25 times
	// the module's size in memory, once per module.
	MaxModuleBytes = 64 << 20
	// MaxTableElements is the highest limits.table_elements (128 MiB of
	// references per instance).
	MaxTableElements = 1 << 24
	// MaxBatch bounds the records of one batch call (host.MaxBatch,
	// batch_records).
	MaxBatch = 1024
)

// Defaults of a module's limits (host.Limits' zero fields; limits.*).
const (
	MemoryPages    = 512     // 32 MiB
	TableElements  = 1 << 20 // 8 MiB; a Go guest's table holds ~6,000
	RecordTimeout  = 5 * time.Second
	MaxOutputs     = 1000
	MaxOutputBytes = 16 << 20
	// ~128 short lines a second per instance, after a burst of ~512.
	LogBytesPerSecond = 32 << 10
	LogBurstBytes     = 128 << 10
)

// Guest clocks (host.clock_resolution).
const (
	// DefaultClockResolution is the resolution of the clocks guests read
	// unless set.
	DefaultClockResolution = time.Millisecond
	// MaxClockResolution bounds the resolution: a guest runtime sleeps and
	// schedules by the monotonic clock, and one that does not move for
	// longer keeps its record waiting.
	MaxClockResolution = time.Second
)
