;; A transform that reads its first batch's records and then spins, never
;; asking for the next batch: the record deadline must interrupt it.
(module
  (import "redpanda_transform" "check_abi_version_2" (func $check))
  (import "redpanda_transform" "read_batch_header" (func $header (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "redpanda_transform" "read_next_record" (func $next (param i32 i32 i32 i32 i32) (result i32)))
  (import "redpanda_transform" "write_record" (func $write (param i32 i32) (result i32)))
  (memory (export "memory") 2)
  (func (export "_start")
    (local $len i32)
    call $check
    (drop (call $header (i32.const 0) (i32.const 8) (i32.const 12) (i32.const 16) (i32.const 20)
                        (i32.const 24) (i32.const 32) (i32.const 40) (i32.const 48) (i32.const 52)))
    (block $done
      (loop $records
        (local.set $len (call $next (i32.const 64) (i32.const 72) (i32.const 80) (i32.const 4096) (i32.const 126976)))
        (br_if $done (i32.lt_s (local.get $len) (i32.const 0)))
        (drop (call $write (i32.const 4096) (local.get $len)))
        (br $records)))
    (loop $forever (br $forever)))
)
