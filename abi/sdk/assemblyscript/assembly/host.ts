// The host functions of ABI.md §4 (module wasmstream_v1), record_next of
// the batch entry (§10), completion_next of the completions entry (§10.1)
// and the WASI functions the SDK uses (environment
// variables, stderr).

// @ts-ignore: decorator
@external("wasmstream_v1", "record_read")
export declare function record_read(handle: u32, buf: usize, bufLen: u32): i32;
// @ts-ignore: decorator
@external("wasmstream_v1", "emit")
export declare function emit(handle: u32, ptr: usize, len: u32): i32;
// @ts-ignore: decorator
@external("wasmstream_v1", "set_error")
export declare function set_error(handle: u32, ptr: usize, len: u32): i32;
// @ts-ignore: decorator
@external("wasmstream_v1", "log")
export declare function log(level: i32, ptr: usize, len: u32): void;
// @ts-ignore: decorator
@external("wasmstream_v1", "async_start")
export declare function async_start(handle: u32, kind: i32, req: usize, reqLen: u32): i32;
// @ts-ignore: decorator
@external("wasmstream_v1", "result_read")
export declare function result_read(op: u32, buf: usize, bufLen: u32): i32;
// @ts-ignore: decorator
@external("wasmstream_v1", "state_get")
export declare function state_get(handle: u32, key: usize, keyLen: u32, buf: usize, bufLen: u32): i32;
// @ts-ignore: decorator
@external("wasmstream_v1", "state_put")
export declare function state_put(handle: u32, key: usize, keyLen: u32, val: usize, valLen: u32): i32;
// @ts-ignore: decorator
@external("wasmstream_v1", "state_delete")
export declare function state_delete(handle: u32, key: usize, keyLen: u32): i32;
// @ts-ignore: decorator
@external("wasmstream_v1", "state_scan")
export declare function state_scan(handle: u32, prefix: usize, prefixLen: u32, after: usize, afterLen: u32, buf: usize, bufLen: u32): i32;

// Event time (ABI.md §4.2), raw: two-part state keys (only key is checked
// against the record's partition; sub is free, at most 1024 bytes), the
// partition's stream time (written at out as an i64, little-endian) and
// event-time timers. handle is the call's: Emitter.handle in the processor,
// the firing's in wasmstream_on_timer, which a module that imports
// timer_set must export itself (docs/SDK.md, "Windows and timers").
// AssemblyScript links an import only when the module calls it.
// @ts-ignore: decorator
@external("wasmstream_v1", "state_get2")
export declare function state_get2(handle: u32, key: usize, keyLen: u32, sub: usize, subLen: u32, buf: usize, bufLen: u32): i32;
// @ts-ignore: decorator
@external("wasmstream_v1", "state_put2")
export declare function state_put2(handle: u32, key: usize, keyLen: u32, sub: usize, subLen: u32, val: usize, valLen: u32): i32;
// @ts-ignore: decorator
@external("wasmstream_v1", "state_delete2")
export declare function state_delete2(handle: u32, key: usize, keyLen: u32, sub: usize, subLen: u32): i32;
// @ts-ignore: decorator
@external("wasmstream_v1", "state_scan2")
export declare function state_scan2(handle: u32, key: usize, keyLen: u32, prefix: usize, prefixLen: u32, after: usize, afterLen: u32, buf: usize, bufLen: u32): i32;
// @ts-ignore: decorator
@external("wasmstream_v1", "stream_time")
export declare function stream_time(handle: u32, out: usize): i32;
// @ts-ignore: decorator
@external("wasmstream_v1", "timer_set")
export declare function timer_set(handle: u32, key: usize, keyLen: u32, at: i64): i32;
// @ts-ignore: decorator
@external("wasmstream_v1", "timer_delete")
export declare function timer_delete(handle: u32, key: usize, keyLen: u32, at: i64): i32;

// The batch entry (ABI.md §10), module wasmstream_batch_v1.
// @ts-ignore: decorator
@external("wasmstream_batch_v1", "record_next")
export declare function record_next(status: i32, out: usize, outLen: u32, buf: usize, bufLen: u32): i32;

// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "environ_sizes_get")
export declare function environ_sizes_get(count: usize, size: usize): u16;
// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "environ_get")
export declare function environ_get(environ: usize, buf: usize): u16;
// @ts-ignore: decorator
@external("wasi_snapshot_preview1", "fd_write")
export declare function fd_write(fd: u32, iovs: usize, iovsLen: u32, nwritten: usize): u16;
// @ts-ignore: decorator
@external("wasmstream_batch_v1", "completion_next")
export declare function completion_next(status: i32, out: usize, outLen: u32, buf: usize, bufLen: u32): i32;
