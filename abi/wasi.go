package abi

import "sort"

// WASIModule is the import module of the WASI preview 1 functions a guest
// may call.
const WASIModule = "wasi_snapshot_preview1"

// wasiAllowed are the WASI preview 1 functions a guest may import (ABI.md §1
// lists the same): what the Go runtime and wasi-libc import for stdout and
// stderr, clocks, randomness, arguments, environment, yielding and exiting.
// No filesystem call (path_*, fd_read, fd_readdir, ...) and no socket call
// (sock_*): a module importing one is refused at load. fd_prestat_get and
// the fd_* calls below exist for the runtimes' start-up and for stdout and
// stderr; there are no preopened directories and no other descriptors.
var wasiAllowed = map[string]bool{
	"args_get":            true,
	"args_sizes_get":      true,
	"environ_get":         true,
	"environ_sizes_get":   true,
	"clock_res_get":       true,
	"clock_time_get":      true,
	"random_get":          true,
	"poll_oneoff":         true, // clock subscriptions only: there are no readable descriptors
	"sched_yield":         true,
	"proc_exit":           true,
	"fd_write":            true, // stdout and stderr
	"fd_seek":             true,
	"fd_close":            true,
	"fd_fdstat_get":       true,
	"fd_fdstat_set_flags": true,
	"fd_prestat_get":      true, // answers "no preopened directory"
	"fd_prestat_dir_name": true,
}

// WASIAllowed reports whether a guest may import the WASI preview 1
// function name.
func WASIAllowed(name string) bool { return wasiAllowed[name] }

// WASIFunctions returns the WASI preview 1 functions a guest may import,
// sorted.
func WASIFunctions() []string {
	fs := make([]string, 0, len(wasiAllowed))
	for f := range wasiAllowed {
		fs = append(fs, f)
	}
	sort.Strings(fs)
	return fs
}
