;; A transform of the development ABI 3: check_abi_version_3 and
;; read_batch_metadata, which answers 0 (absent) for every key here. Each
;; record is written back through write_record_with_options with empty
;; options (the default output), after a write to a topic the pipeline does
;; not list, which must fail with -3, and one with malformed options (-2).
(module
  (import "redpanda_transform" "check_abi_version_3" (func $check))
  (import "redpanda_transform" "read_batch_header" (func $header (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (import "redpanda_transform" "read_next_record" (func $next (param i32 i32 i32 i32 i32) (result i32)))
  (import "redpanda_transform" "write_record_with_options" (func $write (param i32 i32 i32 i32) (result i32)))
  (import "redpanda_transform" "read_batch_metadata" (func $meta (param i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  ;; options naming the topic "nowhere" (0x01, zig-zag varint 7 = 14, name)
  (data (i32.const 300) "\01\0enowhere")
  ;; an unknown option key
  (data (i32.const 320) "\07")
  (func (export "_start")
    (local $n i32) (local $i i32) (local $len i32) (local $k i32)
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
          (if (i32.lt_s (local.get $len) (i32.const 0)) (then unreachable))
          (local.set $k (i32.const 1))
          (loop $keys
            (if (i32.ne (call $meta (local.get $k) (i32.const 200) (i32.const 64)) (i32.const 0)) (then unreachable))
            (local.set $k (i32.add (local.get $k) (i32.const 1)))
            (br_if $keys (i32.le_s (local.get $k) (i32.const 7))))
          (if (i32.ne (call $write (i32.const 4096) (local.get $len) (i32.const 300) (i32.const 9)) (i32.const -3)) (then unreachable))
          (if (i32.ne (call $write (i32.const 4096) (local.get $len) (i32.const 320) (i32.const 1)) (i32.const -2)) (then unreachable))
          (if (i32.ne (call $write (i32.const 4096) (local.get $len) (i32.const 0) (i32.const 0)) (local.get $len)) (then unreachable))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $records)))
      (br $batches)))
)
