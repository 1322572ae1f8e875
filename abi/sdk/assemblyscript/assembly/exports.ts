// The module's exports (ABI.md §1, §3, §7, §10, §10.1). The processor's entry file
// re-exports them:  export * from "<sdk>/assembly/exports";

import { onRecord, onComplete, onBatch, onCompletions } from "./index";

export function wasmstream_abi_version(): i32 { return 1; }

export function wasmstream_on_record(handle: u32, len: u32): i32 { return onRecord(handle, len); }

export function wasmstream_on_complete(handle: u32, op: u32, len: u32): i32 { return onComplete(handle, op, len); }

export function wasmstream_on_batch_v1(first: u32, count: u32, maxLen: u32): i32 { return onBatch(first, count, maxLen); }

export function wasmstream_on_completions_v1(count: u32, maxLen: u32): i32 { return onCompletions(count, maxLen); }
