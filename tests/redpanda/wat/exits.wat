;; A transform that exits (WASI proc_exit(3)) on a record whose value is
;; "exit", and is otherwise an identity transform.
(module
  (import "redpanda_transform" "check_abi_version_2" (func $check))
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
          (local.set $len (call $next (i32.const 64) (i32.const 72) (i32.const 80) (i32.const 4096) (i32.const 126976)))
          ;; payload 01 08 "exit" 00: null key (-1), value of 4 bytes "exit", no headers
          (if (i32.and (i32.eq (local.get $len) (i32.const 7))
                       (i32.eq (i32.load (i32.const 4098)) (i32.const 0x74697865)))
            (then (call $exit (i32.const 3))))
          (drop (call $write (i32.const 4096) (local.get $len)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $records)))
      (br $batches)))
)
