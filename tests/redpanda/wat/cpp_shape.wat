;; The import set of a transform built with Redpanda's C++ SDK (and of the
;; JS SDK's QuickJS runtime, built from it): check_abi_version_1, no
;; write_record_with_options. An identity transform that first asks for each
;; record with a buffer too small (-2: the record stays next), as a
;; transform that sizes its buffer by the record may.
(module
  (import "redpanda_transform" "check_abi_version_1" (func $check))
  (import "redpanda_transform" "read_batch_header" (func $header (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "redpanda_transform" "read_next_record" (func $next (param i32 i32 i32 i32 i32) (result i32)))
  (import "redpanda_transform" "write_record" (func $write (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
  (memory (export "memory") 2)
  (func (export "_start")
    (local $n i32) (local $i i32) (local $len i32)
    call $check
    (loop $batches
      (drop (call $header (i32.const 0) (i32.const 8) (i32.const 12) (i32.const 16) (i32.const 20)
                          (i32.const 24) (i32.const 32) (i32.const 40) (i32.const 48) (i32.const 52)))
      (local.set $n (i32.load (i32.const 8)))
      (local.set $i (i32.const 0))
      (block $done
        (loop $records
          (br_if $done (i32.ge_s (local.get $i) (local.get $n)))
          (if (i32.ne (call $next (i32.const 64) (i32.const 72) (i32.const 80) (i32.const 4096) (i32.const 0)) (i32.const -2))
            (then unreachable))
          (local.set $len (call $next (i32.const 64) (i32.const 72) (i32.const 80) (i32.const 4096) (i32.const 126976)))
          (if (i32.lt_s (local.get $len) (i32.const 0)) (then unreachable))
          (if (i32.ne (call $write (i32.const 4096) (local.get $len)) (local.get $len)) (then unreachable))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $records)))
      ;; past the last record: -1
      (if (i32.ne (call $next (i32.const 64) (i32.const 72) (i32.const 80) (i32.const 4096) (i32.const 126976)) (i32.const -1))
        (then unreachable))
      (br $batches)))
)
